"""`X-RateLimit-Limit`, `-Remaining` and `-Reset` on every answer to a request whose key is known (success or
error, a route's, the MCP SDK's), `Retry-After` on a 429, through a real server; the bucket arithmetic behind
them with an injected clock."""

from __future__ import annotations

from pathlib import Path

import httpx

from service.ratelimit import RateLimiter
from service.settings import Limits
from tests.service.conftest import running_service

RATE = Limits(rate_per_s=0.05, rate_burst=4)  # a token per 20 s: the test's own time adds none
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _rate(r: httpx.Response) -> tuple[int, int, int]:
    return (
        int(r.headers["x-ratelimit-limit"]),
        int(r.headers["x-ratelimit-remaining"]),
        int(r.headers["x-ratelimit-reset"]),
    )


def test_the_bucket_tells_its_limit_what_remains_and_when_it_is_full_again() -> None:
    now = [100.0]
    limiter = RateLimiter(2.0, 3, clock=lambda: now[0])
    first = limiter.acquire("k")
    assert (first.limit, first.remaining, first.wait) == (3, 2, 0.0)
    assert first.headers() == {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "1"}
    limiter.acquire("k")
    limiter.acquire("k")
    refused = limiter.acquire("k")
    assert refused.remaining == 0 and refused.wait == 0.5 and refused.reset_s == 1.5
    assert refused.headers()["X-RateLimit-Reset"] == "2"  # rounded up: never early
    peeked = limiter.peek("k")  # nothing spent by a look
    assert peeked.remaining == 0 and limiter.peek("k").reset_s == 1.5
    now[0] += 0.5
    assert limiter.peek("k").remaining == 1
    now[0] += 10
    full = limiter.peek("k")
    assert (full.remaining, full.reset_s, full.headers()["X-RateLimit-Reset"]) == (3, 0.0, "0")
    assert limiter.take("k") == 0.0  # the old interface still answers the wait alone


def test_a_limiter_with_no_rate_limits_nothing_and_has_nothing_to_tell() -> None:
    limiter = RateLimiter(0, 5)
    assert not limiter.enabled
    assert [limiter.take("k") for _ in range(20)] == [0.0] * 20


async def test_each_success_counts_down_and_the_429_keeps_retry_after(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=RATE) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            answers = [await c.get("/v1/stats") for _ in range(5)]
    assert [r.status_code for r in answers] == [200, 200, 200, 200, 429]
    assert [_rate(r)[:2] for r in answers] == [(4, 3), (4, 2), (4, 1), (4, 0), (4, 0)]
    assert 18 <= _rate(answers[0])[2] <= 20  # a token short, 20 s a token (less what the test's time refilled)
    assert 78 <= _rate(answers[3])[2] <= 80  # four short
    limited = answers[-1]
    assert limited.json()["error"]["code"] == "rate_limited"
    assert int(limited.headers["retry-after"]) >= 1


async def test_error_answers_carry_the_headers_and_a_refused_scope_spends_nothing(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=RATE) as srv:
        reader = await srv.add_key("alice", "read")
        async with srv.client(reader) as c:
            bad_param = await c.get("/v1/get", params={"max": "99"})
            missing = await c.get("/v1/sessions/no-such-session")
            forbidden = await c.post("/v1/script", json={"script": "x"})
            after = await c.get("/v1/stats")
    assert (bad_param.status_code, missing.status_code, forbidden.status_code) == (400, 404, 403)
    assert _rate(bad_param)[:2] == (4, 3)
    assert _rate(missing)[:2] == (4, 2)
    assert _rate(forbidden)[:2] == (4, 2)  # refused before its rate counted
    assert _rate(after)[:2] == (4, 1)


async def test_no_headers_without_a_known_key(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=RATE) as srv, srv.client(None) as c:
        answers = [
            await c.get("/v1/stats"),
            await c.get("/v1/stats", headers={"X-API-Key": "mpk_000000000000_" + "A" * 43}),
            await c.get("/healthz"),
        ]
    assert [r.status_code for r in answers] == [401, 401, 200]
    assert not any("x-ratelimit-limit" in r.headers for r in answers)


async def test_every_kind_of_keyed_route_answers_with_the_headers(tmp_path: Path) -> None:
    """The memory routes, the tenant's keys, the server's own routes and the MCP SDK's answers alike."""
    async with running_service(tmp_path / "home", limits=Limits(rate_per_s=0.01, rate_burst=100)) as srv:
        admin = await srv.add_key("alice", "admin")
        async with srv.client(admin) as c:
            answers = {
                "openapi": await c.get("/v1/openapi.json"),
                "metrics": await c.get("/metrics"),
                "keys": await c.get("/v1/keys"),
                "new key": await c.post("/v1/keys", json={"scope": "read"}),
                "export": await c.get("/v1/export"),
                "mcp": await c.post("/mcp", json=PING, headers=MCP_HEADERS),
                "mcp refused by the SDK": await c.post("/mcp", json=PING, headers={"Accept": "text/html"}),
                "mcp delete": await c.delete("/mcp"),
            }
    statuses = {name: r.status_code for name, r in answers.items()}
    assert statuses == {
        "openapi": 200,
        "metrics": 200,
        "keys": 200,
        "new key": 201,
        "export": 200,
        "mcp": 200,
        "mcp refused by the SDK": 406,
        "mcp delete": 405,
    }
    remaining = [_rate(r)[1] for r in answers.values()]
    assert remaining == list(range(99, 99 - len(answers), -1)), remaining  # one token each, in order


async def test_a_server_without_a_rate_limit_sends_no_rate_headers(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=Limits(rate_per_s=0)) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            r = await c.get("/v1/stats")
    assert r.status_code == 200 and "x-ratelimit-limit" not in r.headers


async def test_browsers_may_read_the_rate_headers_of_an_allowed_origin(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=RATE, cors_origins=("https://app.example",)) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            r = await c.get("/v1/stats", headers={"Origin": "https://app.example"})
    exposed = {h.strip().lower() for h in r.headers["access-control-expose-headers"].split(",")}
    assert {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"} <= exposed
