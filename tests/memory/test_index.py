"""The inverted indexes: postings, document frequencies and N stay exact through re-indexing and removal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from memory import index
from memory.db import Database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "m.db")
    yield database
    await database.close()


async def rows(conn: aiosqlite.Connection, sql: str, *args: object) -> list[tuple[object, ...]]:
    return [tuple(r) for r in await conn.execute_fetchall(sql, args)]


async def state(conn: aiosqlite.Connection) -> tuple[list[tuple[object, ...]], ...]:
    return (
        await rows(conn, "SELECT field, term, ts, session_id FROM postings ORDER BY 1, 2, 3, 4"),
        await rows(conn, "SELECT field, term, df FROM term_df ORDER BY 1, 2"),
        await rows(conn, "SELECT key, value FROM meta WHERE key = 'indexed_n'"),
    )


async def post(db: Database, sid: str, ts: float = 100.0, **kw: object) -> None:
    args: dict[str, object] = {"projects": [], "keywords": [], "substance": 1, "kind": "main", "duration_min": 0.0}
    args.update(kw)
    async with db.write() as conn:
        await index.index_handoff(conn, session_id=sid, ts=ts, **args)  # type: ignore[arg-type]


async def test_handoff_is_posted_under_project_and_keyword_terms_with_df(db: Database) -> None:
    await post(db, "a", projects=["/src/Eywa-MCP"], keywords=["SQLite", "posting lists"])
    await post(db, "b", ts=200.0, keywords=["sqlite"])
    p, df, n = await state(db.conn)
    assert (0, "src-eywa-mcp", 100.0, "a") in p and (0, "eywa-mcp", 100.0, "a") in p and (0, "eywa", 100.0, "a") in p
    assert (1, "posting-list", 100.0, "a") in p and (1, "list", 100.0, "a") in p
    assert (2, "", 100.0, "a") in p and (2, "", 200.0, "b") in p
    assert (1, "sqlit", 2) in df and (1, "posting", 1) in df and (0, "mcp", 1) in df
    assert n == [("indexed_n", "2")]


async def test_reindexing_is_idempotent_and_replaces_old_terms(db: Database) -> None:
    await post(db, "a", keywords=["sqlite", "wal"])
    await post(db, "b", keywords=["sqlite"])
    once = await state(db.conn)
    await post(db, "a", keywords=["sqlite", "wal"])
    assert await state(db.conn) == once
    await post(db, "a", ts=150.0, keywords=["sqlite", "fts"])
    p, df, n = await state(db.conn)
    assert [r for r in p if r[3] == "a"] == [(1, "fts", 150.0, "a"), (1, "sqlit", 150.0, "a"), (2, "", 150.0, "a")]
    assert df == [(1, "fts", 1), (1, "sqlit", 2)]  # "wal" gone with its last posting
    assert n == [("indexed_n", "2")]


async def test_subagents_and_substance_zero_are_not_posted_and_leave_when_demoted(db: Database) -> None:
    await post(db, "sub", kind="subagent", keywords=["sqlite"])
    await post(db, "zero", substance=0, keywords=["sqlite"])
    assert await state(db.conn) == ([], [], [])
    await post(db, "a", keywords=["sqlite"])
    await post(db, "a", substance=0, keywords=["sqlite"])
    assert await state(db.conn) == ([], [], [("indexed_n", "0")])


async def test_unindex_removes_postings_df_and_count(db: Database) -> None:
    await post(db, "a", keywords=["sqlite"])
    await post(db, "b", keywords=["sqlite", "wal"])
    async with db.write() as conn:
        await index.unindex(conn, "b")
        await index.unindex(conn, "never-indexed")
    p, df, n = await state(db.conn)
    assert {r[3] for r in p} == {"a"} and df == [(1, "sqlit", 1)] and n == [("indexed_n", "1")]


async def test_duration_bound_only_grows_and_defaults_to_the_stored_row(db: Database) -> None:
    await post(db, "a", duration_min=90.0)
    await post(db, "b", duration_min=5.0)
    async with db.write() as conn:
        await conn.execute(
            "INSERT INTO handoffs(session_id, kind, ts, date, duration_min, substance, headline, projects, keywords,"
            " markdown, source, updated_at) VALUES('c', 'main', 1, '', 120, 1, '', '[]', '[]', '', 'import', '')"
        )
        await index.index_handoff(conn, session_id="c", ts=1.0, projects=[], keywords=[], substance=1, kind="main")
    assert await rows(db.conn, "SELECT value FROM meta WHERE key = 'max_duration_min'") == [("120.0",)]
    assert await rows(db.conn, "SELECT indexed FROM handoffs WHERE session_id = 'c'") == [(1,)]


async def test_content_is_replaced_and_removed_by_session(db: Database) -> None:
    async with db.write() as conn:
        await index.index_content(conn, session_id="a", kind="main", parent_id="", body="first text about wal")
        await index.index_content(conn, session_id="a/agent-1", kind="subagent", parent_id="a", body="agent text")
        await index.index_content(conn, session_id="a", kind="main", parent_id="", body="second text about fts")
    found = await rows(db.conn, "SELECT session_id, parent_id, body FROM content ORDER BY session_id")
    assert found == [("a", "", "second text about fts"), ("a/agent-1", "a", "agent text")]
    assert await rows(db.conn, "SELECT session_id FROM content WHERE content MATCH 'wal'") == []
    async with db.write() as conn:
        await index.unindex_content(conn, "a")
        await index.unindex_content(conn, "missing")
    assert await rows(db.conn, "SELECT session_id FROM content") == [("a/agent-1",)]
    assert await rows(db.conn, "SELECT count(*) FROM meta WHERE key LIKE 'content_rowid:%'") == [(1,)]
