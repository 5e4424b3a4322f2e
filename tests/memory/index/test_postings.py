"""The inverted indexes: postings, document frequencies and N stay exact through re-indexing and removal."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from memory.index import postings as index
from memory.storage.database import Database


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
    assert await rows(db.conn, "SELECT session_id FROM content_rows") == [("a/agent-1",)]
    assert await rows(db.conn, "SELECT session_id, handoff_id FROM chunks") == [("a/agent-1", "a")]
    assert await rows(db.conn, "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH 'fts OR wal OR first'") == []


MARKDOWN = "# Title\n\n- session: `s`\n- started: 2023-05-08 13:56:00 +00:00\n\n" + "".join(
    f"## {'User' if i % 2 == 0 else 'Assistant'} · 14:0{i}:00\n\nturn{i} words\n\n" for i in range(9)
)


def test_windows_hold_four_turns_and_the_header_joins_the_first() -> None:
    spans = index.chunk_spans(MARKDOWN)
    texts = [MARKDOWN[a:b] for a, b in spans]
    assert len(texts) == 3 and "".join(texts) == MARKDOWN
    assert texts[0].startswith("# Title") and "turn3" in texts[0] and "turn4" not in texts[0]
    assert texts[2].startswith("## User · 14:08:00")
    assert index.chunk_spans("no headings at all") == [(0, 18)]
    assert index.chunk_spans("") == [(0, 0)]


def test_date_words_come_from_the_rendered_header() -> None:
    assert index.date_words(MARKDOWN) == "Monday 8 May 2023"
    assert index.date_words("## User · 10:00\n\n- started: 2023-05-08") == ""  # only before the first turn
    assert index.date_words("- started: 2023-02-30 10:00") == ""


async def test_windows_are_searchable_and_removed_exactly(db: Database) -> None:
    async with db.write() as conn:
        await index.index_content(conn, session_id="s", kind="main", parent_id="", body=MARKDOWN)
        await index.index_content(conn, session_id="t", kind="main", parent_id="", body="turn4 elsewhere")
    found = await rows(db.conn, "SELECT c.session_id, c.id FROM chunk_fts JOIN chunks AS c ON c.id = chunk_fts.rowid"
                                " WHERE chunk_fts MATCH 'turn4' ORDER BY 2")  # fmt: skip
    assert [sid for sid, _ in found] == ["s", "t"]
    assert await rows(db.conn, "SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH 'may AND monday'") == [(1,)]
    async with db.write() as conn:
        await index.index_content(conn, session_id="s", kind="main", parent_id="", body="replaced")
        await index.unindex_content(conn, "t")
    assert await rows(db.conn, "SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH 'turn4 OR may'") == [(0,)]
    assert await rows(db.conn, "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH 'replaced'") == await rows(
        db.conn, "SELECT id FROM chunks"
    )
    await db.conn.execute("INSERT INTO chunk_fts(chunk_fts, rank) VALUES('integrity-check', 0)")


async def test_schema_4_moves_content_locators_out_of_meta(tmp_path: Path) -> None:
    from memory.storage.migrations import MIGRATIONS

    old = await Database.open(tmp_path / "m.db", migrations=MIGRATIONS[:3])
    async with old.write() as conn:
        await conn.execute("INSERT INTO content(session_id, kind, parent_id, body) VALUES('a', 'main', '', 'old wal')")
        await conn.execute("INSERT INTO meta(key, value) VALUES('content_rowid:a', '1')")
    await old.close()
    db = await Database.open(tmp_path / "m.db")
    try:
        assert await rows(db.conn, "SELECT key FROM meta WHERE key LIKE 'content_rowid:%'") == []
        assert await rows(db.conn, "SELECT session_id, row FROM content_rows") == [("a", 1)]
        assert await rows(db.conn, "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH 'wal'") == [(1,)]
        async with db.write() as conn:
            await index.index_content(conn, session_id="a", kind="main", parent_id="", body="new text")
        assert await rows(db.conn, "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH 'wal'") == []
        assert await rows(db.conn, "SELECT count(*) FROM content") == [(1,)]
    finally:
        await db.close()


async def test_windows_carry_their_handoffs_posted_date_and_duration(db: Database) -> None:
    """Scoring reads a window's credited handoff's date and duration from the window itself: they follow it."""
    windows = "SELECT session_id, handoff_id, ts, dur FROM chunks ORDER BY id"
    async with db.write() as conn:
        await index.index_content(conn, session_id="p", kind="main", parent_id="", body="parent text")
        await index.index_content(conn, session_id="sub", kind="subagent", parent_id="p", body="sub text")
    assert await rows(db.conn, windows) == [("p", "p", None, 0.0), ("sub", "p", None, 0.0)]  # not posted yet
    await post(db, "p", ts=100.0, keywords=["wal"], duration_min=30.0)
    assert await rows(db.conn, windows) == [("p", "p", 100.0, 30.0), ("sub", "p", 100.0, 30.0)]
    await post(db, "p", ts=200.0, keywords=["wal"], duration_min=45.0)  # a new date and duration
    assert await rows(db.conn, windows) == [("p", "p", 200.0, 45.0), ("sub", "p", 200.0, 45.0)]
    assert await rows(db.conn, "SELECT DISTINCT dur FROM postings WHERE session_id = 'p'") == [(45.0,)]
    async with db.write() as conn:
        await index.index_content(conn, session_id="sub", kind="subagent", parent_id="p", body="sub again")
    assert await rows(db.conn, windows) == [("p", "p", 200.0, 45.0), ("sub", "p", 200.0, 45.0)]  # new window too
    await post(db, "p", ts=200.0, substance=0)  # demoted: unposted
    assert await rows(db.conn, windows) == [("p", "p", None, 0.0), ("sub", "p", None, 0.0)]


async def test_schema_5_gives_postings_and_windows_their_handoffs_duration(tmp_path: Path) -> None:
    from memory.storage.migrations import MIGRATIONS

    old = await Database.open(tmp_path / "m.db", migrations=MIGRATIONS[:4])
    async with old.write() as conn:
        await conn.execute(
            "INSERT INTO handoffs(session_id, kind, ts, date, duration_min, substance, headline, projects, keywords,"
            " markdown, source, indexed, updated_at) VALUES('a', 'main', 100, '', 12.5, 1, '', '[]', '[]', '',"
            " 'import', 1, '')"
        )
        for field, term in ((1, "wal"), (2, "")):
            await conn.execute("INSERT INTO postings VALUES(?, ?, 100, 'a')", (field, term))
        await conn.execute("INSERT INTO content(session_id, kind, parent_id, body) VALUES('a', 'main', '', 'wal')")
        await conn.execute("INSERT INTO content_rows(session_id, row) VALUES('a', 1)")
        await conn.execute("INSERT INTO chunks(id, session_id, handoff_id, start, stop) VALUES(1, 'a', 'a', 0, 3)")
        await conn.execute("INSERT INTO content(session_id, kind, parent_id, body) VALUES('b', 'main', '', 'x')")
        await conn.execute("INSERT INTO content_rows(session_id, row) VALUES('b', 2)")
        await conn.execute("INSERT INTO chunks(id, session_id, handoff_id, start, stop) VALUES(2, 'b', 'b', 0, 1)")
    await old.close()
    db = await Database.open(tmp_path / "m.db")
    try:
        assert await rows(db.conn, "SELECT field, term, ts, session_id, dur FROM postings ORDER BY 1") == [
            (1, "wal", 100.0, "a", 12.5),
            (2, "", 100.0, "a", 12.5),
        ]
        assert await rows(db.conn, "SELECT id, row, ts, dur FROM chunks ORDER BY id") == [
            (1, 1, 100.0, 12.5),
            (2, 2, None, 0.0),
        ]
    finally:
        await db.close()


async def test_a_text_indexed_from_its_utf8_bytes_gives_the_same_rows_as_from_its_str(tmp_path: Path) -> None:
    """Ingest hands the index a big session's text as UTF-8 bytes: windows, offsets and matches stay as
    they are for the same text given as a str (multi-byte characters before, inside and across windows)."""
    turns = "".join(f"## {i:02d} · user\n\nfix the zeppelin → café ünïcode 🚀 step {i}\n\n" for i in range(40))
    body = f"# Session\n\n- started: 2026-03-02T10:00:00Z\n\n{turns}"
    rows = []
    for name, utf8 in (("str.db", False), ("utf8.db", True)):
        db = await Database.open(tmp_path / name)
        try:
            async with db.write() as conn:
                if utf8:
                    layout = index.content_layout(body)
                    await index.index_content_utf8(
                        conn, session_id="s1", kind="main", parent_id="", utf8=bytearray(body.encode()), layout=layout
                    )
                else:
                    await index.index_content(conn, session_id="s1", kind="main", parent_id="", body=body)

            def read(c: sqlite3.Connection) -> tuple[object, ...]:
                return (
                    c.execute("SELECT session_id, kind, parent_id, body FROM content").fetchall(),
                    c.execute("SELECT id, start, stop, prefix, row FROM chunks ORDER BY id").fetchall(),
                    c.execute("SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH 'café' ORDER BY rowid").fetchall(),
                    c.execute("SELECT rowid FROM content WHERE content MATCH '🚀 OR zeppelin'").fetchall(),
                    c.execute("SELECT typeof(body) FROM content").fetchall(),
                )

            rows.append(await db.read(read))
        finally:
            await db.close()
    assert rows[0] == rows[1]
    assert rows[0][1] and rows[0][2] and rows[0][4] == [("text",)]
