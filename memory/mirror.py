"""The readable handoff tree: `handoffs/YYYY/MM/DD/<session>.md`, written atomically.

A reader (a person, `git diff`, an editor) never sees a half-written file: each file is written to a
temporary sibling and renamed over the target (:mod:`memory.fsutil`). One handoff at a time, the file and
its folder are fsynced; a batch writer (`memory import`) passes ``sync=False`` and fsyncs each folder it
touched once, with :func:`sync_folders`, before it commits the batch.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from memory.errors import HandoffFormatError
from memory.fsutil import fsync_dir, remove_quietly, write_atomic
from memory.handoff_format import from_markdown

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


def _day_folder(date_iso: str) -> Path:
    try:
        day = datetime.fromisoformat(date_iso.replace("Z", "+00:00"))
    except ValueError:
        return Path("unknown")
    return Path(f"{day.year:04d}") / f"{day.month:02d}" / f"{day.day:02d}"


def handoff_relpath(session_id: str, date_iso: str) -> Path:
    """Where a handoff lives under the tree, by its own calendar date (`unknown/` when undated)."""
    return _day_folder(date_iso) / f"{_safe_name(session_id)}.md"


def legacy_relpath(session_id: str, date_iso: str) -> Path | None:
    """Where versions before 2026-11-29 put this handoff, when that differs from :func:`handoff_relpath`
    (ids that are not safe file names). That name can be another session's: check before removing."""
    old = _day_folder(date_iso) / f"{_legacy_name(session_id)}.md"
    return None if old == handoff_relpath(session_id, date_iso) else old


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
    dates = [date_iso] if old_date is None or old_date == date_iso else [date_iso, old_date]
    for date in dates:
        remove_handoff(root, session_id, date, keep=path)
    return sorted({(root / handoff_relpath(session_id, date)).parent for date in dates})


def sync_folders(root: Path, folders: Iterable[Path]) -> None:
    """Fsync each folder once, and the folders above it up to ``root`` (a new day folder is an entry in its
    month's), so the renames of a batch written with ``sync=False`` survive a power cut."""
    todo: set[Path] = set()
    for folder in folders:
        todo.add(folder)
        todo.update(p for p in folder.parents if p.is_relative_to(root))
    for folder in sorted(todo, key=lambda p: (-len(p.parts), p)):
        fsync_dir(folder)


def remove_handoff(root: Path, session_id: str, date_iso: str, *, keep: Path | None = None) -> None:
    """Remove a handoff's file for that date, and its pre-2026-11-29 name when that file is this session's."""
    path = root / handoff_relpath(session_id, date_iso)
    if path != keep:
        remove_quietly(path)
    legacy = legacy_relpath(session_id, date_iso)
    if legacy is not None and root / legacy != keep and _holds(root / legacy, session_id):
        remove_quietly(root / legacy)


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
