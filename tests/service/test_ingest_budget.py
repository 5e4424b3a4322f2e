"""The server-wide ingest budget (service/ingest_budget.py): while one tenant's upload ingests, another's that
would take the bytes in flight past the budget is answered 503 with a Retry-After and nothing of it is kept;
alone, an upload goes in even when it is larger than the whole budget."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from service.settings import Limits
from tests.service.conftest import Server, gz, running_service, transcript_bytes


@asynccontextmanager
async def _held_ingest(
    srv: Server, client: httpx.AsyncClient, body: bytes
) -> AsyncIterator[asyncio.Task[httpx.Response]]:
    """Alice's upload of ``body``, admitted and ingesting but held at its first write, until the block ends.

    What holds it is real: another connection keeps the write lock of alice's database (as a backup or the
    CLI would, for a moment). Her upload is admitted (the budget counts its bytes) once its file is in the
    spool, and it then waits for the lock within the database's busy timeout (30 s)."""
    seeded = await _upload(client, "a0.jsonl", transcript_bytes("a0", "seed"))  # the tenant's database exists
    assert seeded.status_code == 200, seeded.text
    holder = sqlite3.connect(srv.home / "tenants" / "alice" / "memory.db", timeout=5, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        before = set(_kept(srv, "alice"))
        upload = asyncio.create_task(_upload(client, "a1.jsonl", body))
        for _ in range(3000):  # polling the spool that this loop's server writes: at most 30 s
            if set(_kept(srv, "alice")) - before or upload.done():
                break
            await asyncio.sleep(0.01)
        assert not upload.done(), "the held upload ended before it reached its write"
        yield upload
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _kept(srv: Server, tenant: str) -> list[Path]:
    spool = srv.home / "tenants" / tenant / "spool"
    return sorted(p for p in spool.rglob("*") if p.is_file()) if spool.exists() else []


async def _upload(c: httpx.AsyncClient, name: str, body: bytes, **headers: str) -> httpx.Response:
    return await c.post("/v1/transcripts", params={"name": name}, content=body, headers=headers)


async def test_past_the_budget_an_upload_waits_its_turn_with_a_503_and_alone_any_size_goes_in(
    tmp_path: Path,
) -> None:
    alice_body, bob_body = transcript_bytes("a1", "zebra", turns=4), transcript_bytes("b1", "quokka")
    limits = Limits(rate_per_s=0, ingest_budget_bytes=len(alice_body) // 2)  # alice's upload alone is past it
    async with running_service(tmp_path / "home", limits=limits) as srv:
        await srv.add_key("alice")
        await srv.add_key("bob")
        async with srv.client(srv.keys["alice"]) as a, srv.client(srv.keys["bob"]) as b:
            async with _held_ingest(srv, a, alice_body) as first:
                refused = await _upload(b, "b1.jsonl", bob_body)
                assert refused.status_code == 503
                assert refused.json()["error"]["code"] == "ingest_busy"
                assert int(refused.headers["Retry-After"]) in range(1, 61)  # seconds, within the cap
                assert _kept(srv, "bob") == []
            async with asyncio.timeout(60):
                done = await first
            assert done.status_code == 200 and done.json()["sessions"] == ["a1"]
            again = await _upload(b, "b1.jsonl", bob_body)  # nothing else runs now: admitted
            assert again.status_code == 200 and again.json()["sessions"] == ["b1"]


async def test_a_gzip_body_past_the_budget_once_inflated_is_refused_and_its_spooled_copy_removed(
    tmp_path: Path,
) -> None:
    alice_body, bob_body = transcript_bytes("a1", "zebra"), transcript_bytes("b1", "quokka", turns=6)
    packed = gz(bob_body)
    # Its declared (compressed) size fits beside alice's; what it inflates to does not.
    budget = len(alice_body) + len(packed)
    assert len(alice_body) + len(bob_body) > budget
    limits = Limits(rate_per_s=0, ingest_budget_bytes=budget)
    async with running_service(tmp_path / "home", limits=limits) as srv:
        await srv.add_key("alice")
        await srv.add_key("bob")
        async with srv.client(srv.keys["alice"]) as a, srv.client(srv.keys["bob"]) as b:
            async with _held_ingest(srv, a, alice_body) as first:
                refused = await _upload(b, "b1.jsonl", packed, **{"Content-Encoding": "gzip"})
                assert refused.status_code == 503 and refused.headers["Retry-After"].isdigit()
                assert _kept(srv, "bob") == []  # read, spooled, then removed: no copy stays
            async with asyncio.timeout(60):
                assert (await first).status_code == 200
            assert (await b.get("/v1/sessions/b1")).status_code == 404  # never ingested
