"""The Python client (sdk/python, macupos_client) against a real `macupos serve` on 127.0.0.1: its README's
first example run as a program, every method, the service's errors as exceptions with its fields,
Retry-After, and the handoff pages."""

from __future__ import annotations

import asyncio
import gzip
import inspect
import io
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import macupos_client
import pytest
from macupos_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigurationError,
    MacuposError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ScriptError,
    ServiceUnavailableError,
    TransportError,
    errors,
    verify_signature,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from service.settings import Limits
from tests.service.conftest import Server, running_service, serving, transcript_bytes

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "sdk" / "python" / "README.md"


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Server]:
    """A running service: tenant alice with write, read and admin keys."""
    async with running_service(tmp_path / "home") as server:
        await server.add_key("alice")
        await server.add_key("alice", "read")
        await server.add_key("alice", "admin")
        yield server


def first_python_block(markdown: str) -> str:
    match = re.search(r"^```python\n(.*?)^```", markdown, re.DOTALL | re.MULTILINE)
    assert match is not None, "the README has no python example"
    return match.group(1)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without proxies (a request to 127.0.0.1 must not go through one)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("MACUPOS_")}
    return env | extra


async def test_the_readme_first_example_uploads_and_gets_from_the_environment_s_service(srv: Server) -> None:
    code = first_python_block(README.read_text(encoding="utf-8"))
    assert "MACUPOS_MEMORY_URL" in code and "MACUPOS_API_KEY" in code and "upload_transcript" in code
    env = clean_env(MACUPOS_MEMORY_URL=srv.url, MACUPOS_API_KEY=srv.keys["alice"])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )  # asynchronously: the server runs in this event loop
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    printed = out.decode()
    assert "sessions: ('s-readme',)" in printed
    assert re.search(r"^2026-03-02\S* s-readme \S", printed, re.MULTILINE), printed
    async with AsyncClient(srv.url, srv.keys["alice"]) as client:  # it is in the memory, not only printed
        assert "okapi" in (await client.session("s-readme")).lower()


def sync_round_trip(url: str, key: str) -> dict[str, Any]:
    """Every memory method of the blocking client, in a thread (the server runs in the test's event loop)."""
    seen: dict[str, Any] = {}
    with Client(url, key) as client:
        seen["upload"] = client.upload_transcript("claude/app/s1.jsonl", transcript_bytes("s1", "zebrafish", "rollout"))
        seen["again"] = client.upload_transcript("claude/app/s1.jsonl", transcript_bytes("s1", "zebrafish", "rollout"))
        seen["get"] = client.get("zebrafish", explain=True)
        seen["text"] = client.get_text("zebrafish")
        seen["search"] = client.search("zebrafish", limit=3)
        seen["markdown"] = client.session("s1")
        seen["handoff"] = client.session("s1", format="handoff")
        seen["script"] = client.script("remember ed user Fact predicate editor object Helix")
        seen["tier"] = client.facts_tier()
        seen["stats"] = client.stats()
        seen["export"] = client.export()
        seen["rate"] = client.last_rate_limit
        seen["forgotten"] = client.forget("s1")
        try:
            client.session("s1")
        except NotFoundError as exc:
            seen["gone"] = exc
    return seen


async def test_the_blocking_client_uploads_gzip_reads_and_forgets(srv: Server) -> None:
    seen = await asyncio.to_thread(sync_round_trip, srv.url, srv.keys["alice"])
    up = seen["upload"]
    assert up.sessions == ("s1",) and up.counts["new"] == 1
    assert up.bytes == len(transcript_bytes("s1", "zebrafish", "rollout"))  # as the service read it: gunzipped
    assert seen["again"].counts == {"new": 0, "updated": 0, "unchanged": 1}  # the same file again: a no-op
    [best] = seen["get"]
    assert best.session_id == "s1" and best.score > 0 and best.explain is not None and best.raw["session_id"] == "s1"
    assert "zebrafish" in seen["text"]
    assert seen["search"] and seen["search"][0].session_id == "s1" and "zebrafish" in seen["search"][0].snippet.lower()
    assert "zebrafish" in seen["markdown"] and seen["handoff"].startswith("---")
    assert isinstance(seen["script"], str) and any("Helix" in line for line in seen["tier"])
    assert seen["stats"].tenant == "alice" and sum(seen["stats"].facts.values()) >= 1
    with tarfile.open(fileobj=io.BytesIO(seen["export"]), mode="r:gz") as archive:
        names = archive.getnames()
    assert "facts/snapshot.tcl" in names and any(n.startswith("handoffs/") and "s1" in n for n in names)
    assert seen["forgotten"] == ["s1"]
    gone = seen["gone"]
    assert (gone.status, gone.code) == (404, "not_found") and "s1" in gone.message


async def test_pages_of_handoffs_follow_the_cursor_to_the_last(srv: Server) -> None:
    async with AsyncClient(srv.url, srv.keys["alice"]) as client:
        for n in range(5):
            data = transcript_bytes(f"p{n}", "pangolin", day=f"2026-03-0{n + 1}")
            await client.upload_transcript(f"claude/app/p{n}.jsonl", data)
        pages = [page async for page in client.iter_handoff_pages(page_size=2)]
        listed = [h async for h in client.iter_handoffs(page_size=2)]
        first = await client.list_handoffs(limit=2)
        rest = await client.list_handoffs(limit=10, cursor=first.next_cursor)
    assert [len(p.handoffs) for p in pages] == [2, 2, 1] and pages[-1].next_cursor is None
    ids = [h.session_id for h in listed]
    assert ids == ["p4", "p3", "p2", "p1", "p0"]  # newest first, each once
    assert [h.session_id for h in first.handoffs + rest.handoffs] == ids and rest.next_cursor is None
    assert all(h.date.startswith("2026-03-0") and h.headline for h in listed)


async def test_a_handoff_uploads_and_reads_back(srv: Server) -> None:
    async with AsyncClient(srv.url, srv.keys["alice"]) as client:
        await client.upload_transcript("claude/app/h1.jsonl", transcript_bytes("h1", "narwhal"))
        markdown = await client.session("h1", format="handoff")
        await client.forget("h1")
        with pytest.raises(MacuposError) as refused:  # forgotten: it stays out
            await client.upload_handoff(markdown, name="2026/03/02/h1.md")
    assert refused.value.status == 409 and refused.value.code == "conflict"  # type: ignore[attr-defined]


async def test_errors_carry_the_service_s_status_code_message_and_fields(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, handoff_bytes=64)
    async with running_service(tmp_path / "home", limits=limits) as server:
        await server.add_key("alice")
        read_key = await server.add_key("alice", "read")
        async with AsyncClient(server.url, "mpk_not_a_key") as stranger:
            with pytest.raises(AuthenticationError) as unknown:
                await stranger.stats()
        async with AsyncClient(server.url, read_key) as reader:
            with pytest.raises(PermissionDeniedError) as short:
                await reader.forget("anything")
        async with AsyncClient(server.url, server.keys["alice"]) as client:
            with pytest.raises(ScriptError) as failed:
                await client.script("remember x user Fact predicate p object o\nnosuch")
            with pytest.raises(PayloadTooLargeError) as big:
                await client.upload_handoff("x" * 1000)
            with pytest.raises(NotFoundError):
                await client.request("GET", "/v1/no-such-route")
    assert (unknown.value.status, unknown.value.code) == (401, "unauthorized")
    assert "mpk_not_a_key" not in str(unknown.value)
    assert (short.value.status, short.value.code) == (403, "forbidden") and "read" in short.value.message
    assert failed.value.code == "script_error" and failed.value.line == 2 and failed.value.message
    assert big.value.extra == {"limit": 64} and big.value.status == 413


async def test_no_answer_is_a_transport_error_and_from_env_needs_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(Starlette()) as url:
        pass  # served, then stopped: nothing listens on its port now
    async with AsyncClient(url, "k", connect_timeout=2) as client:
        with pytest.raises(TransportError):
            await client.stats()
    monkeypatch.delenv("MACUPOS_MEMORY_URL", raising=False)
    with pytest.raises(ConfigurationError, match="MACUPOS_MEMORY_URL"):
        Client.from_env()
    monkeypatch.setenv("MACUPOS_MEMORY_URL", url)
    monkeypatch.setenv("MACUPOS_API_KEY", "k-from-env")
    async with AsyncClient.from_env() as from_env:
        assert from_env.base_url == url and from_env.options.api_key == "k-from-env"


async def test_a_wait_longer_than_the_cap_is_raised_at_once_with_the_server_s_retry_after(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=Limits(rate_per_s=0.01, rate_burst=1)) as server:
        key = await server.add_key("alice")
        async with AsyncClient(server.url, key, max_retry_wait=0.5) as client:
            await client.stats()
            with pytest.raises(RateLimitedError) as limited:
                async with asyncio.timeout(10):  # bounded: the client must not wait out the 100 s
                    await client.stats()
    assert limited.value.code == "rate_limited" and limited.value.retry_after is not None
    assert limited.value.retry_after > 0.5 and limited.value.headers["retry-after"]


class Flaky:
    """A 127.0.0.1 stand-in that answers ``failures`` times with ``status`` and Retry-After: 0, then 200; it
    keeps each body it was sent (gunzipped) to show the retry sent the same upload."""

    def __init__(self, status: int, failures: int) -> None:
        self.status, self.failures = status, failures
        self.bodies: list[bytes] = []

    async def __call__(self, request: Request) -> Response:
        raw = await request.body()
        self.bodies.append(gzip.decompress(raw) if request.headers.get("content-encoding") == "gzip" else raw)
        if len(self.bodies) <= self.failures:
            body = {"error": {"code": "busy", "message": "try again"}}
            return JSONResponse(body, status_code=self.status, headers={"Retry-After": "0"})
        counts = {"new": 1, "updated": 0, "unchanged": 0}
        headers = {"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "99", "X-RateLimit-Reset": "0.5"}
        return JSONResponse({"sessions": ["s"], "counts": counts, "bytes": len(self.bodies[-1])}, headers=headers)


async def flaky(status: int, failures: int, use: Callable[[AsyncClient], Awaitable[Any]], **options: Any) -> Flaky:
    stand_in = Flaky(status, failures)

    async def answer(request: Request) -> Response:  # a function: Starlette takes a callable object for an ASGI app
        return await stand_in(request)

    app = Starlette(routes=[Route("/v1/transcripts", answer, methods=["POST"])])
    async with serving(app) as url, AsyncClient(url, "k", **options) as client:
        await use(client)
    return stand_in


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_is_honoured_up_to_max_retries(status: int) -> None:
    data = b'{"type": "user"}\n' * 50
    results: list[Any] = []

    async def upload(client: AsyncClient) -> None:
        results.append(await client.upload_transcript("t.jsonl", data))
        results.append(client.last_rate_limit)

    seen = await flaky(status, 2, upload, max_retries=2)
    assert seen.bodies == [data, data, data]  # the same upload, sent again twice
    assert results[0].sessions == ("s",)
    assert (results[1].limit, results[1].remaining, results[1].reset) == (100, 99, 0.5)

    async def gives_up(client: AsyncClient) -> None:
        expected = RateLimitedError if status == 429 else ServiceUnavailableError
        with pytest.raises(expected) as caught:
            await client.upload_transcript("t.jsonl", data)
        assert caught.value.retry_after == 0.0 and caught.value.code == "busy"

    assert len((await flaky(status, 2, gives_up, max_retries=1)).bodies) == 2
    assert len((await flaky(status, 2, gives_up, max_retries=0)).bodies) == 1


async def test_keys_are_made_listed_and_revoked_with_an_admin_key(srv: Server) -> None:
    async with AsyncClient(srv.url, srv.keys["alice:admin"]) as admin:
        made = await admin.create_key("read", label="sdk test")
        assert made.scope == "read" and made.tenant == "alice" and made.key and made.key not in repr(made)
        async with AsyncClient(srv.url, made.key) as fresh:
            assert (await fresh.stats()).tenant == "alice"
            listed = {k.id: k for k in await admin.list_keys()}
            assert listed[made.id].label == "sdk test" and listed[made.id].revoked_at is None
            await admin.revoke_key(made.id)
            with pytest.raises(AuthenticationError):
                await fresh.stats()
        with pytest.raises(NotFoundError):
            await admin.revoke_key("no-such-key")
    async with AsyncClient(srv.url, srv.keys["alice"]) as writer:
        with pytest.raises(PermissionDeniedError):
            await writer.create_key("write")


async def test_a_webhook_delivery_is_signed_with_the_secret_the_client_was_given(srv: Server) -> None:
    got: list[tuple[bytes, dict[str, str]]] = []
    arrived = asyncio.Event()

    async def receive(request: Request) -> Response:
        got.append((await request.body(), dict(request.headers)))
        arrived.set()
        return Response(status_code=204)

    receiver = Starlette(routes=[Route("/hook", receive, methods=["POST"])])
    async with serving(receiver) as hook_url, AsyncClient(srv.url, srv.keys["alice"]) as client:
        made = await client.create_webhook(f"{hook_url}/hook", ["session.ingested"])
        assert made.secret and made.secret not in repr(made) and made.events == ("session.ingested",)
        assert [w.id for w in await client.list_webhooks()] == [made.id]
        await client.upload_transcript("claude/app/w1.jsonl", transcript_bytes("w1", "axolotl"))
        await asyncio.wait_for(arrived.wait(), 30)
        body, headers = got[0]
        assert verify_signature(made.secret, body, headers["x-macupos-signature-256"])
        assert not verify_signature("another secret", body, headers["x-macupos-signature-256"])
        deliveries = await client.webhook_deliveries(made.id)
        assert deliveries and deliveries[0].event == "session.ingested"
        assert deliveries[0].id == headers["x-macupos-delivery"]
        await client.delete_webhook(made.id)
        assert await client.list_webhooks() == []
        with pytest.raises(NotFoundError):
            await client.delete_webhook(made.id)


_IMPORTS_OF = """
import ast, pathlib, sys
names = set()
for path in pathlib.Path(sys.argv[1]).rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
print(" ".join(sorted(names)))
"""


def test_the_package_stands_alone_on_httpx_and_type_checks_strictly() -> None:
    sdk = ROOT / "sdk" / "python"
    declared = tomllib.loads((sdk / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert [re.split(r"[<>=\[ ]", d)[0] for d in declared] == ["httpx"]
    src = sdk / "src" / "macupos_client"
    assert (src / "py.typed").is_file()
    # The imports are read in a child interpreter: CPython 3.11's ast.parse inside this long pytest process once
    # failed with "AST constructor recursion depth mismatch" (an interpreter bug, not the file's).
    found = subprocess.run(
        [sys.executable, "-c", _IMPORTS_OF, str(src)], capture_output=True, text=True, timeout=60, check=True
    )
    imported = set(found.stdout.split())
    assert imported - set(sys.stdlib_module_names) == {"httpx", "macupos_client"}  # never memory, service, …
    mypy = subprocess.run(
        [str(Path(sys.executable).parent / "mypy"), "--strict", "--no-incremental", str(src)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert mypy.returncode == 0, mypy.stdout[-3000:]


def test_every_error_descends_from_macupos_error_and_the_docstring_draws_each() -> None:
    defined = {
        cls
        for module in (errors, macupos_client)
        for cls in vars(module).values()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__.startswith("macupos_client")
    }
    assert defined and all(issubclass(cls, MacuposError) for cls in defined)
    tree = (errors.__doc__ or "").split("::", 1)[1]
    drawn = set(re.findall(r"^\s+([A-Z]\w+)", tree, re.MULTILINE))
    assert {cls.__name__ for cls in defined} == drawn
    assert errors.error_for(422, "script_error") is ScriptError and errors.error_for(502, "") is errors.ServerError
