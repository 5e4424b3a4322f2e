"""The pages' reads of a memory database: the sessions list, a slice of a long transcript, the cost ledger.

Each is one short read on the memory's read connection (``Database.read``). A transcript is never loaded
whole: a page of it is read from the row with SQLite's incremental blob I/O, so a 10 MB session costs the
bytes of the page shown, not 10 MB of Python string.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from memory import Eywa
from memory.sources import project_root_sql

__all__ = [
    "Child",
    "LedgerView",
    "SessionItem",
    "SessionMeta",
    "Slice",
    "children",
    "ledger_view",
    "list_sessions",
    "session_meta",
    "transcript_slice",
]

KINDS = ("main", "subagent", "codex")
PAGE_BYTES = 128 * 1024  # a transcript page: a phone's worth of scrolling, rendered in a few ms


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
class SessionMeta:
    """A transcript's row without its markdown (which can be megabytes)."""

    session_id: str
    kind: str
    parent_id: str
    cwd: str
    git_branch: str
    title: str
    model: str
    started_at: str
    ended_at: str
    duration_min: float
    n_entries: int
    extract_state: str


@dataclass(frozen=True, slots=True)
class Child:
    session_id: str
    kind: str
    title: str
    at: str


@dataclass(frozen=True, slots=True)
class Slice:
    text: str
    start: int  # bytes
    end: int
    total: int
    prev_start: int | None
    next_start: int | None


@dataclass(frozen=True, slots=True)
class LedgerView:
    engines: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    recent: list[dict[str, Any]] = field(default_factory=list)


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


async def list_sessions(
    eywa: Eywa, *, project: str = "", kind: str = "", since: str = "", until: str = "", limit: int, offset: int
) -> list[SessionItem]:
    """Newest first. ``kind`` "" lists families (sessions with no parent); a kind lists that kind alone.
    ``since`` / ``until`` are inclusive days (YYYY-MM-DD)."""
    where, args = _filters(project, kind, since, until)
    sql = _KEYS + where + " ORDER BY at DESC, id LIMIT ? OFFSET ?"

    def read(conn: sqlite3.Connection) -> list[Any]:
        ids = [r[0] for r in conn.execute(sql, (*args, limit, offset)).fetchall()]
        found = {r[0]: r for r in conn.execute(_DETAILS, (json.dumps(ids),)).fetchall()}
        return [found[i] for i in ids if i in found]

    rows = await eywa.db.read(read)
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
        for r in rows
    ]


async def session_meta(eywa: Eywa, session_id: str) -> SessionMeta | None:
    sql = (
        "SELECT session_id, kind, parent_id, cwd, git_branch, title, model, started_at, ended_at, duration_min,"
        " n_entries, extract_state FROM sessions WHERE session_id = ?"
    )
    r = await eywa.db.read(lambda conn: conn.execute(sql, (session_id,)).fetchone())
    if r is None:
        return None
    text = [str(v) for v in r[:9]]
    return SessionMeta(
        session_id=text[0],
        kind=text[1],
        parent_id=text[2],
        cwd=text[3],
        git_branch=text[4],
        title=text[5],
        model=text[6],
        started_at=text[7],
        ended_at=text[8],
        duration_min=float(r[9]),
        n_entries=int(r[10]),
        extract_state=str(r[11]),
    )


async def children(eywa: Eywa, session_id: str) -> list[Child]:
    """A session's subagents and the Codex rollouts linked to it."""
    sql = "SELECT session_id, kind, title, started_at FROM sessions WHERE parent_id = ? ORDER BY started_at, session_id"
    rows = await eywa.db.read(lambda conn: conn.execute(sql, (session_id,)).fetchall())
    return [Child(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]


def _turn_start(data: bytes, low: int) -> int | None:
    """The offset of the last turn heading (or else line start) in ``data`` at or after ``low``."""
    for needle in (b"\n## ", b"\n"):
        at = data.rfind(needle, low)
        if at >= 0:
            return at + 1
    return None


def _read_slice(conn: sqlite3.Connection, session_id: str, at: int, size: int) -> Slice | None:
    row = conn.execute("SELECT rowid FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    with conn.blobopen("sessions", "markdown", int(row[0]), readonly=True) as blob:
        total = len(blob)
        start = max(0, min(at, total))
        if start > 0:  # the requested offset moved to the start of its line (offsets come from links we made)
            back = max(0, start - 4096)
            blob.seek(back)
            head = blob.read(start - back)
            nl = head.rfind(b"\n")
            start = back + nl + 1 if nl >= 0 else start
        blob.seek(start)
        data = blob.read(size)
        end = start + len(data)
        if end < total:
            cut = _turn_start(data, len(data) // 2)
            if cut is not None and cut > 0:
                data = data[:cut]
                end = start + cut
        prev_start: int | None = None
        if start > 0:
            low = max(0, start - size)
            blob.seek(low)
            before = blob.read(start - low)
            first = before.find(b"\n## ") if low > 0 else -1
            prev_start = low + first + 1 if first >= 0 and low + first + 1 < start else low
    return Slice(
        text=data.decode("utf-8", errors="replace"),
        start=start,
        end=end,
        total=total,
        prev_start=prev_start,
        next_start=end if end < total else None,
    )


async def transcript_slice(eywa: Eywa, session_id: str, at: int, size: int = PAGE_BYTES) -> Slice | None:
    """The page of a session's rendered transcript that starts at byte ``at`` (cut at a turn when it can)."""
    return await eywa.db.read(lambda conn: _read_slice(conn, session_id, at, size))


_TOTALS = (
    "count(*), sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), sum(cost_usd),"
    " count(cost_usd), sum(duration_s)"
)


def _total(key: str, r: Any) -> dict[str, Any]:
    return {
        "key": key,
        "runs": int(r[0]),
        "tokens": int(r[1] or 0),
        "cost_usd": float(r[2]) if r[2] is not None else None,
        "priced": int(r[3]),
        "duration_s": float(r[4] or 0.0),
    }


def _read_ledger(conn: sqlite3.Connection, recent: int) -> LedgerView:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger'").fetchone() is None:
        return LedgerView()
    engines = [
        _total(str(r[0]), r[1:])
        for r in conn.execute(f"SELECT engine, {_TOTALS} FROM ledger GROUP BY engine ORDER BY engine").fetchall()
    ]
    sessions = [
        _total(str(r[0]), r[1:])
        for r in conn.execute(
            f"SELECT session_id, {_TOTALS} FROM ledger WHERE session_id != '' GROUP BY session_id "
            "ORDER BY coalesce(sum(cost_usd), 0) DESC, session_id LIMIT 20"
        ).fetchall()
    ]
    rows = conn.execute(
        "SELECT ts, engine, session_id, stage, model, input_tokens + output_tokens + cache_read_tokens"
        " + cache_write_tokens, cost_usd, duration_s FROM ledger ORDER BY id DESC LIMIT ?",
        (recent,),
    ).fetchall()
    latest = [
        {
            "ts": str(r[0]),
            "engine": str(r[1]),
            "session_id": str(r[2]),
            "stage": str(r[3]),
            "model": str(r[4]),
            "tokens": int(r[5] or 0),
            "cost_usd": float(r[6]) if r[6] is not None else None,
            "duration_s": float(r[7] or 0.0),
        }
        for r in rows
    ]
    return LedgerView(engines, sessions, latest)


async def ledger_view(eywa: Eywa, recent: int = 50) -> LedgerView:
    """Totals per engine (memory's own extractions apart), the 20 costliest sessions, the latest rows."""
    return await eywa.db.read(lambda conn: _read_ledger(conn, recent))
