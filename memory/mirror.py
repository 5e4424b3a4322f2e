"""The readable handoff tree: `handoffs/YYYY/MM/DD/<session>.md`, written atomically.

A reader (a person, `git diff`, an editor) never sees a half-written file: each file is written to a
temporary sibling, fsynced and renamed over the target.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

__all__ = ["handoff_relpath", "iter_handoff_files", "remove_quietly", "sweep_stale_temp", "write_atomic"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe_name(session_id: str) -> str:
    # Subagent ids contain "/" ("<parent>/agent-<id>"): flatten them into one file name.
    name = _UNSAFE.sub("_", session_id).strip("._") or "session"
    return name[:200]


def handoff_relpath(session_id: str, date_iso: str) -> Path:
    """Where a handoff lives under the tree, by its own calendar date (`unknown/` when undated)."""
    try:
        day = datetime.fromisoformat(date_iso.replace("Z", "+00:00"))
        folder = Path(f"{day.year:04d}") / f"{day.month:02d}" / f"{day.day:02d}"
    except ValueError:
        folder = Path("unknown")
    return folder / f"{_safe_name(session_id)}.md"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(Path(tmp))
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename itself is already atomic
    finally:
        os.close(dir_fd)


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


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
