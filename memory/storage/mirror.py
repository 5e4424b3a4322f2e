"""The readable handoff tree: `handoffs/YYYY/MM/DD/<session>.md`, written atomically.

A reader (a person, `git diff`, an editor) never sees a half-written file: each file is written to a
temporary sibling and renamed over the target (:mod:`memory.storage.files`). One handoff at a time, the file and
its folder are fsynced; a batch writer (`memory import`) passes ``sync=False`` and fsyncs each folder it
touched once, with :func:`sync_folders`, before it commits the batch.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import cast

from memory.errors import HandoffFormatError
from memory.handoffs.format import from_markdown
from memory.storage.files import fsync_dir, remove_quietly, write_atomic
from memory.timeutil import parse_iso

__all__ = [
    "handoff_relpath",
    "iter_handoff_files",
    "legacy_relpath",
    "remove_handoff",
    "sweep_stale_temp",
    "sync_folders",
    "write_handoff",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _legacy_name(session_id: str) -> str:
    # Subagent ids contain "/" ("<parent>/agent-<id>"): flatten them into one file name.
    name = _UNSAFE.sub("_", session_id).strip("._") or "session"
    return name[:200]


def _safe_name(session_id: str) -> str:
    """A file name only this session id maps to: the id itself when it is a safe name, else its safe
    form plus a hash of the id ("notes v1" and "notes_v1" must not share a file, nor "../x" and "x")."""
    name = _legacy_name(session_id)
    if name == session_id:
        return name
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{name[:180]}-{digest}"


@functools.lru_cache(maxsize=4096)
def _day_folder(date_iso: str) -> str:
    """``YYYY/MM/DD`` of an ISO date (``unknown`` when it is none); cached: an import asks for the same
    few hundred days thousands of times."""
    try:
        day = parse_iso(date_iso)
    except ValueError:
        return "unknown"
    return f"{day.year:04d}/{day.month:02d}/{day.day:02d}"


def handoff_relpath(session_id: str, date_iso: str) -> Path:
    """Where a handoff lives under the tree, by its own calendar date (`unknown/` when undated)."""
    return Path(f"{_day_folder(date_iso)}/{_safe_name(session_id)}.md")


def legacy_relpath(session_id: str, date_iso: str) -> Path | None:
    """Where versions before 2026-11-29 put this handoff, when that differs from :func:`handoff_relpath`
    (ids that are not safe file names). That name can be another session's: check before removing."""
    name = _legacy_name(session_id)
    return None if name == session_id else Path(f"{_day_folder(date_iso)}/{name}.md")


def write_handoff(
    root: Path, session_id: str, date_iso: str, text: str, *, old_date: str | None = None, sync: bool = True
) -> list[Path]:
    """Write a handoff's file under ``root`` and remove the copies it leaves behind: the file of its
    previous date (``old_date``, when an import or re-extraction moved it) and a pre-2026-11-29 name.

    Returns the folders it wrote or removed in; with ``sync=False`` the caller passes them to
    :func:`sync_folders`.
    """
    path = root / handoff_relpath(session_id, date_iso)
    write_atomic(path, text, sync=sync)
    folders = [path.parent]
    _remove_legacy(root, session_id, date_iso)
    if old_date is not None and old_date != date_iso:
        remove_handoff(root, session_id, old_date, keep=path)
        folders.append((root / handoff_relpath(session_id, old_date)).parent)
    return folders


def remove_handoff(root: Path, session_id: str, date_iso: str, *, keep: Path | None = None) -> None:
    """Remove a handoff's file for that date, and its pre-2026-11-29 name when that file is this session's."""
    path = root / handoff_relpath(session_id, date_iso)
    if path != keep:
        remove_quietly(path)
    _remove_legacy(root, session_id, date_iso)


def _remove_legacy(root: Path, session_id: str, date_iso: str) -> None:
    legacy = legacy_relpath(session_id, date_iso)
    if legacy is not None and _holds(root / legacy, session_id):
        remove_quietly(root / legacy)


def _load_syncfs() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return cast("Callable[[int], int]", fn)


_syncfs = _load_syncfs()


def sync_folders(root: Path, folders: Iterable[Path]) -> None:
    """Make a batch written with ``sync=False`` durable: its files' contents and renames, and the new day
    folders in their months, survive a power cut once this returns.

    On Linux one ``syncfs`` of the filesystem holding ``root`` does it all; an fsync per folder cost a
    disk flush each here (2-6 ms, so seconds for a batch spread over a few hundred days) and left the
    files' own contents to the kernel's writeback. Elsewhere, or for a folder on another filesystem,
    each folder and those above it up to ``root`` are fsynced.
    """
    todo: set[Path] = set()
    for folder in folders:
        todo.add(folder)
        todo.update(p for p in folder.parents if p.is_relative_to(root))
    if _syncfs is not None and todo:
        try:
            device = os.stat(root).st_dev
            elsewhere = {f for f in todo if os.stat(f).st_dev != device}  # another filesystem mounted inside
            fd = os.open(root, os.O_RDONLY)
        except OSError:
            pass  # fsync folder by folder below
        else:
            try:
                if _syncfs(fd) == 0:
                    todo = elsewhere
            finally:
                os.close(fd)
    for folder in sorted(todo, key=lambda p: (-len(p.parts), p)):
        fsync_dir(folder)


def _holds(path: Path, session_id: str) -> bool:
    """Whether the handoff file at ``path`` is ``session_id``'s (an old name can be another session's)."""
    try:
        return from_markdown(path.read_text(encoding="utf-8"), path=path).session_id == session_id
    except (OSError, UnicodeDecodeError, HandoffFormatError):
        return False


def iter_handoff_files(root: Path) -> Iterator[Path]:
    """Every `*.md` under root in a stable order, skipping hidden temp files."""
    for path in sorted(root.rglob("*.md")):
        if path.is_file() and not path.name.startswith("."):
            yield path


def sweep_stale_temp(root: Path, older_than_s: float = 600.0) -> int:
    """Remove temp files a killed writer left behind (old enough that no live writer owns them)."""
    if not root.is_dir():
        return 0
    cutoff = time.time() - older_than_s
    removed = 0
    for path in root.rglob(".*.tmp"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
    return removed
