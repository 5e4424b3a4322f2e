"""Posting lists, document frequencies and the full-text content index, kept in step on every write.

Every function runs inside the caller's write transaction (``Database.write()``) and is idempotent.

Layout inside schema 1 (``postings`` is ``(field, term, ts, session_id)``, newest-first by ``ts``):

- field 0: project terms, field 1: keyword terms (see :mod:`memory.tokenize`), with ``term_df``.
- field 2, term ``''``: one row per indexed handoff. It is the document list N counts, the newest-first
  list the no-match fallback reads, and where a handoff's indexed ``ts`` is found again.
- ``meta``: ``indexed_n`` (N for IDF), ``max_duration_min`` (an upper bound that only grows:
  retrieval's pruning needs a bound, not the exact maximum), and ``content_rowid:<session>``, the FTS
  row of a session's content (FTS5 cannot look rows up by an UNINDEXED column without a scan).
"""

from __future__ import annotations

from collections.abc import Sequence

import aiosqlite

from memory.tokenize import keyword_terms, project_terms

__all__ = [
    "FIELD_DOC",
    "FIELD_KEYWORD",
    "FIELD_PROJECT",
    "INDEXED_KINDS",
    "handoff_terms",
    "index_content",
    "index_handoff",
    "unindex",
    "unindex_content",
]

FIELD_PROJECT = 0
FIELD_KEYWORD = 1
FIELD_DOC = 2
INDEXED_KINDS = frozenset({"main", "codex"})

_Row = tuple[int, str, float]


def handoff_terms(projects: Sequence[str], keywords: Sequence[str]) -> set[tuple[int, str]]:
    """The (field, term) pairs a handoff is posted under."""
    terms = {(FIELD_PROJECT, t) for p in projects for t in project_terms(p)}
    terms |= {(FIELD_KEYWORD, t) for k in keywords for t in keyword_terms(k)}
    return terms


async def index_handoff(
    conn: aiosqlite.Connection,
    *,
    session_id: str,
    ts: float,
    projects: Sequence[str],
    keywords: Sequence[str],
    substance: int,
    kind: str,
    duration_min: float | None = None,
) -> None:
    """Post a handoff (replacing whatever was posted for it before); subagents and substance 0 are unposted.

    ``duration_min`` defaults to the stored handoff row's: write the row first, then index it.
    """
    if kind not in INDEXED_KINDS or substance < 1:
        await _replace(conn, session_id, set())
        return
    rows: set[_Row] = {(f, t, ts) for f, t in handoff_terms(projects, keywords)}
    rows.add((FIELD_DOC, "", ts))
    await _replace(conn, session_id, rows)
    if duration_min is None:
        async with conn.execute("SELECT duration_min FROM handoffs WHERE session_id = ?", (session_id,)) as cur:
            found = await cur.fetchone()
        duration_min = float(found[0]) if found else 0.0
    await conn.executemany(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET "
        "value = MAX(CAST(value AS REAL), CAST(excluded.value AS REAL))",
        [("max_duration_min", repr(max(0.0, duration_min)))],
    )


async def unindex(conn: aiosqlite.Connection, session_id: str) -> None:
    """Remove a handoff from the posting lists (no-op when it was not posted)."""
    await _replace(conn, session_id, set())


async def _replace(conn: aiosqlite.Connection, session_id: str, new: set[_Row]) -> None:
    async with conn.execute("SELECT field, term, ts FROM postings WHERE session_id = ?", (session_id,)) as cur:
        old: set[_Row] = {(int(f), str(t), float(ts)) for f, t, ts in await cur.fetchall()}
    if old == new:
        return
    gone, added = old - new, new - old
    if gone:
        await conn.executemany(
            "DELETE FROM postings WHERE field = ? AND term = ? AND ts = ? AND session_id = ?",
            [(f, t, ts, session_id) for f, t, ts in gone],
        )
    if added:
        await conn.executemany(
            "INSERT INTO postings(field, term, ts, session_id) VALUES(?, ?, ?, ?)",
            [(f, t, ts, session_id) for f, t, ts in added],
        )
    # Document frequencies change only for terms gained or lost, not for a mere change of date.
    old_terms = {(f, t) for f, t, _ in old if f != FIELD_DOC}
    new_terms = {(f, t) for f, t, _ in new if f != FIELD_DOC}
    if old_terms - new_terms:
        lost = sorted(old_terms - new_terms)
        await conn.executemany("UPDATE term_df SET df = df - 1 WHERE field = ? AND term = ?", lost)
        await conn.executemany("DELETE FROM term_df WHERE field = ? AND term = ? AND df <= 0", lost)
    if new_terms - old_terms:
        await conn.executemany(
            "INSERT INTO term_df(field, term, df) VALUES(?, ?, 1) ON CONFLICT(field, term) DO UPDATE SET df = df + 1",
            sorted(new_terms - old_terms),
        )
    was, now = any(f == FIELD_DOC for f, _, _ in old), any(f == FIELD_DOC for f, _, _ in new)
    if was != now:
        await conn.execute(
            "INSERT INTO meta(key, value) VALUES('indexed_n', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
            (str(max(0, int(now) - int(was))), int(now) - int(was)),
        )
        await conn.execute("UPDATE handoffs SET indexed = ? WHERE session_id = ?", (int(now), session_id))


def _locator(session_id: str) -> str:
    return f"content_rowid:{session_id}"


async def index_content(conn: aiosqlite.Connection, *, session_id: str, kind: str, parent_id: str, body: str) -> None:
    """Put a session's text in the full-text index, replacing its previous text."""
    await unindex_content(conn, session_id)
    cur = await conn.execute(
        "INSERT INTO content(session_id, kind, parent_id, body) VALUES(?, ?, ?, ?)",
        (session_id, kind, parent_id, body),
    )
    rowid = cur.lastrowid
    await cur.close()
    await conn.execute(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (_locator(session_id), str(rowid)),
    )


async def unindex_content(conn: aiosqlite.Connection, session_id: str) -> None:
    """Remove a session's text from the full-text index (no-op when absent)."""
    async with conn.execute("SELECT value FROM meta WHERE key = ?", (_locator(session_id),)) as cur:
        found = await cur.fetchone()
    if found is None:
        return
    # The session_id check guards against a locator left stale by a hand-edited database.
    await conn.execute("DELETE FROM content WHERE rowid = ? AND session_id = ?", (int(found[0]), session_id))
    await conn.execute("DELETE FROM meta WHERE key = ?", (_locator(session_id),))
