"""`/mcp`: a real MCP client over streamable HTTP, each key scoped to its own tenant's memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.service.conftest import Server, transcript_bytes


@asynccontextmanager
async def mcp_session(srv: Server, key: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
        streamable_http_client(f"{srv.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _text(result: object) -> str:
    return "\n".join(str(getattr(c, "text", "")) for c in getattr(result, "content", []))


async def _seed(srv: Server) -> None:
    for tenant, words in (("alice", ("zebra", "quokka")), ("bob", ("walrus", "narwhal"))):
        async with srv.client(srv.keys[tenant]) as c:
            await c.post(
                "/v1/transcripts", params={"name": f"{tenant}.jsonl"}, content=transcript_bytes(tenant, *words)
            )
            # The same session id in both tenants, each with its own content.
            await c.post("/v1/transcripts", params={"name": "shared.jsonl"}, content=transcript_bytes("shared", *words))
            await c.post("/v1/script", json={"script": f"remember pet user Fact predicate pet object {words[0]}"})


async def test_the_tools_of_the_stdio_server_are_served_and_scoped_to_the_keys_tenant(service: Server) -> None:
    await _seed(service)
    async with mcp_session(service, service.keys["alice"]) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        got = _text(await s.call_tool("eywa_get", {"query": "zebra narwhal walrus"}))
        own = _text(await s.call_tool("eywa_search", {"query": "quokka"}))
        other = _text(await s.call_tool("eywa_search", {"query": "narwhal"}))
        shown_other = await s.call_tool("eywa_show", {"session_id": "bob"})
        shared = _text(await s.call_tool("eywa_show", {"session_id": "shared"}))
        facts = _text(await s.call_tool("memory", {"script": "recall all"}))
    assert names == {"eywa_get", "eywa_search", "eywa_show", "eywa_extract", "memory"}
    assert "zebra" in got and "walrus" not in got and "narwhal" not in got
    assert "## alice" in own
    assert other.startswith("No session content matches")
    assert shown_other.is_error and "no session or handoff" in _text(shown_other)
    assert "quokka" in shared and "walrus" not in shared
    assert "zebra" in facts and "walrus" not in facts


async def test_a_read_key_cannot_change_the_memory_and_no_key_reads_server_files(service: Server) -> None:
    await _seed(service)
    async with mcp_session(service, service.keys["alice:read"]) as s:
        assert "zebra" in _text(await s.call_tool("eywa_get", {"query": "zebra"}))
        script = await s.call_tool("memory", {"script": "forget pet"})
        extract = await s.call_tool("eywa_extract", {"session_id": "alice"})
    assert script.is_error and "only read" in _text(script)
    assert extract.is_error and "only read" in _text(extract)
    spooled = next((service.home / "tenants" / "bob" / "spool").rglob("bob.jsonl"))
    async with mcp_session(service, service.keys["alice"]) as s:
        stolen = await s.call_tool("eywa_extract", {"transcript_path": str(spooled)})
        assert "walrus" not in _text(await s.call_tool("memory", {"script": "respond [recall all]"}))
    assert stolen.is_error and "upload the transcript" in _text(stolen)
    async with service.client(service.keys["bob"]) as c:
        assert (await c.get("/v1/search", params={"q": "zebra"})).json() == []


async def test_mcp_without_a_valid_key_is_refused_before_any_tool(service: Server) -> None:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as c:
        missing = await c.post("/mcp", json=hello, headers=headers)
        wrong = await c.post("/mcp", json=hello, headers=headers | {"X-API-Key": service.keys["alice"] + "x"})
        right = await c.post("/mcp", json=hello, headers=headers | {"X-API-Key": service.keys["alice"]})
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.json()["error"]["code"] == "unauthorized"
    assert right.status_code == 200 and right.json()["result"]["serverInfo"]["name"] == "eywa"


async def test_an_oversize_mcp_body_is_a_json_413(service: Server) -> None:
    async with service.client(service.keys["alice"]) as c:
        r = await c.post("/mcp", content=b"x" * (4 * 1024 * 1024 + 1), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
