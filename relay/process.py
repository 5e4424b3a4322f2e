"""Finding and killing the processes an agent run started, so none outlives it.

Each run puts a marker variable in its children's environment; the variable is inherited by
everything they spawn (MCP servers, shells, sandboxes), so a /proc scan finds even processes that
left the run's process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

__all__ = ["kill_marked", "marked_pids"]

_SWEEPS = 5


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
    """SIGKILL a process group (when given) and every process carrying the marker; returns the pids hit.

    The scan is repeated until it finds nothing new: a child forked while a scan ran is not in it, but it
    carries the marker too, and its parent (killed) can fork no more.
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
        if not victims:
            break
    return hit
