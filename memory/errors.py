"""One rooted error hierarchy for the memory core; every error carries the fields a caller needs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DatabaseLockedError",
    "DestinationError",
    "ExtractionError",
    "ForeignDatabaseError",
    "HandoffFormatError",
    "MemoryStoreError",
    "NotADatabaseError",
    "SchemaTooNewError",
    "SessionNotFoundError",
    "SettingsError",
    "SourceUnreadableError",
    "SyncConflictError",
    "SyncError",
    "SyncRefusedError",
    "SyncTimeoutError",
]


class MemoryStoreError(Exception):
    """Base of every error the memory core raises on purpose."""


class NotADatabaseError(MemoryStoreError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is not a Macupos memory database (not SQLite, or damaged)")
        self.path = path


class ForeignDatabaseError(NotADatabaseError):
    """An SQLite file of another program where ours should be: it is left exactly as it is."""

    def __init__(self, path: Path) -> None:
        MemoryStoreError.__init__(
            self, f"{path} is an SQLite database of another program (tables, but no Macupos schema): left untouched"
        )
        self.path = path


class SchemaTooNewError(MemoryStoreError):
    def __init__(self, path: Path, found: int, supported: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, newer than this Macupos understands ({supported}); "
            "upgrade Macupos instead of downgrading the database"
        )
        self.path = path
        self.found = found
        self.supported = supported


class DatabaseLockedError(MemoryStoreError):
    def __init__(self, path: Path, waited_s: float) -> None:
        super().__init__(f"{path} stayed locked by another writer for {waited_s:.1f}s")
        self.path = path
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
