"""Which storage fault an SQLite or OS error is: by SQLite's result code and the OS errno, never by message text.

A fault is something the owner fixes outside the program (a damaged file, a full disk, a read-only file, a
failing device); everything else (a constraint, a busy lock still being retried, a mistake in SQL) is not
one and is left as it was raised.
"""

from __future__ import annotations

import errno
import os
import resource
import sqlite3
from pathlib import Path

from memory.errors import (
    MEMORY_RECOVER_WAY_OUT,
    DatabaseCorruptError,
    DiskFullError,
    NotADatabaseError,
    ReadOnlyStorageError,
    StorageError,
    StorageIOError,
)

__all__ = ["LOW_SPACE_BYTES", "is_busy", "is_readonly", "os_fault", "sqlite_fault"]

LOW_SPACE_BYTES = 1 << 20  # under this much free space, a failed write is taken as a full disk
_PAGE_MARGIN = 1 << 16  # the largest SQLite page: a file this close to the size limit cannot take another


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (extended codes included): another connection holds the lock for now."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_readonly(exc: sqlite3.Error) -> bool:
    """Plain SQLITE_READONLY (no extended code): a write refused, as on a ``query_only`` connection.

    The extended ones (a -shm that cannot be made, a moved file…) are faults even for a reader."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY


def sqlite_fault(
    path: Path, exc: sqlite3.Error, *, corrupt_way_out: str = MEMORY_RECOVER_WAY_OUT
) -> StorageError | None:
    """The typed fault ``exc`` is for the database at ``path``, or None when it is no storage fault."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF
    detail = str(exc)
    if primary == sqlite3.SQLITE_CORRUPT:
        return DatabaseCorruptError(path, detail, corrupt_way_out)
    if primary == sqlite3.SQLITE_NOTADB:
        return NotADatabaseError(path, None if corrupt_way_out == MEMORY_RECOVER_WAY_OUT else corrupt_way_out)
    if primary == sqlite3.SQLITE_FULL:
        return DiskFullError(path, detail, limit_bytes=_size_limit_reached(path))
    if primary == sqlite3.SQLITE_IOERR:
        # SQLite reports a write refused for the file-size limit (EFBIG) as a plain I/O error: tell them apart.
        limit = _size_limit_reached(path)
        if limit is not None or _disk_nearly_full(path):
            return DiskFullError(path, detail, limit_bytes=limit)
        return StorageIOError(path, f"{detail}: {getattr(exc, 'sqlite_errorname', code)}")
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM):
        return ReadOnlyStorageError(path, detail)
    if primary == sqlite3.SQLITE_CANTOPEN:
        return StorageIOError(path, f"{detail}: the file, its folder or its -wal/-shm file cannot be opened")
    return None


def os_fault(exc: OSError, path: Path | None = None) -> StorageError | None:
    """The typed fault an OS error on a storage file is (``path`` defaults to the error's own file name)."""
    where = path or (Path(os.fsdecode(exc.filename)) if exc.filename else None)
    if where is None:
        return None
    detail = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(where, detail)
    if exc.errno == errno.EFBIG:
        return DiskFullError(where, detail, limit_bytes=_size_limit_reached(where, margin=None))
    if exc.errno == errno.EROFS:
        return ReadOnlyStorageError(where, detail)
    if exc.errno == errno.EIO:
        return StorageIOError(where, detail)
    return None


def _size_limit_reached(path: Path, margin: int | None = _PAGE_MARGIN) -> int | None:
    """This process's file-size limit (``ulimit -f``) when the database or its journal has reached it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return None
    if margin is None:
        return soft
    for name in (path.name, f"{path.name}-wal", f"{path.name}-journal"):
        try:
            if (path.parent / name).stat().st_size + margin >= soft:
                return soft
        except OSError:
            continue
    return None


def _disk_nearly_full(path: Path) -> bool:
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < LOW_SPACE_BYTES
