"""Read models of the memory database for the pages (service/web) and the service: the sessions list, a
session's children, a slice of a long transcript, which source files hold which sessions, the counts.

Each is one short read, most for ``Database.read`` (a plain read connection, one snapshot). A transcript is never
loaded whole: a page of it is read from the row with SQLite's incremental blob I/O, so a 10 MB session
costs the bytes of the page shown, not 10 MB of Python string.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from memory.sources.worktrees import project_root_sql

__all__ = [
    "Child",
    "SessionItem",
    "children",
    "counts",
    "list_sessions",
    "sources_holding",
]


@dataclass(frozen=True, slots=True)
class SessionItem:
    session_id: str
    kind: str
    parent_id: str
    at: str  # ISO start (a transcript's) or date (a handoff's)
    title: str
    cwd: str
    headline: str
    projects: tuple[str, ...]
    has_transcript: bool
    has_handoff: bool
    children: int
    review: str


@dataclass(frozen=True, slots=True)
class Child:
    session_id: str
    kind: str
    title: str
    at: str


# Every session, narrow (id, time, kind, parent, folder): transcripts, and handoffs imported without one. A
# page is chosen on these columns alone (10,000 rows sort in milliseconds), then its rows are read in full.
_KEYS = """
WITH listed AS (
    SELECT session_id AS id, started_at AS at, kind, parent_id AS parent, cwd FROM sessions
    UNION ALL
    SELECT h.session_id, h.date, h.kind, h.parent_id, '' FROM handoffs AS h
    WHERE NOT EXISTS (SELECT 1 FROM sessions AS s WHERE s.session_id = h.session_id)
)
SELECT id FROM listed
"""

_DETAILS = """
SELECT k.id, COALESCE(s.kind, h.kind), COALESCE(s.parent_id, h.parent_id), COALESCE(s.started_at, h.date),
       COALESCE(s.title, ''), COALESCE(s.cwd, ''), COALESCE(h.headline, ''), COALESCE(h.projects, '[]'),
       s.session_id IS NOT NULL, h.session_id IS NOT NULL, COALESCE(h.review, ''),
       (SELECT count(*) FROM sessions AS c WHERE c.parent_id = k.id)
FROM (SELECT value AS id FROM json_each(?)) AS k
LEFT JOIN sessions AS s ON s.session_id = k.id
LEFT JOIN handoffs AS h ON h.session_id = k.id
"""


def _filters(project: str, kind: str, since: str, until: str) -> tuple[str, list[Any]]:
    where: list[str] = []
    args: list[Any] = []
    if kind:
        where.append("kind = ?")
        args.append(kind)
    else:  # the top of each family: children are listed under their parent's page
        where.append("parent = ''")
    if since:
        where.append("substr(at, 1, 10) >= ?")
        args.append(since)
    if until:
        where.append("substr(at, 1, 10) <= ?")
        args.append(until)
    if project:
        # A handoff's project names, or the last folder of the session's project folder (a worktree's main one).
        where.append(
            "(EXISTS (SELECT 1 FROM handoffs AS p, json_each(p.projects) AS j"
            " WHERE p.session_id = listed.id AND lower(j.value) = lower(?))"
            f" OR lower({project_root_sql('cwd')}) LIKE '%/' || lower(?))"
        )
        args += [project, project]
    return (" WHERE " + " AND ".join(where)) if where else "", args


def list_sessions(
    conn: sqlite3.Connection, *, project: str, kind: str, since: str, until: str, limit: int, offset: int
) -> list[SessionItem]:
    """Newest first. ``kind`` "" lists families (sessions with no parent); a kind lists that kind alone.
    ``since`` / ``until`` are inclusive days (YYYY-MM-DD)."""
    where, args = _filters(project, kind, since, until)
    sql = _KEYS + where + " ORDER BY at DESC, id LIMIT ? OFFSET ?"
    ids = [r[0] for r in conn.execute(sql, (*args, limit, offset)).fetchall()]
    found = {r[0]: r for r in conn.execute(_DETAILS, (json.dumps(ids),)).fetchall()}
    return [
        SessionItem(
            session_id=str(r[0]),
            kind=str(r[1]),
            parent_id=str(r[2]),
            at=str(r[3]),
            title=str(r[4]),
            cwd=str(r[5]),
            headline=str(r[6]),
            projects=tuple(str(p) for p in json.loads(str(r[7]) or "[]")),
            has_transcript=bool(r[8]),
            has_handoff=bool(r[9]),
            review=str(r[10]),
            children=int(r[11]),
        )
        for r in (found[i] for i in ids if i in found)
    ]


def children(conn: sqlite3.Connection, session_id: str) -> list[Child]:
    """A session's subagents and the Codex rollouts linked to it."""
    sql = "SELECT session_id, kind, title, started_at FROM sessions WHERE parent_id = ? ORDER BY started_at, session_id"
    return [Child(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in conn.execute(sql, (session_id,)).fetchall()]


async def sources_holding(
    conn: aiosqlite.Connection, session_ids: Iterable[str], *, under: Path | None = None
) -> set[Path]:
    """Every source file (under folder ``under``) whose last read found one of ``session_ids``: a session
    read from two files (an upload under two names) is in both, and its session row names only one."""
    wanted = set(session_ids)
    found: set[Path] = set()
    async with conn.execute("SELECT path, session_ids FROM sources") as cur:
        async for path, held in cur:
            candidate = Path(str(path))
            if (under is None or candidate.is_relative_to(under)) and wanted.intersection(json.loads(held)):
                found.add(candidate)
    return found


async def counts(conn: aiosqlite.Connection) -> dict[str, Any]:
    """What the memory holds, counted (``Eywa.stats``)."""

    async def scalar(sql: str) -> int:
        async with conn.execute(sql) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    kinds: dict[str, int] = {}
    async with conn.execute("SELECT kind, count(*) FROM sessions GROUP BY kind ORDER BY kind") as cur:
        for kind, n in await cur.fetchall():
            kinds[str(kind)] = int(n)
    extract: dict[str, int] = {}
    async with conn.execute("SELECT extract_state, count(*) FROM sessions GROUP BY 1 ORDER BY 1") as cur:
        for state, n in await cur.fetchall():
            extract[str(state)] = int(n)
    return {
        "sources": await scalar("SELECT count(*) FROM sources"),
        "sessions": kinds,
        "extraction": extract,
        "handoffs": await scalar("SELECT count(*) FROM handoffs"),
        "handoffs_indexed": await scalar("SELECT count(*) FROM handoffs WHERE indexed = 1"),
        "project_terms": await scalar("SELECT count(*) FROM term_df WHERE field = 0"),
        "keyword_terms": await scalar("SELECT count(*) FROM term_df WHERE field = 1"),
        "postings": await scalar("SELECT count(*) FROM postings WHERE field < 2"),
        "lines_skipped": await scalar("SELECT count(*) FROM problems"),
        "forgotten": await scalar("SELECT count(*) FROM forgotten"),
    }
