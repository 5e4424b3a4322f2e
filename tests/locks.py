"""Whether a process holds SQLite's lock on a database file, read from the kernel's own table (/proc/locks).

A connection in WAL mode keeps a shared POSIX lock on bytes of the database file from its first read until
it closes; while any process holds one, no other process deletes the WAL as the "last one out". Losing it
(a stray ``open()``/``close()`` of the file in the same process drops it) is what lets acknowledged writes
vanish, so the tests ask the kernel rather than trust the code.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["holds_sqlite_lock", "lock_lines"]

_SHARED_FIRST = 0x40000000 + 2  # SQLite's PENDING_BYTE + 2: where the shared-lock range starts


def lock_lines(pid: int, path: Path) -> list[str]:
    """The lines of /proc/locks for locks ``pid`` holds on ``path``'s inode."""
    st = os.stat(path)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    out = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) >= 8 and fields[4] == str(pid) and fields[5] == inode:
            out.append(line)
    return out


def holds_sqlite_lock(pid: int, path: Path) -> bool:
    """Whether ``pid`` holds SQLite's shared lock (or a stronger one) on the database file ``path``."""
    for line in lock_lines(pid, path):
        fields = line.split()
        start, end = fields[6], fields[7]
        if start.isdigit() and int(start) <= _SHARED_FIRST and (end == "EOF" or int(end) >= _SHARED_FIRST):
            return True
    return False
