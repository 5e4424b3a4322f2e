"""One rooted error hierarchy for the memory core; every error carries the fields a caller needs.

Every error the memory core raises on purpose is a :class:`MemoryStoreError`, so a caller that must not
fail on memory catches that alone. The tree (a class defined in another module names it)::

    MemoryStoreError
        StorageError
            DatabaseCorruptError
            NotADatabaseError
                ForeignDatabaseError
            DiskFullError
            ReadOnlyStorageError
            StorageIOError
            DatabaseLockedError
        SchemaTooNewError
        SourceUnreadableError
        DestinationError
        SettingsError  (also a ValueError)
        SessionNotFoundError
        HandoffFormatError
        ExtractionError
        SyncError
            SyncTimeoutError
            SyncRefusedError
            SyncConflictError
        FactsError  (memory.facts.model)
        SandboxCrash  (memory.facts.tcl)
        ReviewError  (memory.handoffs.review)
        HookSettingsError  (memory.hooks)
        RemoteMemoryError  (memory.remote.http)
            ServiceUnreachableError  (memory.remote.http)
            RemoteUnsupportedError  (memory.remote.http)
        ReplicaStateError  (memory.replica.rows)
        NothingToRecoverError  (memory.storage.recover)
        DatabaseInUseError  (memory.storage.share)

The relay's "Claude Code has no session to resume" is a :class:`SessionNotFoundError` too (relay.errors).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

__all__ = [
    "MEMORY_RECOVER_WAY_OUT",
    "RECOVER_COMMAND",
    "DatabaseCorruptError",
    "DatabaseLockedError",
    "DestinationError",
    "DiskFullError",
    "ExtractionError",
    "ForeignDatabaseError",
    "HandoffFormatError",
    "MemoryStoreError",
    "NotADatabaseError",
    "ReadOnlyStorageError",
    "SchemaTooNewError",
    "SessionNotFoundError",
    "SettingsError",
    "SourceUnreadableError",
    "StorageError",
    "StorageFault",
    "StorageIOError",
    "SyncConflictError",
    "SyncError",
    "SyncRefusedError",
    "SyncTimeoutError",
]


class MemoryStoreError(Exception):
    """Base of every error the memory core raises on purpose."""


RECOVER_COMMAND = "macupos memory recover"


class StorageFault(StrEnum):
    """What is wrong with a storage file; each kind has its own way out."""

    CORRUPT = "corrupt"  # damaged pages, or a file that is no database at all
    FOREIGN = "foreign"  # another program's SQLite file where ours should be
    FULL = "full"  # no room to write: the disk, a quota, or the process's file-size limit
    READONLY = "readonly"  # the file or its folder cannot be written
    IOERROR = "ioerror"  # the operating system failed a read or write, or the file cannot be opened
    LOCKED = "locked"  # another process kept the write lock past the busy timeout


class StorageError(MemoryStoreError):
    """A storage file cannot be used as it is. ``str()`` is one line: the file, what is wrong, the way out.

    Raised from :mod:`memory.db`'s classification of SQLite's error codes (and of OS errors); the CLI
    exits with status 3 for every one of them, the MCP server answers it as a tool error, the bot says it
    once per chat and keeps serving what needs no memory.
    """

    def __init__(self, path: Path, kind: StorageFault, problem: str, way_out: str) -> None:
        super().__init__(f"{problem}. Way out: {way_out}")
        self.path = path
        self.kind = kind
        self.problem = problem
        self.way_out = way_out


MEMORY_RECOVER_WAY_OUT = (
    f"stop the bot, then run `{RECOVER_COMMAND}`: it moves the damaged file aside and rebuilds memory from the "
    "readable handoffs/ mirror and the transcripts"
)


class DatabaseCorruptError(StorageError):
    """Damaged pages. ``way_out`` defaults to the memory database's (other files name their own)."""

    def __init__(self, path: Path, detail: str, way_out: str = MEMORY_RECOVER_WAY_OUT) -> None:
        super().__init__(path, StorageFault.CORRUPT, f"{path} is damaged ({detail})", way_out)
        self.detail = detail


class NotADatabaseError(StorageError):
    """Not SQLite at all, or a damaged header. ``way_out`` defaults to the memory database's."""

    def __init__(self, path: Path, way_out: str | None = None) -> None:
        super().__init__(
            path,
            StorageFault.CORRUPT,
            f"{path} is not a Macupos memory database (not SQLite, or damaged)",
            way_out
            or f"if it held Macupos memory, `{RECOVER_COMMAND}` moves it aside and rebuilds memory from the "
            "handoffs/ mirror; otherwise set MACUPOS_HOME to another folder",
        )


class ForeignDatabaseError(NotADatabaseError):
    """An SQLite file of another program where ours should be: it is left exactly as it is."""

    def __init__(self, path: Path) -> None:
        StorageError.__init__(
            self,
            path,
            StorageFault.FOREIGN,
            f"{path} is an SQLite database of another program (tables, but no Macupos schema): left untouched",
            "set MACUPOS_HOME to another folder, or move that file where its program expects it",
        )


class DiskFullError(StorageError):
    def __init__(self, path: Path, detail: str, *, limit_bytes: int | None = None) -> None:
        if limit_bytes is not None:
            problem = f"cannot write to {path}: it reached this process's file-size limit of {limit_bytes} bytes"
            way_out = "raise the limit (ulimit -f) and run the command again; nothing committed was lost"
        else:
            problem = f"cannot write to {path}: no space left on the disk ({detail})"
            way_out = f"free space on the disk that holds {path.parent}, then run the command again"
            way_out += "; nothing committed was lost"
        super().__init__(path, StorageFault.FULL, problem, way_out)
        self.detail = detail
        self.limit_bytes = limit_bytes


class ReadOnlyStorageError(StorageError):
    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(
            path,
            StorageFault.READONLY,
            f"cannot write to {path}: it is read-only ({detail})",
            f"make {path} and its folder writable by this user (ls -l {path.parent}), then run the command "
            "again; reading memory still works",
        )
        self.detail = detail


class StorageIOError(StorageError):
    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(
            path,
            StorageFault.IOERROR,
            f"I/O error on {path} ({detail})",
            f"check that {path.parent} is mounted and that {path.name} and its -wal and -shm files there are "
            "regular files this user can read and write (the kernel log names failing disks); then run "
            "`macupos doctor`",
        )
        self.detail = detail


class SchemaTooNewError(MemoryStoreError):
    def __init__(self, path: Path, found: int, supported: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, newer than this Macupos understands ({supported}); "
            "upgrade Macupos instead of downgrading the database"
        )
        self.path = path
        self.found = found
        self.supported = supported


class DatabaseLockedError(StorageError):
    def __init__(self, path: Path, waited_s: float) -> None:
        super().__init__(
            path,
            StorageFault.LOCKED,
            f"{path} stayed locked by another writer for {waited_s:.1f}s",
            "wait for the other Macupos process (a long ingest?) to finish, or stop it, then run the command again",
        )
        self.waited_s = waited_s


class SourceUnreadableError(MemoryStoreError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path = path
        self.reason = reason


class DestinationError(MemoryStoreError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot write to {path}: {reason}")
        self.path = path
        self.reason = reason


class SettingsError(MemoryStoreError, ValueError):
    """A setting (environment variable or config.toml entry) whose value cannot be used."""

    def __init__(self, setting: str, value: object, reason: str) -> None:
        super().__init__(f"{setting}: {reason}" + ("" if value is None else f" (got {value!r})"))
        self.setting = setting
        self.value = value


class SessionNotFoundError(MemoryStoreError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session or handoff with id {session_id!r}")
        self.session_id = session_id


class HandoffFormatError(MemoryStoreError):
    def __init__(self, path: Path | None, reason: str) -> None:
        where = f"{path}: " if path else ""
        super().__init__(f"{where}not a handoff file: {reason}")
        self.path = path
        self.reason = reason


class ExtractionError(MemoryStoreError):
    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"handoff extraction failed for {session_id}: {reason}")
        self.session_id = session_id
        self.reason = reason


class SyncError(MemoryStoreError):
    """A step of the facts sync failed; carries the git command, its exit status and the end of its stderr."""

    def __init__(
        self, message: str, *, command: Sequence[str] = (), returncode: int | None = None, stderr: str = ""
    ) -> None:
        tail = stderr[-2000:].strip()  # the end of git's stderr says what went wrong
        super().__init__(f"{message}: {tail}" if tail else message)
        self.command = tuple(command)
        self.returncode = returncode
        self.stderr_tail = tail


class SyncTimeoutError(SyncError):
    def __init__(self, command: Sequence[str], timeout_s: float) -> None:
        super().__init__(f"{' '.join(command)} ran past {timeout_s:g}s and was killed", command=command)
        self.timeout_s = timeout_s


class SyncRefusedError(SyncError):
    def __init__(self, folder: Path, reason: str) -> None:
        super().__init__(f"refusing to sync {folder}: {reason}")
        self.folder = folder
        self.reason = reason


class SyncConflictError(SyncError):
    def __init__(self, paths: Sequence[str], stderr: str) -> None:
        super().__init__(f"merge conflict outside the regenerated files: {', '.join(paths)}", stderr=stderr)
        self.paths = tuple(paths)
