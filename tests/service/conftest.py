"""The memory service under test: a real uvicorn on a free 127.0.0.1 port, real httpx clients, real keys.

`running_service` serves the app in this process (the same event loop as the test); the tests of the
`macupos serve` command itself start it as a subprocess (test_serve_command.py).
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.types import ASGIApp

from memory.settings import MemorySettings
from service.app import build_app, embedded_store
from service.keys import SqliteKeyStore
from service.server import bind
from service.settings import Limits, ServiceSettings
from service.tenants import Scope

__all__ = ["Server", "claude_lines", "running_service", "transcript_bytes"]


def claude_lines(
    session_id: str,
    turns: Sequence[tuple[str, str]],
    *,
    cwd: str = "/srv/app",
    day: str = "2026-03-02",
    start: int = 0,
    branch: str = "main",
) -> list[str]:
    """Claude Code JSONL lines: each turn a user message and the assistant's answer."""
    lines = []
    parent: str | None = None
    for n, (asked, answered) in enumerate(turns, start):
        for role, text, tag in (("user", asked, "u"), ("assistant", answered, "a")):
            uuid = f"{session_id}-{tag}{n}"
            message: dict[str, object] = {"role": role, "content": text}
            if role == "assistant":
                message = {"role": role, "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}]}
            lines.append(
                json.dumps(
                    {
                        "type": role,
                        "sessionId": session_id,
                        "uuid": uuid,
                        "parentUuid": parent,
                        "isSidechain": False,
                        "timestamp": f"{day}T10:{n // 60 % 60:02d}:{n % 60:02d}Z",
                        "cwd": cwd,
                        "gitBranch": branch,
                        "version": "2.1.0",
                        "message": message,
                    }
                )
            )
            parent = uuid
    return lines


def transcript_bytes(session_id: str, *words: str, turns: int = 2, **kw: str) -> bytes:
    """A small transcript whose every turn names ``words`` (the markers a test looks for)."""
    said = " ".join(words)
    pairs = [(f"please look at {said} in step {i}", f"done: {said} fixed in step {i}") for i in range(turns)]
    return ("\n".join(claude_lines(session_id, pairs, **kw)) + "\n").encode()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6)


@dataclass(slots=True)
class Server:
    url: str
    home: Path
    keys: dict[str, str] = field(default_factory=dict)  # "tenant" or "tenant:scope" -> key

    def client(self, key: str | None, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
        sent = ({"X-API-Key": key} if key else {}) | (headers or {})
        return httpx.AsyncClient(base_url=self.url, headers=sent, timeout=60)

    async def add_key(self, tenant: str, scope: Scope = "write") -> str:
        store = await SqliteKeyStore.open(self.home / "service.db")
        try:
            new = await store.create_key(tenant, scope)
        finally:
            await store.close()
        self.keys[tenant if scope == "write" else f"{tenant}:{scope}"] = new.api_key
        return new.api_key


def memory_settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


@asynccontextmanager
async def serving(app: ASGIApp, *, timeout_s: float = 30) -> AsyncIterator[str]:
    """``app`` under uvicorn on a real socket on 127.0.0.1, in this event loop: its base URL while it runs,
    stopped after (its lifespan ended: tenants closed). The wait for it to start is bounded."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    config.load()
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(timeout_s):
        while not server.started:
            if task.done():
                task.result()  # raises what stopped it
                raise RuntimeError("the server stopped before it started")
            await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(timeout_s):
            await task


@asynccontextmanager
async def running_service(home: Path, **settings: object) -> AsyncIterator[Server]:
    """The app on embedded tenants, served (:func:`serving`)."""
    limits = settings.pop("limits", Limits(rate_per_s=0))
    service = ServiceSettings(home=home, port=0, limits=limits, **settings)  # type: ignore[arg-type]
    async with serving(build_app(service, embedded_store(service, memory_settings(home)))) as url:
        yield Server(url, home)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Server]:
    """A running service with tenants alice and bob (write keys), alice:read and alice:admin keys."""
    async with running_service(tmp_path / "home") as srv:
        await srv.add_key("alice")
        await srv.add_key("bob")
        await srv.add_key("alice", "read")
        await srv.add_key("alice", "admin")
        yield srv
