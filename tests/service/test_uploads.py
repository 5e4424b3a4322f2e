"""Transcript uploads: gzip, idempotence, growth, caps, bombs, malformed bodies and file names."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

from service.settings import MB, Limits
from tests.service.conftest import Server, claude_lines, gz, running_service, transcript_bytes
from tests.soak import database_text

REPO = Path(__file__).resolve().parents[2]
ROLLOUT = next((REPO / "tests" / "memory" / "fixtures" / "codex").rglob("rollout-2025-11-02T09-15-00-*.jsonl"))


def _spooled(srv: Server, tenant: str = "alice") -> list[Path]:
    return sorted((srv.home / "tenants" / tenant / "spool" / "transcripts").rglob("*.jsonl"))


async def test_the_same_file_again_is_unchanged_and_a_grown_one_updates(service: Server) -> None:
    turns = [("fix zebra crossing", "zebra fixed"), ("now the quokka bug", "quokka fixed")]
    first, grown = claude_lines("s1", turns[:1]), claude_lines("s1", turns)
    assert grown[: len(first)] == first
    async with service.client(service.keys["alice"]) as c:
        r1 = await c.post("/v1/transcripts", params={"name": "p/s1.jsonl"}, content="\n".join(first) + "\n")
        r2 = await c.post(
            "/v1/transcripts",
            params={"name": "p/s1.jsonl"},
            content=gz(("\n".join(first) + "\n").encode()),
            headers={"Content-Encoding": "gzip"},
        )
        r3 = await c.post("/v1/transcripts", params={"name": "p/s1.jsonl"}, content="\n".join(grown) + "\n")
        found = await c.get("/v1/search", params={"q": "quokka"})
    assert r1.json()["sessions"] == ["s1"] and r1.json()["counts"]["new"] == 1
    assert r2.json()["counts"] == {"new": 0, "updated": 0, "unchanged": 1}
    assert r3.json()["counts"] == {"new": 0, "updated": 1, "unchanged": 0}
    assert [h["session_id"] for h in found.json()] == ["s1"]
    assert len(_spooled(service)) == 1  # one name, one file


async def test_bad_lines_are_counted_and_a_file_of_junk_is_refused_keeping_the_last_good_one(service: Server) -> None:
    good = transcript_bytes("s1", "zebra")
    with_bad = good + b"{not json\n" + good.splitlines(keepends=True)[0]
    async with service.client(service.keys["alice"]) as c:
        r = await c.post("/v1/transcripts", params={"name": "s1.jsonl"}, content=with_bad)
        assert r.status_code == 200 and r.json()["problems"] == 1
        assert r.json()["first_problems"][0]["line"] == len(good.splitlines()) + 1
        junk = await c.post("/v1/transcripts", params={"name": "s1.jsonl"}, content=b"garbage\n" * 20)
        assert junk.status_code == 422
        assert junk.json()["error"]["message"].startswith("not a transcript: no session")
        assert str(service.home) not in junk.text
        (spooled,) = _spooled(service)
        assert spooled.read_bytes() == with_bad
        grown = with_bad + transcript_bytes("s1", "quokka", turns=3).splitlines(keepends=True)[-1]
        again = await c.post("/v1/transcripts", params={"name": "s1.jsonl"}, content=grown)
        assert again.status_code == 200 and again.json()["sessions"] == ["s1"]
        loglines = await c.post("/v1/transcripts", params={"name": "export.json"}, content=b'{"other": 1}')
        assert loglines.status_code == 422 and "loglines" in loglines.json()["error"]["message"]
        empty = await c.post("/v1/transcripts", params={"name": "e.jsonl"}, content=b"")
        assert empty.status_code == 400


async def test_names_keep_their_kind_and_layout_and_never_leave_the_spool(service: Server) -> None:
    parent = "3f2a9c1e-0000-4000-8000-000000000001"
    sub_lines = [
        json.loads(line) | {"isSidechain": True}
        for line in claude_lines("ignored", [("research the cache", "the cache keeps 64 entries")])
    ]
    for line in sub_lines:
        del line["sessionId"]  # a subagent file that names its parent only by its folder
    async with service.client(service.keys["alice"]) as c:
        codex = await c.post(
            "/v1/transcripts", params={"name": f"sessions/2025/11/02/{ROLLOUT.name}"}, content=ROLLOUT.read_bytes()
        )
        sub = await c.post(
            "/v1/transcripts",
            params={"name": f"projects/-srv-app/{parent}/subagents/agent-a1b2.jsonl"},
            content="\n".join(json.dumps(x) for x in sub_lines) + "\n",
        )
        evil = await c.post(
            "/v1/transcripts", params={"name": "../../../../service.db"}, content=transcript_bytes("e1", "x")
        )
        back = await c.post(
            "/v1/transcripts", params={"name": "..\\..\\bob\\x.jsonl"}, content=transcript_bytes("e2", "y")
        )
        nothing = await c.post("/v1/transcripts", params={"name": "../.."}, content=b"x")
        missing = await c.post("/v1/transcripts", content=b"x")
        shown = await c.get(f"/v1/sessions/{parent}/agent-a1b2")
    assert codex.status_code == 200 and codex.json()["sessions"] == ["codex-0b7e4c2a-9d1f-4e3a-8c55-2f6a7d9e1b30"]
    assert sub.json()["sessions"] == [f"{parent}/agent-a1b2"]
    assert shown.status_code == 200 and "64 entries" in shown.text
    assert evil.status_code == 200 and back.status_code == 200
    assert nothing.status_code == 400 and missing.status_code == 400
    spool = (service.home / "tenants" / "alice" / "spool").resolve()
    assert all(p.resolve().is_relative_to(spool) for p in _spooled(service))
    assert not (service.home / "tenants" / "bob").exists()
    assert "CREATE TABLE" in database_text(service.home / "service.db")  # through SQLite: the file is open here


async def test_oversize_bodies_are_refused_with_413(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, transcript_bytes=64 * 1024, handoff_bytes=4096, json_bytes=1024)
    big = transcript_bytes("s1", "zebra " * 2000, turns=10)
    assert len(big) > 64 * 1024

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the cap holds while reading
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    async with running_service(tmp_path / "home", limits=limits) as srv:
        async with srv.client(await srv.add_key("alice")) as c:
            plain = await c.post("/v1/transcripts", params={"name": "a.jsonl"}, content=big)
            streamed = await c.post("/v1/transcripts", params={"name": "a.jsonl"}, content=chunked())
            handoff = await c.post("/v1/handoffs", content=b"x" * 5000)
            script = await c.post("/v1/script", json={"script": "respond " + "x" * 2000})
            ok = await c.post("/v1/transcripts", params={"name": "a.jsonl"}, content=transcript_bytes("s1", "fits"))
        for r in (plain, streamed, handoff, script):
            assert r.status_code == 413, r.text
            assert r.json()["error"]["code"] == "payload_too_large"
        assert ok.status_code == 200
        assert not list((srv.home / "tenants" / "alice" / "spool" / "tmp").glob("*.part"))


def _bomb(megabytes: int) -> bytes:
    """A gzip body of ``megabytes`` MB of zeros (about a thousandth of that on the wire)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MB)
    return b"".join(deflate.compress(block) for _ in range(megabytes)) + deflate.flush()


async def test_gzip_bombs_and_malformed_gzip_are_refused(service: Server) -> None:
    bomb = _bomb(200)
    assert len(bomb) < MB
    good = transcript_bytes("s1", "zebra")
    two_members = gzip.compress(good[:100]) + gzip.compress(good[100:])
    async with service.client(service.keys["alice"], headers={"Content-Encoding": "gzip"}) as c:
        exploded = await c.post("/v1/transcripts", params={"name": "b.jsonl"}, content=bomb)
        garbage = await c.post("/v1/transcripts", params={"name": "b.jsonl"}, content=b"\x1f\x8b\x08\x00garbage")
        cut = await c.post("/v1/transcripts", params={"name": "b.jsonl"}, content=gz(good)[:-10])
        concatenated = await c.post("/v1/transcripts", params={"name": "b.jsonl"}, content=two_members)
        handoff_bomb = await c.post("/v1/handoffs", content=_bomb(8))
    async with service.client(service.keys["alice"], headers={"Content-Encoding": "br"}) as c:
        brotli = await c.post("/v1/transcripts", params={"name": "b.jsonl"}, content=b"x")
    assert exploded.status_code == 413 and exploded.json()["error"]["code"] == "payload_too_large"
    assert handoff_bomb.status_code == 413
    assert garbage.status_code == 400 and "gzip" in garbage.json()["error"]["message"]
    assert cut.status_code == 400 and "cut short" in cut.json()["error"]["message"]
    assert concatenated.status_code == 200 and concatenated.json()["sessions"] == ["s1"]
    assert brotli.status_code == 415


async def test_a_body_that_stalls_is_cut_at_the_deadline_with_504(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, upload_timeout_s=0.5)
    never = asyncio.Event()

    async def stalling() -> AsyncIterator[bytes]:
        yield transcript_bytes("s1", "zebra")[:100]
        with contextlib.suppress(TimeoutError):  # the server answers first; this only bounds the client
            await asyncio.wait_for(never.wait(), timeout=3)

    async with running_service(tmp_path / "home", limits=limits) as srv:
        async with srv.client(await srv.add_key("alice")) as c:
            r = await c.post("/v1/transcripts", params={"name": "slow.jsonl"}, content=stalling())
            assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
            assert (await c.get("/v1/stats")).status_code == 200  # the server goes on
        assert not list((srv.home / "tenants" / "alice" / "spool" / "tmp").glob("*.part"))
