"""Who made a memory decision, on PostgreSQL (issue 33): what one service process records (a keep's decider,
who forgot a session) another reads from the database; and a database of the schema before it migrates with
earlier decisions unattributed and the memory schema it mirrors moved on."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg

from memory.handoffs import forgotten, keep, pending
from memory.storage import SCHEMA_VERSION
from service.pg.link import PgLink
from service.pg.migrations import MIGRATIONS
from tests.service.conftest import transcript_bytes
from tests.service.pg.cluster import Cluster
from tests.service.pg.conftest import tenant_store
from tests.service.pg.test_replication import write


async def test_decisions_made_in_one_process_are_read_in_another(tmp_path: Path, pg_url: str) -> None:
    files = tmp_path / "files"
    async with tenant_store(tmp_path / "a", pg_url) as a, tenant_store(tmp_path / "b", pg_url) as b:
        async with a.lease("alice") as t:
            eywa = await t.eywa()
            for sid in ("s1", "s2"):
                await eywa.ingest([write(files, f"{sid}.jsonl", transcript_bytes(sid, "zebrafish"))])
            assert {h.session_id for h in await pending(eywa)} == {"s1", "s2"}
            assert await keep(eywa, "s1", by="@alice")
            assert await eywa.forget("s2", by="key k1") == ["s2"]
        async with b.lease("alice") as t:
            eywa = await t.eywa()
            row = await eywa.handoff("s1")
            assert row is not None and row.review == "kept" and row.reviewed_by == "@alice" and row.reviewed_at
            gone = await forgotten(eywa, "s2")
            assert gone is not None and gone.by == "key k1"
            assert await pending(eywa) == []


async def test_a_database_of_the_schema_before_migrates_with_decisions_unattributed(pg_cluster: Cluster) -> None:
    name = f"schema2_{os.getpid()}"
    pg_cluster.admin(f"CREATE DATABASE {name}")
    url = pg_cluster.url(name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA macupos")
            conn.execute("CREATE TABLE macupos.schema_version(version int NOT NULL)")
            for version, script in enumerate(MIGRATIONS[:2], start=1):
                conn.execute(script)  # type: ignore[arg-type]  # several statements, as PgLink.migrate runs them
                conn.execute("INSERT INTO macupos.schema_version(version) VALUES (%s)", (version,))
            conn.execute("INSERT INTO macupos.tenants(tenant_id, origin, created_at) VALUES ('t', 'cli', 0)")
            conn.execute("SELECT set_config('macupos.tenant', 't', false)")
            conn.execute(
                "INSERT INTO macupos.handoffs VALUES ('t', 'h1', 'main', '', 0, '2025-01-01', 0, 1, 'h', '[]', '[]',"
                " 'md', 'import', 'kept', 1, '2025-01-01', 1)"
            )
            conn.execute("INSERT INTO macupos.forgotten VALUES ('t', 'f1', '2025-01-02', 1)")
        link = await PgLink.open(url, max_size=1)  # migrates
        await link.close()
        with psycopg.connect(url, autocommit=True) as conn:
            info = conn.execute("SELECT value FROM macupos.info WHERE key = 'memory_schema'").fetchone()
            assert info == (str(SCHEMA_VERSION),)
            conn.execute("SELECT set_config('macupos.tenant', 't', false)")
            row = conn.execute("SELECT review, reviewed_by, reviewed_at, seq FROM macupos.handoffs").fetchone()
            assert row == ("kept", "", "", 1)
            assert conn.execute("SELECT forgotten_by FROM macupos.forgotten").fetchone() == ("",)
    finally:
        pg_cluster.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
