"""Keys, scopes, rate limits and registration, through a real server."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from service.errors import BadRequest
from service.keys import SqliteKeyStore
from service.settings import Limits
from tests.service.conftest import Server, running_service, transcript_bytes
from tests.soak import database_text

ROUTES = [
    ("GET", "/v1/get"),
    ("GET", "/v1/search?q=x"),
    ("GET", "/v1/sessions/s1"),
    ("DELETE", "/v1/sessions/s1"),
    ("GET", "/v1/handoffs"),
    ("POST", "/v1/handoffs"),
    ("POST", "/v1/transcripts?name=a.jsonl"),
    ("POST", "/v1/script"),
    ("GET", "/v1/export"),
    ("GET", "/v1/stats"),
    ("GET", "/metrics"),
    ("GET", "/v1/openapi.json"),
    ("POST", "/mcp"),
    ("GET", "/v1/keys"),
    ("POST", "/v1/keys"),
    ("DELETE", "/v1/keys/k1"),
    ("GET", "/v1/webhooks"),
    ("POST", "/v1/webhooks"),
    ("DELETE", "/v1/webhooks/w1"),
    ("GET", "/v1/webhooks/w1/deliveries"),
]


async def test_every_route_but_healthz_refuses_a_missing_unknown_or_malformed_key(service: Server) -> None:
    alice = service.keys["alice"]
    forged = alice[:-4] + ("AAAA" if not alice.endswith("AAAA") else "BBBB")  # right id, wrong secret
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as c:
        assert (await c.get("/healthz")).status_code == 200
        for method, path in ROUTES:
            for headers in (
                {},
                {"X-API-Key": ""},
                {"X-API-Key": "mpk_000000000000_" + "A" * 43},
                {"X-API-Key": forged},
                {"X-API-Key": "not a key"},
                {"Authorization": f"Basic {alice}"},
                {"Authorization": "Bearer"},
            ):
                r = await c.request(method, path, headers=headers, content=b"{}")
                assert r.status_code == 401, (method, path, headers)
                assert r.json()["error"]["code"] == "unauthorized"
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert alice not in r.text


async def test_a_key_works_as_x_api_key_or_bearer(service: Server) -> None:
    async with httpx.AsyncClient(base_url=service.url, timeout=30) as c:
        for headers in ({"X-API-Key": service.keys["alice"]}, {"Authorization": f"Bearer {service.keys['alice']}"}):
            assert (await c.get("/v1/stats", headers=headers)).json()["tenant"] == "alice"


async def test_a_revoked_key_is_refused_from_its_next_request(service: Server) -> None:
    key = service.keys["bob"]
    async with service.client(key) as c:
        assert (await c.get("/v1/stats")).status_code == 200
        store = await SqliteKeyStore.open(service.home / "service.db")
        try:
            (record,) = [r for r in await store.list_keys("bob")]
            assert (await store.revoke(record.key_id)) is not None
        finally:
            await store.close()
        r = await c.get("/v1/stats")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


async def test_scopes_read_write_admin(service: Server) -> None:
    reader, writer, admin = service.keys["alice:read"], service.keys["alice"], service.keys["alice:admin"]
    async with service.client(reader) as c:
        assert (await c.get("/v1/get")).status_code == 200
        assert (await c.get("/v1/export")).status_code == 200
        for method, path in [
            ("POST", "/v1/transcripts?name=a.jsonl"),
            ("POST", "/v1/script"),
            ("POST", "/v1/handoffs"),
        ]:
            r = await c.request(method, path, content=b"x")
            assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", path
        assert (await c.delete("/v1/sessions/x")).status_code == 403
        assert (await c.get("/metrics")).status_code == 403
    async with service.client(writer) as c:
        assert (await c.get("/metrics")).status_code == 403
    async with service.client(admin) as c:
        r = await c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")


async def test_metrics_count_requests_latency_and_errors_by_route_template(service: Server) -> None:
    async with service.client(service.keys["alice"]) as c:
        await c.post("/v1/transcripts", params={"name": "s1.jsonl"}, content=transcript_bytes("s1", "zebra"))
        await c.get("/v1/sessions/s1")
        await c.get("/v1/sessions/no-such-session")
    async with service.client(None) as c:
        await c.get("/v1/get")
    async with service.client(service.keys["alice:admin"]) as c:
        text = (await c.get("/metrics")).text
    assert 'macupos_http_requests_total{route="/v1/sessions/{id}",method="GET",status="200"} 1' in text
    assert 'macupos_http_requests_total{route="/v1/sessions/{id}",method="GET",status="404"} 1' in text
    assert 'macupos_http_errors_total{route="/v1/get",code="unauthorized"} 1' in text
    assert 'macupos_http_errors_total{route="/v1/sessions/{id}",code="not_found"} 1' in text
    assert 'macupos_http_request_duration_seconds_bucket{route="/v1/transcripts",method="POST",le="+Inf"} 1' in text
    assert "# TYPE macupos_http_request_duration_seconds histogram" in text
    assert "macupos_tenants_open 1" in text
    assert "no-such-session" not in text and "zebra" not in text


async def test_a_key_over_its_rate_gets_429_with_retry_after(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=Limits(rate_per_s=0.5, rate_burst=3)) as srv:
        key = await srv.add_key("alice")
        other = await srv.add_key("bob")
        async with srv.client(key) as c:
            codes = [(await c.get("/v1/handoffs")).status_code for _ in range(4)]
            limited = await c.get("/v1/handoffs")
        async with srv.client(other) as c:
            assert (await c.get("/v1/handoffs")).status_code == 200  # each key has its own bucket
    assert codes[:3] == [200, 200, 200] and codes[3] == 429
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"]["code"] == "rate_limited"


async def test_registration_is_off_unless_allowed(service: Server) -> None:
    async with service.client(None) as c:
        r = await c.post("/v1/register", json={"tenant": "mallory"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_registration_gives_a_new_tenant_a_working_key_and_is_rate_limited(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, register_per_hour=3)
    async with running_service(tmp_path / "home", allow_register=True, limits=limits) as srv:
        async with srv.client(None) as c:
            named = await c.post("/v1/register", json={"tenant": "carol"})
            taken = await c.post("/v1/register", json={"tenant": "carol"})
            unnamed = await c.post("/v1/register")
            limited = await c.post("/v1/register", json={"tenant": "dave"})
            bad = [await c.post("/v1/register", json={"tenant": n}) for n in ("../x", "Carol", "a" * 64)]
        assert named.status_code == 201, named.text
        body = named.json()
        assert body["tenant"] == "carol" and body["scope"] == "write" and body["api_key"].startswith("mpk_")
        assert named.headers["cache-control"] == "no-store"
        assert taken.status_code == 409
        assert unnamed.status_code == 201 and unnamed.json()["tenant"].startswith("t-")
        assert limited.status_code == 429
        assert all(r.status_code in (400, 429) for r in bad)
        async with srv.client(body["api_key"]) as c:
            assert (await c.get("/v1/stats")).json()["tenant"] == "carol"
        stored = database_text(srv.home / "service.db")  # through SQLite: this process holds the file open
        assert body["api_key"] not in stored and body["key_id"] in stored


async def test_tenant_names_cannot_leave_the_tenants_folder(tmp_path: Path) -> None:
    store = await SqliteKeyStore.open(tmp_path / "service.db")
    try:
        for name in ("../evil", "a/b", ".hidden", "", "UPPER", "x" * 64, "nul\x00"):
            with pytest.raises(BadRequest, match="tenant name"):
                await store.create_key(name, "write")
        assert await store.tenants() == []
    finally:
        await store.close()


async def test_cors_is_off_unless_origins_are_named(tmp_path: Path) -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "x-api-key",
    }
    async with running_service(tmp_path / "off") as srv, srv.client(await srv.add_key("alice")) as c:
        off = await c.options("/v1/get", headers=preflight)
        simple = await c.get("/v1/stats", headers={"Origin": "https://app.example"})
    assert "access-control-allow-origin" not in off.headers
    assert "access-control-allow-origin" not in simple.headers
    async with (
        running_service(tmp_path / "on", cors_origins=("https://app.example",)) as srv,
        srv.client(await srv.add_key("alice")) as c,
    ):
        on = await c.options("/v1/get", headers=preflight)
        other = await c.options("/v1/get", headers=preflight | {"Origin": "https://evil.example"})
    assert on.status_code == 200 and on.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers
