"""The facts folder's layout as git sees it: what may live there, and repairing half-written event logs.

A sync must never commit a torn last line, and must refuse a folder (or a remote) that holds anything
but facts — a code repository synced by mistake would be worse than no sync.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from fnmatch import fnmatch
from pathlib import Path

from memory.errors import SyncError
from memory.facts.events import parse_event
from memory.storage.files import write_atomic_bytes

__all__ = [
    "EVENTS",
    "LOCAL_ONLY",
    "ROOT_NAMES",
    "SCRATCH",
    "SNAPSHOT",
    "ensure_lines",
    "few",
    "foreign_local",
    "foreign_tracked",
    "is_event",
    "is_scratch",
    "looks_like_code",
    "repair_lines",
    "repair_tail",
]

logger = logging.getLogger(__name__)

EVENTS = "events"
SNAPSHOT = "snapshot.tcl"
LOCAL_ONLY = (".lock", ".origin", "backups")  # never tracked: this installation's own
ROOT_NAMES = frozenset({".git", ".gitignore", ".gitattributes", "README.md", EVENTS, SNAPSHOT, *LOCAL_ONLY})
SCRATCH = ("*.lock", "*.bak", "*.bak-*", "*.tmp", ".DS_Store")  # ignored by git, harmless beside the facts


def is_scratch(name: str) -> bool:
    return any(fnmatch(name, pattern) for pattern in SCRATCH)


def foreign_local(folder: Path) -> list[str]:
    """Entries that do not belong to a facts folder (empty for a facts folder)."""
    bad = sorted(e.name for e in folder.iterdir() if e.name not in ROOT_NAMES and not is_scratch(e.name))
    events = folder / EVENTS
    if events.is_dir():
        bad += sorted(
            f"{EVENTS}/{e.name}"
            for e in events.iterdir()
            if not e.is_file() or not (e.name.endswith(".jsonl") or is_scratch(e.name))
        )
    elif events.exists():
        bad.append(EVENTS)
    return bad


def foreign_tracked(paths: Iterable[str]) -> list[str]:
    """Tracked paths a facts repository must not hold: foreign files, or files that are never synced."""
    bad = []
    for path in paths:
        head, _, rest = path.partition("/")
        if rest:
            ok = head == EVENTS and "/" not in rest and rest.endswith(".jsonl")
        else:
            ok = head in ROOT_NAMES and head not in LOCAL_ONLY and head != ".git"
        if not ok:
            bad.append(path)
    return bad


def few(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def looks_like_code(foreign: Sequence[str]) -> str:
    return f"it holds more than the facts layout ({few(foreign)}), it looks like a code repository"


def ensure_lines(path: Path, lines: Sequence[str]) -> None:
    """Write the file, or append the lines it lacks; never rewrite what the owner put there."""
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        missing = [line for line in lines if line not in text.splitlines()]
        if missing:
            sep = "\n" if text and not text.endswith("\n") else ""
            with path.open("a", encoding="utf-8") as f:
                f.write(sep + "\n".join(missing) + "\n")
    except OSError as exc:
        raise SyncError(f"cannot write {path}", stderr=str(exc)) from exc


def repair_tail(path: Path) -> bool:
    """End the log on a newline: cut a half-written last line (a crash mid-append), or close a whole one."""
    try:
        with path.open("r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return False
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return False
            f.seek(0)
            data = f.read()  # rare (only after a crash): reading it all is fine
            cut = data.rfind(b"\n") + 1
            if is_event(data[cut:]):  # only the newline was lost: keep the event, as the engine does
                f.write(b"\n")
                cut = size
            else:
                f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise SyncError(f"cannot repair {path}", stderr=str(exc)) from exc
    logger.warning("facts sync: repaired the last line of %s (%d bytes cut)", path, size - cut)
    return True


def repair_lines(path: Path) -> bool:
    """Rewrite a merged log keeping only whole events, each ending on a newline; True if it changed."""
    try:
        data = path.read_bytes()
        lines = data.split(b"\n")
        if not lines[-1]:
            lines.pop()  # the file ends on a newline, as it should
        kept = [line for line in lines if is_event(line)]
        if not data or (data.endswith(b"\n") and len(kept) == len(lines)):
            return False
        write_atomic_bytes(path, b"".join(line + b"\n" for line in kept))
    except OSError as exc:
        raise SyncError(f"cannot repair {path}", stderr=str(exc)) from exc
    logger.warning("facts sync: dropped %d damaged lines from %s", len(lines) - len(kept), path)
    return True


def is_event(line: bytes) -> bool:
    # Parsed as bytes: a line that is not UTF-8 counts as damaged here.
    return parse_event(line) is not None
