"""Rows of the memory database: sources, sessions and handoffs. Index maintenance lives in `index.py`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from memory.index.tokenize import normalize_term
from memory.models import Handoff, LineProblem, SessionKind, Transcript
from memory.storage.sqlsteps import Op, Steps, run_async
from memory.timeutil import parse_iso

__all__ = [
    "HANDOFF_COLS",
    "NOBODY",
    "PUT_HANDOFF_SQL",
    "HandoffRow",
    "SessionRow",
    "SourceRow",
    "delete_session",
    "get_handoff",
    "get_session",
    "get_source",
    "handoff_from_row",
    "handoff_row",
    "handoff_ts",
    "is_forgotten",
    "link_parent",
    "list_handoffs",
    "now_iso",
    "problem_lines",
    "put_handoff",
    "put_handoff_steps",
    "put_problems",
    "put_session",
    "put_source",
    "sessions_needing_extraction",
    "set_extract_state",
]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def handoff_ts(date_iso: str) -> float:
    """Epoch seconds of an ISO date; naive dates are taken as UTC, unparsable ones as 0."""
    try:
        return parse_iso(date_iso).timestamp()
    except ValueError:
        return 0.0


@dataclass(frozen=True, slots=True)
class SourceRow:
    path: str
    size: int
    mtime_ns: int
    sha256: str
    session_ids: tuple[str, ...]
    lines_skipped: int


@dataclass(frozen=True, slots=True)
class SessionRow:
    session_id: str
    kind: SessionKind
    parent_id: str
    source_path: str
    cwd: str
    git_branch: str
    title: str
    model: str
    started_at: str
    ended_at: str
    duration_min: float
    n_entries: int
    markdown: str
    content_sha: str
    extract_state: str


@dataclass(frozen=True, slots=True)
class HandoffRow:
    session_id: str
    kind: SessionKind
    parent_id: str
    ts: float
    date: str
    duration_min: float
    substance: int
    headline: str
    projects: tuple[str, ...]
    keywords: tuple[str, ...]
    markdown: str
    source: str
    review: str
    reviewed_by: str = ""  # who kept or corrected it ('' when unknown), and when (ISO 8601 UTC)
    reviewed_at: str = ""

    def listing(self) -> dict[str, Any]:
        """The handoff as a list shows it (`macupos memory list --json`, the service's `/v1/handoffs`)."""
        return {
            "session_id": self.session_id,
            "date": self.date,
            "headline": self.headline,
            "projects": list(self.projects),
            "keywords": list(self.keywords),
            "substance": self.substance,
            "kind": str(self.kind),
            "source": self.source,
        }


async def get_source(conn: aiosqlite.Connection, path: str) -> SourceRow | None:
    async with conn.execute(
        "SELECT path, size, mtime_ns, sha256, session_ids, lines_skipped FROM sources WHERE path = ?", (path,)
    ) as cur:
        row = await cur.fetchone()
    if row is None:
        return None
    return SourceRow(row[0], row[1], row[2], row[3], tuple(json.loads(row[4])), row[5])


async def put_source(conn: aiosqlite.Connection, row: SourceRow) -> None:
    await conn.execute(
        "INSERT OR REPLACE INTO sources(path, size, mtime_ns, sha256, session_ids, lines_skipped, ingested_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            row.path,
            row.size,
            row.mtime_ns,
            row.sha256,
            json.dumps(list(row.session_ids)),
            row.lines_skipped,
            now_iso(),
        ),
    )


async def problem_lines(conn: aiosqlite.Connection, path: str) -> set[tuple[int, str]]:
    """(line, reason) of every line of ``path`` skipped when it was last read."""
    async with conn.execute("SELECT line_no, reason FROM problems WHERE path = ?", (path,)) as cur:
        return {(int(n), str(r)) for n, r in await cur.fetchall()}


async def put_problems(conn: aiosqlite.Connection, path: str, problems: Sequence[LineProblem]) -> None:
    await conn.execute("DELETE FROM problems WHERE path = ?", (path,))
    await conn.executemany(
        "INSERT OR REPLACE INTO problems(path, line_no, reason) VALUES (?, ?, ?)",
        [(path, p.line_no, p.reason) for p in problems],
    )


_SESSION_COLS = (
    "session_id, kind, parent_id, source_path, cwd, git_branch, title, model, started_at, ended_at,"
    " duration_min, n_entries, markdown, content_sha, extract_state"
)
_SESSION_COLS_BRIEF = _SESSION_COLS.replace(" markdown,", " '' AS markdown,")  # all but the transcript


async def put_session(
    conn: aiosqlite.Connection,
    t: Transcript,
    *,
    markdown: str | bytes | bytearray,
    content_sha: str,
    duration_min: float,
) -> None:
    """Insert or replace a session; its extraction becomes pending again. ``markdown`` may come as its UTF-8
    bytes (stored as text all the same), which spares a big one's second encoding.

    A parent link made earlier (`link_parent`, e.g. a Codex rollout the relay caused) survives a re-read
    of a transcript that does not name its parent itself.
    """
    await conn.execute(
        f"INSERT OR REPLACE INTO sessions({_SESSION_COLS}, updated_at)"
        " VALUES (?, ?, COALESCE(NULLIF(?, ''), (SELECT parent_id FROM sessions WHERE session_id = ?), ''),"
        " ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT), ?, 'pending', ?)",
        (
            t.session_id,
            t.kind.value,
            t.parent_id,
            t.session_id,
            t.source_path,
            t.cwd,
            t.git_branch,
            t.title,
            t.model,
            t.started_at,
            t.ended_at,
            duration_min,
            t.entry_count,
            markdown,
            content_sha,
            now_iso(),
        ),
    )


async def link_parent(conn: aiosqlite.Connection, session_id: str, parent_id: str) -> bool:
    """Make `session_id` a child of `parent_id`; False when no such session or handoff exists."""
    cur = await conn.execute("UPDATE sessions SET parent_id = ? WHERE session_id = ?", (parent_id, session_id))
    n = cur.rowcount
    cur = await conn.execute("UPDATE handoffs SET parent_id = ? WHERE session_id = ?", (parent_id, session_id))
    return bool(n or cur.rowcount)


def _session(row: Any) -> SessionRow:
    return SessionRow(
        str(row[0]),
        SessionKind(str(row[1])),
        str(row[2]),
        str(row[3]),
        str(row[4]),
        str(row[5]),
        str(row[6]),
        str(row[7]),
        str(row[8]),
        str(row[9]),
        float(row[10]),
        int(row[11]),
        str(row[12]),
        str(row[13]),
        str(row[14]),
    )


async def get_session(conn: aiosqlite.Connection, session_id: str, *, markdown: bool = True) -> SessionRow | None:
    """The session's row; ``markdown=False`` leaves its rendered transcript out (``""``): it can be megabytes."""
    cols = _SESSION_COLS if markdown else _SESSION_COLS_BRIEF
    async with conn.execute(f"SELECT {cols} FROM sessions WHERE session_id = ?", (session_id,)) as cur:
        row = await cur.fetchone()
    return _session(row) if row else None


async def set_extract_state(conn: aiosqlite.Connection, session_id: str, state: str) -> None:
    await conn.execute("UPDATE sessions SET extract_state = ? WHERE session_id = ?", (state, session_id))


async def sessions_needing_extraction(conn: aiosqlite.Connection, limit: int = 10_000) -> list[str]:
    async with conn.execute(
        "SELECT session_id FROM sessions WHERE extract_state != 'done' ORDER BY started_at, session_id LIMIT ?",
        (limit,),
    ) as cur:
        return [str(r[0]) for r in await cur.fetchall()]


HANDOFF_COLS = (
    "session_id, kind, parent_id, ts, date, duration_min, substance, headline, projects, keywords,"
    " markdown, source, review, reviewed_by, reviewed_at"
)
NOBODY = ("", "")  # (reviewed_by, reviewed_at) of a handoff nobody is known to have reviewed


async def put_handoff(
    conn: aiosqlite.Connection,
    h: Handoff,
    *,
    markdown: str,
    review: str = "pending",
    reviewed: tuple[str, str] = NOBODY,
) -> float:
    """Insert or replace a handoff row (not its postings); returns its timestamp. ``reviewed``: (by, at)."""
    return await run_async(conn, put_handoff_steps(h, markdown=markdown, review=review, reviewed=reviewed))


PUT_HANDOFF_SQL = (
    f"INSERT OR REPLACE INTO handoffs({HANDOFF_COLS}, indexed, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def handoff_row(
    h: Handoff, *, markdown: str, review: str, indexed: bool = False, reviewed: tuple[str, str] = NOBODY
) -> tuple[Any, ...]:
    """The values :data:`PUT_HANDOFF_SQL` stores for ``h`` (``indexed``: its postings are written too)."""
    return (
        h.session_id,
        h.kind.value,
        h.parent_id,
        handoff_ts(h.date),
        h.date,
        h.duration_min,
        h.substance,
        h.headline,
        json.dumps(h.projects),
        json.dumps(h.keywords),
        markdown,
        h.source,
        review,
        *reviewed,
        int(indexed),
        now_iso(),
    )


def put_handoff_steps(
    h: Handoff, *, markdown: str, review: str = "pending", reviewed: tuple[str, str] = NOBODY
) -> Steps[float]:
    """:func:`put_handoff` as statements (:mod:`memory.storage.sqlsteps`), for either kind of connection."""
    row = handoff_row(h, markdown=markdown, review=review, reviewed=reviewed)
    yield Op.run(PUT_HANDOFF_SQL, row)
    return float(row[3])


def handoff_from_row(row: Any) -> HandoffRow:
    """A ``handoffs`` row of ``SELECT {HANDOFF_COLS}`` as a :class:`HandoffRow`."""
    return HandoffRow(
        str(row[0]),
        SessionKind(str(row[1])),
        str(row[2]),
        float(row[3]),
        str(row[4]),
        float(row[5]),
        int(row[6]),
        str(row[7]),
        tuple(json.loads(str(row[8]))),
        tuple(json.loads(str(row[9]))),
        str(row[10]),
        str(row[11]),
        str(row[12]),
        str(row[13]),
        str(row[14]),
    )


async def get_handoff(conn: aiosqlite.Connection, session_id: str) -> HandoffRow | None:
    async with conn.execute(f"SELECT {HANDOFF_COLS} FROM handoffs WHERE session_id = ?", (session_id,)) as cur:
        row = await cur.fetchone()
    return handoff_from_row(row) if row else None


async def list_handoffs(
    conn: aiosqlite.Connection,
    *,
    limit: int = 20,
    project: str | None = None,
    include_subagents: bool = False,
    since_ts: float | None = None,
    until_ts: float | None = None,
    after: tuple[float, str] | None = None,
) -> list[HandoffRow]:
    """The newest handoffs; with ``project``, those naming it (compared as whole normalized names: "Example
    Project" finds ``example-project``). ``since_ts`` (inclusive) and ``until_ts`` (exclusive) bound their
    time; ``after`` is the (ts, session id) of the last row of a previous page: the rows that follow it."""
    where: list[str] = [] if include_subagents else ["kind != 'subagent'"]
    args: list[Any] = []
    if since_ts is not None:
        where.append("ts >= ?")
        args.append(since_ts)
    if until_ts is not None:
        where.append("ts < ?")
        args.append(until_ts)
    if after is not None:  # keyset paging: stable while rows are added before the cursor
        where.append("(ts < ? OR (ts = ? AND session_id > ?))")
        args.extend((after[0], after[0], after[1]))
    sql = f"SELECT {HANDOFF_COLS} FROM handoffs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY ts DESC, session_id"
    if not project:
        async with conn.execute(sql + " LIMIT ?", (*args, limit)) as cur:
            return [handoff_from_row(r) for r in await cur.fetchall()]
    wanted = normalize_term(project)
    out: list[HandoffRow] = []
    async with conn.execute(sql, args) as cur:
        async for r in cur:
            h = handoff_from_row(r)
            if any(normalize_term(p) == wanted for p in h.projects):
                out.append(h)
                if len(out) >= limit:
                    break
    return out


async def delete_session(conn: aiosqlite.Connection, session_id: str, *, by: str = "") -> list[tuple[str, str | None]]:
    """Delete a session, its handoff and its subagents' rows (transcripts or imported handoffs alike) and
    remember them as forgotten ``by`` whom ('' unknown); returns (id, its handoff's date, None when it had no
    handoff) of each (index not included)."""
    async with conn.execute(
        "SELECT session_id FROM sessions WHERE parent_id = ?1"
        " UNION SELECT session_id FROM handoffs WHERE parent_id = ?1",
        (session_id,),
    ) as cur:
        ids = [session_id, *sorted(str(r[0]) for r in await cur.fetchall())]
    removed = []
    for sid in ids:
        async with conn.execute("SELECT date FROM handoffs WHERE session_id = ?", (sid,)) as cur:
            row = await cur.fetchone()
        removed.append((sid, str(row[0]) if row else None))
        await conn.execute("DELETE FROM sessions WHERE session_id = ?", (sid,))
        await conn.execute("DELETE FROM handoffs WHERE session_id = ?", (sid,))
        await conn.execute(
            "INSERT OR REPLACE INTO forgotten(session_id, at, forgotten_by) VALUES (?, ?, ?)", (sid, now_iso(), by)
        )
    return removed


async def is_forgotten(conn: aiosqlite.Connection, session_id: str) -> bool:
    async with conn.execute("SELECT 1 FROM forgotten WHERE session_id = ?", (session_id,)) as cur:
        return await cur.fetchone() is not None
