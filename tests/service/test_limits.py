"""One tenant cannot hurt the others or the machine: the request head's size and time are capped below the
app (a real `macupos serve`, raw sockets), a tenant's files are its owner's alone whatever its first request,
`GET /mcp` event streams are bounded per key and in time, and the login page says only fixed texts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from service.settings import Limits
from service.web.login import LOGIN_ERRORS, UNKNOWN_LOGIN_ERROR
from tests.service.conftest import Server, running_service, transcript_bytes
from tests.service.serve_proc import cli, serving

HEAD_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    """`macupos serve` with a 1 s head timeout: its URL, its home and a write key of tenant carol (unused)."""
    home = tmp_path_factory.mktemp("limits") / "home"
    created = cli(home, "serve", "keys", "create", "--tenant", "carol", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["api_key"]
    with serving(home, home.parent / "serve.log", "--head-timeout", str(HEAD_TIMEOUT_S)) as (_, url):
        yield url, home, key


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _answer(sock: socket.socket, within_s: float) -> bytes:
    """What the server sent before it closed the connection (b"" for a bare close), read for at most
    ``within_s``; AssertionError if it is still open then."""
    sock.settimeout(within_s)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {within_s} s; it sent {got[:80]!r}") from None
    return got


def test_a_one_megabyte_header_is_refused_quickly_and_the_server_stays_well(served: tuple[str, Path, str]) -> None:
    url, _, _ = served
    head = b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + b"a" * (1024 * 1024) + b"\r\n\r\n"
    started = time.monotonic()
    with socket.create_connection(_address(url), timeout=10) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # closed while we sent: a refusal too
            sock.sendall(head)
        answer = _answer(sock, within_s=10)
    took = time.monotonic() - started
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert took < 5, f"refusing a 1 MB header took {took:.2f} s"
    # A head under the cap, and a body far larger than it in the same write, are served as before.
    assert httpx.get(f"{url}/healthz", headers={"X-Pad": "p" * 32 * 1024}, timeout=10).status_code == 200


def test_a_head_sent_too_slowly_is_dropped(served: tuple[str, Path, str]) -> None:
    """Twenty slowloris connections (a header byte every 0.2 s, forever) and one that sends nothing: each
    is closed soon after the 1 s head timeout, while a normal request is still answered."""
    url, _, _ = served
    slow = [socket.create_connection(_address(url), timeout=5) for _ in range(20)]
    silent = socket.create_connection(_address(url), timeout=5)
    opened = time.monotonic()
    for sock in slow:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    open_socks = {sock.fileno(): sock for sock in [*slow, silent]}
    answers: dict[int, bytes] = {}
    closed_after: list[float] = []
    deadline = opened + HEAD_TIMEOUT_S + 10
    try:
        while open_socks and time.monotonic() < deadline:
            for sock in list(open_socks.values()):
                if sock is not silent:
                    with contextlib.suppress(OSError):  # closed by the server: what it said is read below
                        sock.sendall(b"a")
            readable, _, _ = select.select(list(open_socks.values()), [], [], 0.2)
            for sock in readable:
                answers[sock.fileno()] = _answer(sock, within_s=5)
                closed_after.append(time.monotonic() - opened)
                del open_socks[sock.fileno()]
        still_open = len(open_socks)
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    finally:
        for sock in [*slow, silent]:
            sock.close()
    assert still_open == 0, f"{still_open} of 21 connections were still open {deadline - opened:.0f} s on"
    assert min(closed_after) >= HEAD_TIMEOUT_S * 0.9, closed_after  # the timeout, not something sooner
    # A head begun is told why it ends (unless our next byte's reset overtook the answer); silence is not.
    assert all(a == b"" or a.startswith(b"HTTP/1.1 408 ") for fd, a in answers.items() if fd != silent.fileno())
    assert answers.get(silent.fileno(), b"") == b""


def test_kept_alive_and_pipelined_requests_are_served_past_the_head_timeout(served: tuple[str, Path, str]) -> None:
    """The head's clock runs only while a head is being sent: an idle kept-alive connection is uvicorn's
    keep-alive timeout's business (30 s), and two requests in one write are both answered."""
    url, _, _ = served
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(request * 2)
        assert _responses(sock, 2)
        # Idle for longer than the head timeout between requests: not a slow head.
        assert select.select([sock], [], [], HEAD_TIMEOUT_S * 2)[0] == []
        sock.sendall(request)
        assert _responses(sock, 1)


def _responses(sock: socket.socket, count: int) -> bool:
    """Whether ``count`` whole 200 answers to GET /healthz come on ``sock`` (read with a bounded wait)."""
    got = b""
    sock.settimeout(10)
    while got.count(b"HTTP/1.1 200 ") < count or not got.endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            return False
        got += chunk
    return got.count(b"HTTP/1.1 200 ") == count


def test_a_tenant_whose_first_request_is_an_upload_has_owner_only_files(served: tuple[str, Path, str]) -> None:
    url, home, key = served
    body = transcript_bytes("first", "lantern", turns=400)  # far more than the head cap, in the same write
    assert len(body) > 2 * Limits().header_bytes
    answer = httpx.post(
        f"{url}/v1/transcripts", params={"name": "first.jsonl"}, content=body, headers={"X-API-Key": key}, timeout=60
    )
    assert answer.status_code in (200, 201), answer.text
    tenant = home / "tenants" / "carol"
    found = [tenant, *tenant.rglob("*")]
    names = {p.name for p in found}
    assert {"memory.db", "memory.db-wal", "memory.db-shm", "spool", "transcripts"} <= names, names
    loose = {
        str(p.relative_to(home)): oct(stat.S_IMODE(p.lstat().st_mode))
        for p in found
        if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert loose == {}
    assert stat.S_IMODE(os.stat(home / "tenants").st_mode) == 0o700


# -- GET /mcp event streams (the app in this process, with small limits) ------------------------------------

SSE = {"Accept": "text/event-stream"}


async def test_mcp_event_streams_are_capped_per_key_and_end_after_their_time(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, mcp_streams_per_key=2, mcp_stream_s=2.0)
    async with running_service(tmp_path / "home", limits=limits) as srv:
        alice, bob = await srv.add_key("alice"), await srv.add_key("bob")
        async with srv.client(alice, SSE) as a, srv.client(bob, SSE) as b:
            first = await a.send(a.build_request("GET", "/mcp"), stream=True)
            second = await a.send(a.build_request("GET", "/mcp"), stream=True)
            try:
                assert first.status_code == second.status_code == 200
                assert first.headers["content-type"].startswith("text/event-stream")
                third = await a.get("/mcp")
                assert third.status_code == 429 and third.json()["error"]["code"] == "rate_limited"
                assert "Retry-After" in third.headers
                other = await b.send(b.build_request("GET", "/mcp"), stream=True)  # another key's own cap
                assert other.status_code == 200
                await other.aclose()
                # Each stream ends by itself, cleanly (a complete chunked body), soon after its 2 s.
                started = time.monotonic()
                async with asyncio.timeout(15):
                    for stream in (first, second):
                        async for _ in stream.aiter_bytes():
                            pass
                lasted = time.monotonic() - started
                assert lasted > 1.5 and lasted < 10  # ended by its 2 s cap, not at once nor never
            finally:
                await first.aclose()
                await second.aclose()
            # Their places are free again.
            again = await _open_within(a, 10)
            assert again.status_code == 200
            await again.aclose()


async def _open_within(client: httpx.AsyncClient, seconds: float) -> httpx.Response:
    """A GET /mcp stream, retried while the server has not yet counted a just-ended one out (bounded)."""
    async with asyncio.timeout(seconds):
        while True:
            response = await client.send(client.build_request("GET", "/mcp"), stream=True)
            if response.status_code != 429:
                return response
            await response.aclose()
            await asyncio.sleep(0.05)


# -- the login page ---------------------------------------------------------------------------------------


async def test_the_login_page_shows_only_fixed_texts_for_its_error_codes(service: Server) -> None:
    planted = '<script>alert("x")</script>Call +1 555 0100 to restore your account'
    async with service.client(None) as c:
        plain = await c.get("/login")
        known = await c.get("/login", params={"error": "expired"})
        odd = await c.get("/login", params={"error": planted})
        words = await c.get("/login", params={"error": "Your account is locked: call 555 0100"})
    assert plain.status_code == known.status_code == odd.status_code == words.status_code == 200
    assert 'id="error"' not in plain.text
    assert LOGIN_ERRORS["expired"] in known.text
    for page in (odd, words):
        assert UNKNOWN_LOGIN_ERROR in page.text
        assert "555 0100" not in page.text and "alert" not in page.text and "locked" not in page.text


def test_the_key_store_a_shell_command_makes_is_its_owners_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = cli(home, "serve", "keys", "create", "--tenant", "dora")
    assert made.returncode == 0, made.stderr
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [home, *home.iterdir()]}
    assert modes == {"home": 0o700} | {name: 0o600 for name in modes if name != "home"}, modes
    assert "service.db" in modes
