"""The three descriptions of the memory schema agree: memory/storage/migrations.py (what a memory database is),
memory/replica/rows.py (what a copy replicates) and service/pg/migrations.py (what PostgreSQL holds). A memory
migration that adds a table or a column fails here until the other two follow it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from memory.replica.rows import MIRRORS, mirror
from memory.storage.database import Database
from service.pg.migrations import TENANT_TABLES

# Derived again on every copy, never replicated: FTS5's own tables and views.
DERIVED = {"chunk_fts", "content_vocab"}
# Replicated inside another mirror: content_rows in content (a session's FTS5 row and its rowid).
FOLDED = {"content_rows": "content"}
_KIND = {"TEXT": "text", "INTEGER": "int", "REAL": "real"}
_PG = {"text": "text", "int": "bigint", "real": "double precision"}


async def test_every_memory_table_and_column_is_replicated(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    await (await Database.open(path)).close()
    conn = sqlite3.connect(path)
    virtual = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")}
    shadow = {f"{v}_{part}" for v in virtual for part in ("data", "idx", "content", "docsize", "config")}
    every = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = {n for n in every - shadow if not n.startswith("sqlite_")}
    covered = {m.name for m in MIRRORS} | DERIVED | set(FOLDED)
    assert tables - covered == set()
    for m in MIRRORS:
        if m.name in {"content", "facts_fts"}:
            continue  # FTS5 tables: their columns are checked through what a copy reads of them
        info = {row[1]: (row[2], bool(row[3]), bool(row[5])) for row in conn.execute(f"PRAGMA table_info({m.name})")}
        assert set(info) == set(m.names), m.name
        for c in m.columns:
            declared, not_null, key = info[c.name]
            assert _KIND[declared] == c.kind, (m.name, c.name)
            assert c.null == (not not_null and not key), (m.name, c.name)  # a key column is never NULL
    fts = {name: [r[1] for r in conn.execute(f"PRAGMA table_info({name})")] for name in ("content", "facts_fts")}
    assert fts["content"] == ["session_id", "kind", "parent_id", "body"]
    assert set(mirror("content").names) == {"session_id", "row", "kind", "parent_id", "body"}
    assert fts["facts_fts"] == ["id", "body"]
    conn.close()


def test_postgresql_holds_every_mirror_behind_the_tenant_wall(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        for m in MIRRORS:
            cols = conn.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
                " WHERE table_schema = 'macupos' AND table_name = %s ORDER BY ordinal_position",
                (m.name,),
            ).fetchall()
            want = [("tenant_id", "text", "NO")]
            want += [(c.name, _PG[c.kind], "YES" if c.null else "NO") for c in m.columns]
            # A column a later migration adds comes after seq (ALTER TABLE … ADD COLUMN): every statement names
            # its columns, so where seq stands matters to none.
            assert [c for c in cols if c[0] != "seq"] == want, m.name
            assert ("seq", "bigint", "NO") in cols, m.name
        walled = conn.execute(
            "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'macupos' AND c.relkind = 'r' AND c.relrowsecurity AND c.relforcerowsecurity"
        ).fetchall()
        assert {r[0] for r in walled} == set(TENANT_TABLES)
        assert set(TENANT_TABLES) == {m.name for m in MIRRORS} | {"deletions", "facts_events"}
        policies = conn.execute("SELECT tablename FROM pg_policies WHERE schemaname = 'macupos'").fetchall()
        assert {r[0] for r in policies} == set(TENANT_TABLES)
        first_key = conn.execute(
            "SELECT t.relname, a.attname FROM pg_index AS i JOIN pg_class AS t ON t.oid = i.indrelid"
            " JOIN pg_namespace AS n ON n.oid = t.relnamespace JOIN pg_attribute AS a"
            " ON a.attrelid = t.oid AND a.attnum = i.indkey[0] WHERE n.nspname = 'macupos' AND i.indisprimary"
        ).fetchall()
        assert {t: a for t, a in first_key if t in TENANT_TABLES} == dict.fromkeys(TENANT_TABLES, "tenant_id")
