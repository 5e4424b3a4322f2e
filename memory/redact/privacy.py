"""Private projects: folders whose sessions memory never ingests, never sends to the extraction model and
never recalls into another project.

A project is private when its folder is under one of these paths:

- ``MACUPOS_PRIVATE_PROJECTS`` (comma-separated) or ``[memory] private_projects`` in config.toml
  (:attr:`MemorySettings.private_projects`), for anyone;
- the lines of ``$MACUPOS_HOME/private-projects``: the list the bot keeps (``MACUPOS_PROJECTS`` entries
  marked ``:private`` and ``/memory off``), read afresh whenever it changes, so Claude Code's hooks and a
  ``memory ingest`` started outside the bot see the bot's switches too.

Sessions are told apart by their working folder (a transcript's ``cwd``); a handoff is hidden from other
projects also when it names a private project (its folder's name) among its projects. The bot's worktrees of
a project (``<project>/.macupos/worktrees/<branch>``, memory.sources.worktrees) are inside its folder: a private
project's cover them, and its worktree sessions' handoffs name the project's folder.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memory.handoffs.format import normalize_keyword
from memory.settings import MemorySettings
from memory.storage.files import write_atomic

__all__ = ["PRIVATE_FILE", "Privacy", "hidden_sessions", "load_privacy", "write_private_file"]

PRIVATE_FILE = "private-projects"
_HEADER = (
    "# Written by the Macupos bot (MACUPOS_PROJECTS ':private' entries and /memory off); one folder a line.\n"
    "# Memory never ingests, extracts or recalls into other projects the sessions under these folders.\n"
)
_cache: dict[Path, tuple[int, int, tuple[Path, ...]]] = {}  # file -> (mtime_ns, size, its paths)


def _forms(path: Path) -> set[Path]:
    """The path as written and with its links resolved: a session's cwd may be either."""
    forms = {path}
    with contextlib.suppress(OSError, ValueError):
        forms.add(Path(os.path.realpath(path)))
    return forms


@dataclass(frozen=True, slots=True)
class Privacy:
    """The private folders in force; falsy when there are none."""

    paths: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.paths)

    def covers(self, folder: str | Path | None) -> bool:
        """Whether ``folder`` (a session's working folder) is one of the private folders or inside one."""
        if not folder or not self.paths:
            return False
        raw = Path(folder)
        if not raw.is_absolute():
            return False  # no folder to judge by
        candidates = _forms(raw)
        private = {form for path in self.paths for form in _forms(path)}
        return any(c == p or p in c.parents for c in candidates for p in private)

    @property
    def names(self) -> frozenset[str]:
        """The private folders' names as handoffs name projects (``Client X`` → ``client-x``)."""
        return frozenset(n for n in (normalize_keyword(p.name) for p in self.paths) if n)

    def without(self, viewer: Path | None) -> Privacy:
        """What stays hidden from ``viewer`` (the folder of the project asking): every private folder but its
        own. A private project sees its own past sessions, and no one else's private ones."""
        if viewer is None:
            return self
        mine = _forms(viewer)
        return Privacy(
            tuple(p for p in self.paths if not any(c == q or q in c.parents for c in mine for q in _forms(p)))
        )


def _read_file(path: Path) -> tuple[Path, ...]:
    """The folders listed in the bot's file; none when it is missing or unreadable (never an error: a hook
    must not fail on it)."""
    try:
        st = path.stat()
    except OSError:
        return ()
    cached = _cache.get(path)
    if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
        return cached[2]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    found = tuple(
        Path(line).expanduser()
        for line in (raw.strip() for raw in text.splitlines())
        if line and not line.startswith("#") and Path(line).expanduser().is_absolute()
    )
    _cache[path] = (st.st_mtime_ns, st.st_size, found)
    return found


def load_privacy(settings: MemorySettings) -> Privacy:
    """The private folders now: the settings' and the bot's file's (re-read when the file changes)."""
    found = dict.fromkeys([*settings.private_projects, *_read_file(settings.home / PRIVATE_FILE)])
    return Privacy(tuple(found))


def write_private_file(home: Path, folders: Sequence[Path]) -> Path:
    """Replace the bot's list with ``folders`` (atomically: a hook reading it sees the old list or the new)."""
    path = home / PRIVATE_FILE
    body = "".join(f"{folder}\n" for folder in dict.fromkeys(folders))
    write_atomic(path, _HEADER + body)
    return path


def hidden_sessions(conn: sqlite3.Connection, privacy: Privacy, session_ids: Sequence[str]) -> set[str]:
    """Which of ``session_ids`` ``privacy`` hides, by their folder and their handoff's projects."""
    if not privacy or not session_ids:
        return set()
    ids = list(dict.fromkeys(session_ids))
    marks = ",".join("?" * len(ids))
    cwd = {
        str(s): str(c or "")
        for s, c in conn.execute(f"SELECT session_id, cwd FROM sessions WHERE session_id IN ({marks})", ids)
    }
    projects = {
        str(s): str(p or "")
        for s, p in conn.execute(f"SELECT session_id, projects FROM handoffs WHERE session_id IN ({marks})", ids)
    }
    names = privacy.names
    return {
        sid
        for sid in ids
        if privacy.covers(cwd.get(sid, "")) or any(f'"{name}"' in projects.get(sid, "") for name in names)
    }
