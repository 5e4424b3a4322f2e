"""`macupos memory mcp` with a memory service: a real MCP client over stdio, its tools answered by a real
service; a transcript given by path is redacted here before it is uploaded."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory.remote.client import RemoteEywa
from memory.settings import MemorySettings
from tests.memory.remote_harness import REPO, client_env, remote_service
from tests.service.conftest import Server, transcript_bytes

SECRET = "ghp_" + "Z7x9Qm2Lk4Vb8Nc1Rt6Yp3Ws5Hd0Jf2Ga7Ke"


@asynccontextmanager
async def _client(settings: MemorySettings) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "macupos", "memory", "mcp"], env=client_env(settings), cwd=str(REPO)
    )
    with (settings.home.parent / "mcp-stderr.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


def _text(result: object) -> str:
    return "\n".join(str(getattr(c, "text", "")) for c in getattr(result, "content", []))


def _received(srv: Server) -> bytes:
    spool = srv.home / "tenants" / "alice" / "spool" / "transcripts"
    return b"".join(p.read_bytes() for p in sorted(spool.rglob("*")) if p.is_file())


async def test_the_stdio_tools_answer_from_the_service(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (srv, settings):
        upload = tmp_path / "s1.jsonl"
        upload.write_bytes(transcript_bytes("s1", "zebra", "quokka"))
        async with await RemoteEywa.open(settings) as eywa:
            await eywa.ingest([upload])
        later = tmp_path / "s2.jsonl"
        later.write_bytes(transcript_bytes("s2", "walrus", f"key {SECRET}"))

        async with _client(settings) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            got = await session.call_tool("eywa_get", {"query": "zebra", "days_back": 100_000})
            found = await session.call_tool("eywa_search", {"query": "quokka"})
            shown = await session.call_tool("eywa_show", {"session_id": "s1"})
            extracted = await session.call_tool("eywa_extract", {"transcript_path": str(later)})
            again = await session.call_tool("eywa_extract", {"session_id": "s1"})
            script = await session.call_tool("memory", {"script": "remember e user Fact predicate p object Helix"})
            recalled = await session.call_tool("memory", {"script": "respond [recall user]"})
            missing = await session.call_tool("eywa_show", {"session_id": "nope"})

    assert tools == {"eywa_get", "eywa_search", "eywa_show", "eywa_extract", "memory"}
    assert not got.is_error and "zebra" in _text(got) and "[[RECALLED" in _text(got)
    assert not found.is_error and "## s1" in _text(found) and "headline: " in _text(found)
    assert not shown.is_error and "## Transcript" in _text(shown) and "quokka" in _text(shown)
    assert not extracted.is_error and _text(extracted).startswith("Extracted 1 handoff(s).")
    assert again.is_error and "send its transcript again" in _text(again)
    assert not script.is_error and "Helix" in _text(recalled)
    assert missing.is_error and "nope" in _text(missing)
    received = _received(srv)
    assert b"walrus" in received and SECRET.encode() not in received
