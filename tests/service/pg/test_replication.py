"""Two service processes' tenant stores on one PostgreSQL (in this process, each with its own copies): what one
writes the other reads at once; a write section that fails leaves nothing anywhere; a copy reopened is reused
and puts back what a killed write left; row-level security walls tenants apart in the database itself."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import cast

import psycopg
import pytest

from memory import replica as replicate
from memory.errors import SessionNotFoundError
from memory.facade import Eywa
from memory.storage.database import Database
from service.pg.store import PgTenant, PgTenantStore
from tests.service.conftest import claude_lines, memory_settings, transcript_bytes
from tests.service.pg.conftest import running_pg_service, tenant_store

AS_OF = "2026-03-05T00:00:00+00:00"


@pytest.fixture
async def stores(tmp_path: Path, pg_url: str) -> AsyncIterator[tuple[PgTenantStore, PgTenantStore]]:
    """Two service processes' tenant stores on the test's database, each with its own copies."""
    async with tenant_store(tmp_path / "a", pg_url) as a, tenant_store(tmp_path / "b", pg_url) as b:
        yield a, b


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """Where a test writes the transcripts it ingests (made on the first write)."""
    return tmp_path / "files"


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def transcript_file(folder: Path, session_id: str, *words: str, turns: int = 2) -> Path:
    """``folder/<session_id>.jsonl``: a small transcript of that session whose every turn names ``words``."""
    return write(folder, f"{session_id}.jsonl", transcript_bytes(session_id, *words, turns=turns))


async def ids_for(store: PgTenantStore, tenant: str, query: str) -> list[tuple[str, float]]:
    async with store.lease(tenant) as t:
        g = await (await t.eywa()).get(query, days_back=100000, as_of=datetime.fromisoformat(AS_OF))
        return [(r.session_id, r.score) for r in g.results]


async def test_a_write_through_one_process_is_read_through_the_other(
    files: Path, stores: tuple[PgTenantStore, PgTenantStore]
) -> None:
    a, b = stores
    async with a.lease("alice") as t:
        eywa = await t.eywa()
        await eywa.ingest([transcript_file(files, "s1", "zebrafish")])
        await eywa.ingest([transcript_file(files, "s2", "zebrafish", "quokka", turns=4)])
    assert await ids_for(b, "alice", "zebrafish") == await ids_for(a, "alice", "zebrafish")
    assert {sid for sid, _ in await ids_for(b, "alice", "zebrafish")} == {"s1", "s2"}
    async with b.lease("alice") as t:
        hits = await (await t.eywa()).search("quokka")
        assert [h.session_id for h in hits] == ["s2"]
        assert await (await t.eywa()).forget("s2") == ["s2"]
        facts = await t.facts()
        assert (await facts.run_script("remember pet user Fact predicate likes object quokka")).ok
    async with a.lease("alice") as t:
        with pytest.raises(SessionNotFoundError):
            await (await t.eywa()).show("s2")
        assert [h.session_id for h in await (await t.eywa()).search("quokka")] == []
        recalled = await (await t.facts()).run_script("recall user")
        assert "quokka" in recalled.text
    async with b.lease("bob") as t:  # another tenant: nothing of alice's
        assert await (await t.eywa()).search("zebrafish") == []


async def test_a_failed_write_section_leaves_nothing_in_either_store(
    files: Path, pg_url: str, stores: tuple[PgTenantStore, PgTenantStore]
) -> None:
    a, b = stores
    async with a.lease("alice") as t:
        eywa = await t.eywa()
        await eywa.ingest([transcript_file(files, "kept", "zebrafish")])
        with pytest.raises(RuntimeError, match="cut short"):
            async with t.ingest_lock:
                await eywa.ingest([transcript_file(files, "lost", "zebrafish")])
                assert (await eywa.show("lost")).session is not None  # there, until the section fails
                raise RuntimeError("cut short")
        with pytest.raises(SessionNotFoundError):
            await eywa.show("lost")
    for store in (a, b):
        assert [sid for sid, _ in await ids_for(store, "alice", "zebrafish")] == ["kept"]
    with psycopg.connect(pg_url) as conn:
        conn.execute("SELECT set_config('role', 'macupos_tenant', false), set_config('macupos.tenant', 'alice', false)")
        rows = conn.execute("SELECT session_id FROM macupos.sessions ORDER BY 1").fetchall()
    assert rows == [("kept",)]


async def test_a_copy_reopened_is_reused_and_puts_back_what_a_killed_write_left(
    tmp_path: Path, files: Path, pg_url: str
) -> None:
    async with tenant_store(tmp_path / "a", pg_url) as a, a.lease("alice") as t:
        await (await t.eywa()).ingest([transcript_file(files, "s1", "zebrafish")])
        replica = cast(PgTenant, t).replica
    inode = replica.path.stat().st_ino
    # A process killed in the middle of a write: its local transaction committed, the database's never did.
    conn = sqlite3.connect(replica.path)
    with conn:
        conn.execute("UPDATE handoffs SET headline = 'never committed' WHERE session_id = 's1'")
        conn.execute("DELETE FROM sessions WHERE session_id = 's1'")
    conn.close()
    async with tenant_store(tmp_path / "a", pg_url) as a, a.lease("alice") as t:
        view = await (await t.eywa()).show("s1")
        assert view.session is not None and view.handoff is not None
        assert view.handoff.headline != "never committed"
        assert cast(PgTenant, t).replica.path.stat().st_ino == inode  # caught up in place, not rebuilt


async def test_text_postgresql_cannot_hold_makes_the_round_trip(
    files: Path, stores: tuple[PgTenantStore, PgTenantStore]
) -> None:
    turns = [("nul \u0000 here and zebrafish", "and \x01 a mark"), ("\x01starts with the mark", "zebrafish")]
    data = ("\n".join(claude_lines("s\u00001", turns)) + "\n").encode()
    a, b = stores
    async with a.lease("alice") as t:
        await (await t.eywa()).ingest([write(files, "n.jsonl", data)])
        want = (await (await t.eywa()).show("s\u00001")).session
    async with b.lease("alice") as t:
        got = (await (await t.eywa()).show("s\u00001")).session
    assert want is not None and got is not None
    assert got.markdown == want.markdown and "\u0000" in got.markdown


def test_row_level_security_walls_tenants_apart_in_the_database(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the superuser: past the wall, to set the scene
        for tenant in ("alice", "bob"):
            conn.execute("INSERT INTO macupos.tenants(tenant_id, origin, created_at) VALUES (%s, 'cli', 0)", (tenant,))
            conn.execute(
                "INSERT INTO macupos.forgotten(tenant_id, session_id, at, seq) VALUES (%s, %s, '', 1)",
                (tenant, f"{tenant}-secret"),
            )
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET ROLE macupos_tenant")
        assert conn.execute("SELECT count(*) FROM macupos.forgotten").fetchone() == (0,)  # no tenant set: nothing
        conn.execute("SELECT set_config('macupos.tenant', 'alice', false)")
        assert conn.execute("SELECT session_id FROM macupos.forgotten").fetchall() == [("alice-secret",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO macupos.forgotten(tenant_id, session_id, at, seq) VALUES ('bob', 'x', '', 2)")
        conn.rollback()
        conn.execute("SET ROLE macupos_tenant")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the directory is not the tenant role's
            conn.execute("SELECT * FROM macupos.api_keys")


async def test_the_change_log_names_groups_not_rows(tmp_path: Path) -> None:
    """One note per group however many of its rows a statement touches (an upsert among them)."""
    path = tmp_path / "m.db"
    await (await Database.open(path)).close()
    conn = sqlite3.connect(path, isolation_level=None)
    replicate.install_capture(conn)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO postings(field, term, ts, session_id, dur) VALUES (1, ?, 1.0, 's1', 0)", [("a",), ("b",)]
    )
    conn.execute("INSERT INTO meta(key, value) VALUES('indexed_n', '1') ON CONFLICT(key) DO UPDATE SET value = 2")
    conn.execute("INSERT INTO meta(key, value) VALUES('indexed_n', '1') ON CONFLICT(key) DO UPDATE SET value = 3")
    conn.execute("COMMIT")
    assert replicate.pending_changes(conn) == {"postings": {("s1",)}, "meta": {("indexed_n",)}}
    assert [json.loads(k) for (k,) in conn.execute("SELECT key FROM _replica_changes ORDER BY mirror")] == [
        ["indexed_n"],
        ["s1"],
    ]
    conn.close()


async def test_a_read_is_not_held_up_by_a_write_waiting_for_another_servers_write(
    files: Path, pg_url: str, stores: tuple[PgTenantStore, PgTenantStore]
) -> None:
    paths = [transcript_file(files, f"s{i}", "zebrafish") for i in range(3)]
    a, b = stores
    async with a.lease("alice") as t:
        await (await t.eywa()).ingest([paths[0]])
    holding, release = asyncio.Event(), asyncio.Event()

    async def long_write_through_a() -> None:
        async with a.lease("alice") as t, t.ingest_lock:
            await (await t.eywa()).ingest([paths[1]])
            holding.set()
            await release.wait()

    async def write_through_b() -> None:
        async with b.lease("alice") as t:
            await (await t.eywa()).ingest([paths[2]])

    first = asyncio.create_task(long_write_through_a())
    await holding.wait()
    second = asyncio.create_task(write_through_b())  # waits in the database for A's write
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for _ in range(3000):  # bounded (60 s): until B's write waits for the tenant's lock
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()
            if row and row[0]:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("B's write never waited for A's")
    async with asyncio.timeout(10), b.lease("alice") as t:  # at once, not after A's write
        hits = [h.session_id for h in await (await t.eywa()).search("zebrafish")]
    assert hits == ["s0"]  # A's write is not committed: not seen
    release.set()
    await asyncio.gather(first, second)
    async with b.lease("alice") as t:
        assert sorted(h.session_id for h in await (await t.eywa()).search("zebrafish")) == ["s0", "s1", "s2"]


async def test_a_handoff_uploaded_to_one_server_is_listed_by_another(tmp_path: Path, files: Path, pg_url: str) -> None:
    async with await Eywa.open(memory_settings(tmp_path / "local")) as local:
        await local.ingest([transcript_file(files, "h1", "zebrafish")], use_llm=False)
        view = await local.show("h1")
    assert view.handoff is not None
    async with running_pg_service(tmp_path / "server", pg_url) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            r = await c.post("/v1/handoffs", params={"name": "2026/03/02/h1.md"}, content=view.handoff.markdown)
            assert r.status_code == 200, r.text
        async with tenant_store(tmp_path / "other", pg_url) as other, other.lease("alice") as t:
            rows = await (await t.eywa()).list_handoffs()
            assert [h.session_id for h in rows] == ["h1"]
            assert [sid for sid, _ in await ids_for(other, "alice", "zebrafish")] == ["h1"]
