"""Branch preference: a session on a git branch (the bot's parallel agents work in a worktree each) is
grounded first on the handoffs of sessions on that branch, then on the rest (docs/retrieval.md, "Branch").

It reorders, it never scores: of the ``BRANCH_POOL × k`` best handoffs by the usual score, those whose
session's branch is the one asked come first (in score order), then the others (in score order), cut to k.
A session's branch is its transcript's ``gitBranch`` (``sessions.git_branch``); a handoff imported without
its session tells it by its file's optional ``branch:`` key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memory.errors import HandoffFormatError
from memory.handoffs.format import from_markdown

if TYPE_CHECKING:
    from memory.index.retrieval import ScoredHandoff

__all__ = ["BRANCH_POOL", "BranchNote", "prefer_branch", "session_branches"]

BRANCH_POOL = 3  # candidates read per result wanted when a branch is preferred


@dataclass(frozen=True, slots=True)
class BranchNote:
    """How the branch preference placed one result."""

    branch: str  # the branch preferred
    same: bool  # this handoff's session was on it
    score_rank: int  # its place by score alone among the candidates (1: the best)


def session_branches(conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, str]:
    """The git branch of each of ``session_ids`` that has one: its session's, else its handoff file's."""
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT session_id, git_branch FROM sessions WHERE session_id IN ({marks})", ids)
    found = {str(sid): str(branch or "") for sid, branch in rows}
    imported = [sid for sid in ids if sid not in found]
    if imported:
        marks = ",".join("?" * len(imported))
        for sid, markdown in conn.execute(
            f"SELECT session_id, markdown FROM handoffs WHERE session_id IN ({marks})", imported
        ):
            try:
                branch = from_markdown(str(markdown)).extra.get("branch")
            except HandoffFormatError:
                continue
            if isinstance(branch, str):
                found[str(sid)] = branch
    return {sid: branch for sid, branch in found.items() if branch}


def prefer_branch(
    conn: sqlite3.Connection, ranked: Sequence[ScoredHandoff], branch: str, k: int
) -> list[ScoredHandoff]:
    """``ranked`` (best first) with the handoffs of ``branch``'s sessions first, each noted, cut to ``k``."""
    branches = session_branches(conn, [r.session_id for r in ranked])
    notes = [BranchNote(branch, branches.get(r.session_id) == branch, rank) for rank, r in enumerate(ranked, 1)]
    noted = [replace(r, branch_note=note) for r, note in zip(ranked, notes, strict=True)]
    return sorted(noted, key=lambda r: not (r.branch_note and r.branch_note.same))[:k]  # stable: score order kept
