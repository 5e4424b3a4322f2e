"""Worktrees are not projects: a session in ``<P>/.macupos/worktrees/<branch>`` works on project ``<P>``.

The bot runs parallel agents (``@fix-login do X``) in git worktrees of the chat's project, at
``<project>/.macupos/worktrees/<branch>`` (a branch name with ``/`` makes nested folders). Claude Code writes
the worktree as the session's ``cwd``; memory keeps that raw ``cwd`` (the session page shows it beside the
branch) but groups, indexes and recalls the session under the main folder. The rule is on the string alone,
never the file system: the service ingests transcripts uploaded from other machines.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.handoffs.format import normalize_keyword

__all__ = ["WORKTREES", "is_worktree", "project_root", "project_root_sql", "worktree_projects"]

WORKTREES = "/.macupos/worktrees"  # below a project's folder, with "/" for either separator
_MARK = WORKTREES + "/"


def _at(cwd: str) -> int:
    """Where ``cwd``'s first worktrees folder starts (its project's folder ends), or -1."""
    if ".macupos" not in cwd:
        return -1
    return (cwd.replace("\\", "/") + "/").find(_MARK)


def project_root(cwd: str) -> str:
    """The project folder of a session's working folder: ``<P>`` for ``<P>/.macupos/worktrees/<anything>``
    (either separator; the first such folder on the path), ``cwd`` itself otherwise."""
    at = _at(cwd)
    if at < 0:
        return cwd
    return cwd[:at] or cwd[0]  # "/" for a worktree of the file system's root


def is_worktree(cwd: str) -> bool:
    """Whether ``cwd`` is in a worktree the bot made (:func:`project_root` is another folder)."""
    return _at(cwd) >= 0


def project_root_sql(column: str) -> str:
    """:func:`project_root` of ``column`` as an SQLite expression, its separators written ``/``."""
    path = f"replace({column}, '\\', '/')"
    at = f"instr({path} || '/', '{_MARK}')"
    return f"(CASE WHEN {at} > 0 THEN substr({path}, 1, {at} - 1) ELSE {path} END)"


def worktree_projects(projects: Sequence[str], cwd: str, main: Sequence[str] = ()) -> list[str]:
    """A worktree session's handoff projects: ``main`` (its project folder's names) first, then ``projects``
    but the names only the worktree's own folders give (``macupos``, ``worktrees``, its branch's parts).
    ``projects`` as they are when ``cwd`` is no worktree."""
    at = _at(cwd)
    if at < 0:
        return list(projects)
    below = cwd.replace("\\", "/")[at + 1 :].split("/")  # ".macupos", "worktrees", the branch's folders
    drop = {normalize_keyword(part) for part in below} - {*main, ""}
    return list(dict.fromkeys([*main, *(p for p in projects if p not in drop)]))
