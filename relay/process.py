"""Finding and killing the processes an agent run started, so none outlives it.

Each run puts a marker variable in its children's environment; the variable is inherited by
everything they spawn (MCP servers, shells, sandboxes), so a /proc scan finds even processes that
left the run's process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

__all__ = ["kill_marked", "marked_pids"]

_SWEEPS = 5
# A killed process keeps its environment in /proc until it has exited: SIGKILL takes effect in milliseconds, but
# on a loaded machine a scan right after the kill still found one (a Codex app-server, under the full test suite).
_GONE_S = 1.0
_GONE_POLL_S = 0.005
_SETTLE_S = 0.02


def marked_pids(name: str, value: str) -> list[int]:
    """Live processes whose environment carries ``name=value`` (Linux /proc; empty elsewhere)."""
    needle = f"{name}={value}".encode()
    found: list[int] = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours
    return found


def kill_marked(name: str, value: str, *, pgid: int | None = None) -> list[int]:
    """SIGKILL a process group (when given) and every process carrying the marker; returns the pids hit, once
    they are gone (at most ``_GONE_S`` later).

    The scan is repeated until it finds nothing new: a child forked while a scan ran is not in it, but it
    carries the marker too, and its parent (killed) can fork no more; one still in its exec is invisible for a
    moment, so the last scan comes a moment after the others.
    """
    victims = marked_pids(name, value)
    if pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    hit: list[int] = []
    for _ in range(_SWEEPS):
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        hit += victims
        victims = [pid for pid in marked_pids(name, value) if pid not in hit]
        if not victims and hit:
            # A process still in its exec shows no environment yet (a child the killed just started): look
            # once more a moment later.
            time.sleep(_SETTLE_S)
            victims = [pid for pid in marked_pids(name, value) if pid not in hit]
        if not victims:
            break
    _wait_gone(name, value, hit)
    return hit


def _wait_gone(name: str, value: str, pids: list[int]) -> None:
    """Return once none of ``pids`` carries the marker any more, or after ``_GONE_S``: whoever scans next (a
    sweep, a test) must not find the dying."""
    deadline = time.monotonic() + _GONE_S
    while pids and set(pids) & set(marked_pids(name, value)) and time.monotonic() < deadline:
        time.sleep(_GONE_POLL_S)
