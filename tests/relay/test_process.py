"""Killing the processes a run started (relay.process): the marked ones go, children included, and are gone
from /proc by the time the kill returns."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import uuid

from relay.process import kill_marked, marked_pids

# A parent that starts a child and waits; the child says when it runs (its environment is readable in /proc only
# once its exec has finished, which may be after the parent's Popen returned). Both carry the marker.
_FAMILY = (
    "import subprocess, sys\n"
    "subprocess.run([sys.executable, '-c', 'import time; print(\"up\", flush=True); time.sleep(600)'])\n"
)


def test_every_marked_process_is_killed_and_gone_from_the_scan_when_the_kill_returns() -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, "MACUPOS_TEST_MARK": marker}
    parent = subprocess.Popen([sys.executable, "-c", _FAMILY], env=env, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(parent.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=30), "the child did not start"
        assert parent.stdout.readline() == b"up\n"
        assert len(marked_pids("MACUPOS_TEST_MARK", marker)) == 2
        hit = kill_marked("MACUPOS_TEST_MARK", marker)
        assert parent.pid in hit and len(hit) == 2
        # No wait here: a killed process keeps its environment in /proc until it has exited, and the kill
        # returns only once it has.
        assert marked_pids("MACUPOS_TEST_MARK", marker) == []
    finally:
        parent.kill()
        parent.wait(10)
