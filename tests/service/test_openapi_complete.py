"""`/v1/openapi.json` is a valid OpenAPI 3.1 document that names exactly the routes the app serves, and every
status a route answers in practice (a real server, real requests) is among those it documents."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_schema_validator import validate as validate_instance
from openapi_spec_validator import validate
from starlette.routing import Route

from service.app import build_app, embedded_store
from service.openapi import openapi_document
from service.settings import Limits, ServiceSettings
from service.tenants import Scope, TenantStore
from service.web.settings import WebSettings
from tests.service.conftest import Server, memory_settings, running_service, transcript_bytes

METHODS = {"get", "post", "put", "patch", "delete"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def _document(srv: Server) -> dict[str, Any]:
    async with srv.client(srv.keys["alice:read"]) as c:
        r = await c.get("/v1/openapi.json")
    assert r.status_code == 200
    doc: dict[str, Any] = r.json()
    return doc


def _served(home: Path) -> set[tuple[str, str]]:
    """(method, OpenAPI path) of every route the API app serves: converters dropped, HEAD (Starlette's own
    answer to each GET) left out."""
    settings = ServiceSettings(home=home, web=WebSettings(enabled=False))

    async def never() -> TenantStore:  # the app is built, not started: no store is opened
        raise AssertionError("not started")

    app = build_app(settings, never)
    served = set()
    for route in app.routes:
        assert isinstance(route, Route), route
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        served |= {(m.lower(), path) for m in route.methods or () if m != "HEAD"}
    return served


def _documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m, path) for path, item in doc["paths"].items() for m in item if m in METHODS}


async def test_the_document_is_valid_openapi_3_1(service: Server) -> None:
    doc = await _document(service)
    assert doc["openapi"] == "3.1.0"
    validate(doc)  # raises naming the first fault


def test_every_served_route_is_documented_and_nothing_else(tmp_path: Path) -> None:
    served = _served(tmp_path / "home")
    documented = _documented(openapi_document(ServiceSettings(home=tmp_path / "home")))
    if not any(path.startswith("/v1/webhooks") for _, path in served):
        # The webhooks API is documented as agreed (issue 33) while its routes are being written: until the app
        # serves them, the document is held to the rest of the app.
        documented = {(m, p) for m, p in documented if not p.startswith("/v1/webhooks")}
    assert served - documented == set(), "served but not documented"
    assert documented - served == set(), "documented but not served"
    assert ("post", "/v1/keys") in served and ("delete", "/v1/keys/{id}") in served


def test_the_pages_alone_serve_no_api_to_document(tmp_path: Path) -> None:
    settings = ServiceSettings(home=tmp_path / "home", web=WebSettings(local=True))
    app = build_app(settings, embedded_store(settings, memory_settings(tmp_path / "home")))
    api = [r for r in app.routes if isinstance(r, Route) and (r.path.startswith("/v1/") or r.path == "/mcp")]
    assert api == []


def test_every_keyed_operation_documents_its_auth_errors_and_rate_headers(tmp_path: Path) -> None:
    doc = openapi_document(ServiceSettings(home=tmp_path))
    assert set(doc["components"]["securitySchemes"]) == {"apiKey", "bearer"}
    assert doc["security"] == [{"apiKey": []}, {"bearer": []}]
    rate = {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            responses = op["responses"]
            assert op["operationId"] and op["summary"], where
            if op.get("security") == []:  # no key: no rate headers either
                assert path in {"/healthz", "/v1/register"}, where
                assert all(rate.isdisjoint(r.get("headers", {})) for r in responses.values()), where
                continue
            assert op["x-macupos-scope"] in {"read", "write", "admin"}, where
            assert {"401", "429", "500", "503"} <= set(responses), where
            assert ("403" in responses) == (op["x-macupos-scope"] != "read"), where
            assert "Retry-After" in responses["429"]["headers"], where
            assert "WWW-Authenticate" in responses["401"]["headers"], where
            assert rate.isdisjoint(responses["401"].get("headers", {})), where  # no key known: no bucket
            for status, response in responses.items():
                if status != "401":
                    assert rate <= set(response.get("headers", {})), (where, status)


def test_webhook_deliveries_are_documented_with_their_signature(tmp_path: Path) -> None:
    doc = openapi_document(ServiceSettings(home=tmp_path))
    assert set(doc["webhooks"]) == {"handoff.ready", "session.ingested", "session.forgotten"}
    for event, item in doc["webhooks"].items():
        post = item["post"]
        headers = {p["name"]: p for p in post["parameters"] if p["in"] == "header"}
        assert set(headers) == {"X-Macupos-Event", "X-Macupos-Delivery", "X-Macupos-Signature-256"}
        assert all(p["required"] for p in headers.values())
        assert headers["X-Macupos-Signature-256"]["schema"]["pattern"] == "^sha256=[0-9a-f]{64}$"
        body = post["requestBody"]["content"]["application/json"]["schema"]["allOf"]
        assert body[0] == {"$ref": "#/components/schemas/WebhookEvent"}
        assert body[1]["properties"]["event"]["const"] == event
    envelope = doc["components"]["schemas"]["WebhookEvent"]
    assert set(envelope["required"]) == {"id", "event", "created_at", "tenant", "data"}


# -- what the server answers in practice is what the document says it may ------------------------------------

BIG = b"x" * (2 * 1024 * 1024)
RECEIVER = "http://127.0.0.1:9/hook"  # registered, never called: no event happens in this test


def _resolved(node: Any, doc: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` into the document replaced by what it names (the schemas have no cycles)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return _resolved(target, doc)
        return {k: _resolved(v, doc) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolved(v, doc) for v in node]
    return node


def _requests(srv: Server) -> list[tuple[str, str, str, str | None, dict[str, Any]]]:
    """(method, documented path, sent path, key, httpx arguments): requests meant to draw each kind of answer."""
    alice, reader, admin = srv.keys["alice"], srv.keys["alice:read"], srv.keys["alice:admin"]
    br = {"content": b"x", "headers": {"Content-Encoding": "br"}}
    return [
        ("get", "/healthz", "/healthz", None, {}),
        ("get", "/v1/openapi.json", "/v1/openapi.json", None, {}),
        ("get", "/metrics", "/metrics", reader, {}),
        ("get", "/metrics", "/metrics", admin, {}),
        ("post", "/v1/register", "/v1/register", None, {"json": {}}),
        ("post", "/v1/transcripts", "/v1/transcripts?name=s1.jsonl", alice, {"content": transcript_bytes("s1", "z")}),
        ("post", "/v1/transcripts", "/v1/transcripts", alice, {"content": b"x"}),
        ("post", "/v1/transcripts", "/v1/transcripts?name=a.jsonl", alice, {"content": b"not json\n"}),
        ("post", "/v1/transcripts", "/v1/transcripts?name=a.jsonl", alice, br),
        ("post", "/v1/transcripts", "/v1/transcripts?name=a.jsonl", reader, {"content": b"x"}),
        ("post", "/v1/handoffs", "/v1/handoffs", alice, {"content": b"no front matter"}),
        ("post", "/v1/handoffs", "/v1/handoffs", alice, {"content": BIG}),
        ("get", "/v1/handoffs", "/v1/handoffs?limit=5", reader, {}),
        ("get", "/v1/handoffs", "/v1/handoffs?cursor=!!", reader, {}),
        ("get", "/v1/get", "/v1/get?q=z", reader, {}),
        ("get", "/v1/get", "/v1/get?max=9", reader, {}),
        ("get", "/v1/search", "/v1/search?q=z", reader, {}),
        ("get", "/v1/search", "/v1/search", reader, {}),
        ("get", "/v1/sessions/{id}", "/v1/sessions/s1", reader, {}),
        ("get", "/v1/sessions/{id}", "/v1/sessions/nope", reader, {}),
        ("get", "/v1/sessions/{id}", "/v1/sessions/s1?format=pdf", reader, {}),
        ("delete", "/v1/sessions/{id}", "/v1/sessions/nope", alice, {}),
        ("post", "/v1/script", "/v1/script", alice, {"json": {"script": "no_such_command"}}),
        ("post", "/v1/script", "/v1/script", alice, {"json": {"script": 3}}),
        (
            "post",
            "/v1/script",
            "/v1/script",
            alice,
            {"content": gzip.compress(b'{"script": "x"}')[:-4], "headers": {"Content-Encoding": "gzip"}},
        ),
        ("get", "/v1/export", "/v1/export", reader, {}),
        ("get", "/v1/stats", "/v1/stats", reader, {}),
        ("get", "/v1/facts/tier", "/v1/facts/tier", reader, {}),
        ("get", "/v1/facts/tier", "/v1/facts/tier?as_of=soon", reader, {}),
        ("post", "/v1/keys", "/v1/keys", admin, {"json": {"scope": "read"}}),
        ("post", "/v1/keys", "/v1/keys", admin, {"json": {"scope": "admin"}}),
        ("post", "/v1/keys", "/v1/keys", admin, br),
        ("post", "/v1/keys", "/v1/keys", admin, {"content": BIG}),
        ("get", "/v1/keys", "/v1/keys", admin, {}),
        ("get", "/v1/keys", "/v1/keys", alice, {}),
        ("delete", "/v1/keys/{id}", "/v1/keys/000000000000", admin, {}),
        ("post", "/v1/webhooks", "/v1/webhooks", alice, {"json": {"url": RECEIVER, "events": ["handoff.ready"]}}),
        ("post", "/v1/webhooks", "/v1/webhooks", alice, {"json": {"url": "ftp://x", "events": ["handoff.ready"]}}),
        ("get", "/v1/webhooks", "/v1/webhooks", reader, {}),
        ("delete", "/v1/webhooks/{id}", "/v1/webhooks/nope", alice, {}),
        ("get", "/v1/webhooks/{id}/deliveries", "/v1/webhooks/nope/deliveries", reader, {}),
        (
            "post",
            "/mcp",
            "/mcp",
            reader,
            {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}, "headers": MCP_HEADERS},
        ),
        ("post", "/mcp", "/mcp", reader, {"content": b"{", "headers": MCP_HEADERS}),
        (
            "post",
            "/mcp",
            "/mcp",
            reader,
            {"json": {"jsonrpc": "2.0", "method": "x"}, "headers": {"Accept": "text/html"}},
        ),
        ("post", "/mcp", "/mcp", reader, {"content": BIG * 3, "headers": MCP_HEADERS}),
        ("get", "/mcp", "/mcp", reader, {"headers": {"Accept": "application/json"}}),
        ("delete", "/mcp", "/mcp", reader, {}),
    ]


async def test_each_answered_status_is_one_the_document_names(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", limits=Limits(rate_burst=1000)) as srv:
        scopes: tuple[Scope, ...] = ("write", "read", "admin")
        for scope in scopes:
            await srv.add_key("alice", scope)
        doc = await _document(srv)
        seen: dict[tuple[str, str], set[int]] = {}
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as c:
            for method, path, sent, key, kwargs in _requests(srv):
                headers = {**({"X-API-Key": key} if key else {}), **kwargs.pop("headers", {})}
                r = await c.request(method.upper(), sent, headers=headers, **kwargs)
                documented = doc["paths"][path][method]["responses"]
                assert str(r.status_code) in documented, (method, sent, r.status_code, r.text[:200])
                seen.setdefault((method, path), set()).add(r.status_code)
                content = _resolved(documented[str(r.status_code)], doc).get("content", {})
                if r.headers.get("content-type", "").startswith("application/json") and "application/json" in content:
                    validate_instance(r.json(), content["application/json"]["schema"])  # the body is as documented
                if key is not None and str(r.status_code) != "401":
                    assert "x-ratelimit-remaining" in r.headers, (method, sent)
    every_error = {s for statuses in seen.values() for s in statuses if s >= 400}
    assert {400, 401, 403, 404, 405, 406, 413, 415, 422} <= every_error, every_error
    assert 201 in seen[("post", "/v1/webhooks")] and 201 in seen[("post", "/v1/keys")]


@pytest.mark.parametrize("path", ["/v1/get", "/v1/sessions/{id}", "/v1/transcripts"])
def test_the_documented_limits_follow_the_servers_settings(tmp_path: Path, path: str) -> None:
    small = openapi_document(ServiceSettings(home=tmp_path, limits=Limits(transcript_bytes=1234)))
    text = str(small["paths"][path])
    assert ("1234" in text) == (path == "/v1/transcripts")
