"""Tenants' webhooks through a real server and real receivers on 127.0.0.1: each event arrives once, signed
(the test checks the HMAC itself), a receiver that fails is retried with backoff until it answers, a delivery
pending at shutdown goes after the restart, deletion stops deliveries, tenants never see each other's
webhooks, and an address that is not allowed is refused. The retry schedule is the settings', made fast."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.settings import WebhookSettings
from tests.service.conftest import Server, running_service, serving, transcript_bytes
from tests.service.test_routes import HANDOFF as IMPORTED_HANDOFF

FAST = WebhookSettings(backoff_s=0.05, backoff_max_s=0.2, poll_s=0.2, timeout_s=5)
WAIT_S = 30.0
HANDOFF = IMPORTED_HANDOFF.replace("session_id: imported-1", "session_id: uploaded-1")  # test_routes' handoff


@dataclass(frozen=True, slots=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value


@dataclass(slots=True)
class Receiver:
    """An HTTP receiver: answers 500 to its first ``fail_first`` requests, then 204."""

    fail_first: int = 0
    url: str = ""
    calls: list[Received] = field(default_factory=list)  # every request, answered or failed
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def delivered(self) -> list[Received]:
        return self.calls[self.fail_first :]

    async def handle(self, request: Request) -> Response:
        got = Received({k.lower(): v for k, v in request.headers.items()}, await request.body())
        async with self.changed:
            self.calls.append(got)
            self.changed.notify_all()
        return Response(status_code=500 if len(self.calls) <= self.fail_first else 204)

    async def until(self, done: Callable[[Receiver], bool]) -> None:
        async with asyncio.timeout(WAIT_S), self.changed:
            await self.changed.wait_for(lambda: done(self))


@asynccontextmanager
async def receiving(fail_first: int = 0) -> AsyncIterator[Receiver]:
    receiver = Receiver(fail_first)
    app = Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])
    async with serving(app) as url:
        receiver.url = f"{url}/hook"
        yield receiver


def signed_by(secret: str, got: Received) -> bool:
    """The check a receiver makes: HMAC-SHA256 of the raw body under the secret, compared in constant time."""
    want = "sha256=" + hmac.new(secret.encode(), got.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, got.headers["x-macupos-signature-256"])


async def register(srv: Server, key: str, url: str, events: list[str]) -> dict[str, Any]:
    async with srv.client(key) as c:
        r = await c.post("/v1/webhooks", json={"url": url, "events": events})
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    return made


async def deliveries(srv: Server, key: str, webhook_id: str) -> list[dict[str, Any]]:
    async with srv.client(key) as c:
        r = await c.get(f"/v1/webhooks/{webhook_id}/deliveries")
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["deliveries"]
    return found


async def settled(srv: Server, key: str, webhook_id: str, n: int) -> list[dict[str, Any]]:
    """The log once it holds ``n`` deliveries and none is pending (bounded)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            log = await deliveries(srv, key, webhook_id)
            if len(log) >= n and all(d["status"] != "pending" for d in log):
                return log
            await asyncio.sleep(0.05)  # polling the server's log; bounded by the timeout above


async def upload(srv: Server, key: str, session_id: str) -> dict[str, Any]:
    async with srv.client(key) as c:
        r = await c.post(
            "/v1/transcripts", params={"name": f"{session_id}.jsonl"}, content=transcript_bytes(session_id, "zeppelin")
        )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_each_event_arrives_once_with_a_valid_signature(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with receiving() as rx, running_service(tmp_path / "home", webhooks=FAST) as srv:
        key = await srv.add_key("alice")
        made = await register(srv, key, rx.url, ["session.ingested", "handoff.ready", "session.forgotten"])
        assert set(made) == {"id", "secret", "url", "events", "created_at"} and made["secret"].startswith("whsec_")
        report = await upload(srv, key, "sess-w1")
        assert report["sessions"] == ["sess-w1"] and report["handoffs_extracted"] == 1
        async with srv.client(key) as c:
            assert (await c.post("/v1/handoffs", content=HANDOFF.encode())).status_code == 200
            assert (await c.delete("/v1/sessions/sess-w1")).json()["forgotten"] == ["sess-w1"]
            again = await c.post(
                "/v1/transcripts", params={"name": "sess-w2.jsonl"}, content=transcript_bytes("sess-w2", "x")
            )
            assert again.status_code == 200
            unchanged = await c.post(
                "/v1/transcripts", params={"name": "sess-w2.jsonl"}, content=transcript_bytes("sess-w2", "x")
            )
            assert unchanged.json()["counts"]["unchanged"] == 1  # sent again unchanged: no new event
        log = await settled(srv, key, made["id"], 6)
        async with srv.client(key) as c:
            listed = (await c.get("/v1/webhooks")).json()["webhooks"]
    assert listed == [{k: made[k] for k in ("id", "url", "events", "created_at")}]  # never the secret again
    seen = [(g.json["event"], g.json["data"].get("via", g.json["data"].get("change"))) for g in rx.calls]
    assert sorted(seen) == sorted(
        [
            ("session.ingested", "new"),
            ("handoff.ready", "ingest"),
            ("handoff.ready", "upload"),
            ("session.forgotten", None),
            ("session.ingested", "new"),
            ("handoff.ready", "ingest"),
        ]
    )
    ids = [g.headers["x-macupos-delivery"] for g in rx.calls]
    assert len(set(ids)) == len(ids) == 6  # each once
    for got in rx.calls:
        assert signed_by(made["secret"], got)
        assert not signed_by(made["secret"] + "x", got)
        body = got.json
        assert body["id"] == got.headers["x-macupos-delivery"] and body["event"] == got.headers["x-macupos-event"]
        assert body["tenant"] == "alice" and got.headers["content-type"] == "application/json"
    forgotten = next(g.json["data"] for g in rx.calls if g.json["event"] == "session.forgotten")
    assert forgotten == {"session_id": "sess-w1", "forgotten": ["sess-w1"]}
    uploaded = next(g.json["data"] for g in rx.calls if g.json["data"].get("via") == "upload")
    assert uploaded["session_id"] == "uploaded-1" and uploaded["headline"] == "Chose PostgreSQL for the ledger"
    assert sorted(d["id"] for d in log) == sorted(ids)
    assert all(d["status"] == "delivered" and d["attempts"] == 1 and d["last_status"] == 204 for d in log)
    assert made["secret"] not in caplog.text


async def test_a_receiver_that_fails_three_times_still_gets_it_later(tmp_path: Path) -> None:
    async with receiving(fail_first=3) as rx, running_service(tmp_path / "home", webhooks=FAST) as srv:
        key = await srv.add_key("alice")
        made = await register(srv, key, rx.url, ["session.ingested"])
        await upload(srv, key, "sess-r1")
        await rx.until(lambda r: len(r.delivered) == 1)
        log = await settled(srv, key, made["id"], 1)
    assert len(rx.calls) == 4
    assert len({g.headers["x-macupos-delivery"] for g in rx.calls}) == 1  # the same delivery, tried again
    assert len({g.body for g in rx.calls}) == 1 and all(signed_by(made["secret"], g) for g in rx.calls)
    [entry] = log
    assert entry["status"] == "delivered" and entry["attempts"] == 4 and entry["last_status"] == 204
    assert entry["delivered_at"] >= entry["created_at"]


async def test_a_delivery_whose_tries_are_spent_is_marked_failed(tmp_path: Path) -> None:
    few = WebhookSettings(backoff_s=0.02, backoff_max_s=0.05, poll_s=0.2, timeout_s=5, attempts=3)
    async with receiving(fail_first=1000) as rx, running_service(tmp_path / "home", webhooks=few) as srv:
        key = await srv.add_key("alice")
        made = await register(srv, key, rx.url, ["session.ingested"])
        await upload(srv, key, "sess-f1")
        [entry] = await settled(srv, key, made["id"], 1)
    assert entry["status"] == "failed" and entry["attempts"] == 3 and entry["last_status"] == 500
    assert entry["last_error"] == "the receiver answered 500" and entry["delivered_at"] is None
    assert len(rx.calls) == 3


async def test_a_delivery_pending_at_shutdown_is_sent_after_the_restart(tmp_path: Path) -> None:
    patient = WebhookSettings(backoff_s=0.05, backoff_max_s=0.1, poll_s=0.2, timeout_s=5, attempts=1000)
    home = tmp_path / "home"
    async with receiving(fail_first=1_000_000) as rx:
        async with running_service(home, webhooks=patient) as srv:
            key = await srv.add_key("alice")
            made = await register(srv, key, rx.url, ["session.ingested"])
            await upload(srv, key, "sess-p1")
            await rx.until(lambda r: len(r.calls) >= 2)
        tried = len(rx.calls)
        rx.fail_first = tried  # the receiver is back: it answers from now on
        async with running_service(home, webhooks=patient) as srv:
            await rx.until(lambda r: len(r.calls) > tried)
            [entry] = await settled(srv, key, made["id"], 1)
    assert entry["status"] == "delivered" and entry["attempts"] >= 3
    assert len({g.headers["x-macupos-delivery"] for g in rx.calls}) == 1


async def test_deleting_a_webhook_stops_its_deliveries(tmp_path: Path) -> None:
    async with (
        receiving(fail_first=1_000_000) as failing,
        receiving() as control,
        running_service(tmp_path / "home", webhooks=FAST) as srv,
    ):
        key = await srv.add_key("alice")
        doomed = await register(srv, key, failing.url, ["session.ingested", "session.forgotten"])
        kept = await register(srv, key, control.url, ["session.ingested", "session.forgotten"])
        await upload(srv, key, "sess-d1")
        await failing.until(lambda r: len(r.calls) >= 2)  # being retried
        async with srv.client(key) as c:
            assert (await c.delete(f"/v1/webhooks/{doomed['id']}")).status_code == 204
            assert (await c.delete(f"/v1/webhooks/{doomed['id']}")).status_code == 404
            assert (await c.get(f"/v1/webhooks/{doomed['id']}/deliveries")).status_code == 404
            assert [h["id"] for h in (await c.get("/v1/webhooks")).json()["webhooks"]] == [kept["id"]]
            at_delete = len(failing.calls)
            assert (await c.delete("/v1/sessions/sess-d1")).status_code == 200
        await control.until(lambda r: any(g.json["event"] == "session.forgotten" for g in r.calls))
        await settled(srv, key, kept["id"], 2)
    assert all(g.json["event"] == "session.ingested" for g in failing.calls)  # nothing made after the delete
    assert len(failing.calls) <= at_delete + 1  # at most the one try in flight when it was deleted


async def test_another_tenants_webhooks_are_invisible_and_get_none_of_its_events(tmp_path: Path) -> None:
    async with receiving() as rx, running_service(tmp_path / "home", webhooks=FAST) as srv:
        alice = await srv.add_key("alice")
        bob = await srv.add_key("bob")
        made = await register(srv, alice, rx.url, ["session.ingested"])
        async with srv.client(bob) as c:
            assert (await c.get("/v1/webhooks")).json() == {"webhooks": []}
            assert (await c.get(f"/v1/webhooks/{made['id']}/deliveries")).status_code == 404
            assert (await c.delete(f"/v1/webhooks/{made['id']}")).status_code == 404
        await upload(srv, bob, "sess-b1")  # bob's event: written (or not) before this answer came
        assert await deliveries(srv, alice, made["id"]) == []
        async with srv.client(alice) as c:
            assert len((await c.get("/v1/webhooks")).json()["webhooks"]) == 1
    assert rx.calls == []


async def test_an_address_or_event_that_is_not_allowed_is_refused(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", webhooks=FAST) as srv:
        key = await srv.add_key("alice")
        read = await srv.add_key("alice", "read")
        refused = [
            {"url": "http://example.com/hook", "events": ["handoff.ready"]},  # plain http off this machine
            {"url": "ftp://127.0.0.1/hook", "events": ["handoff.ready"]},
            {"url": "https://user:pw@example.com/hook", "events": ["handoff.ready"]},
            {"url": "https:///nohost", "events": ["handoff.ready"]},
            {"url": "https://example.com/a b", "events": ["handoff.ready"]},
            {"url": "https://example.com:99999/", "events": ["handoff.ready"]},
            {"url": "https://example.com/#frag", "events": ["handoff.ready"]},
            {"url": 7, "events": ["handoff.ready"]},
            {"url": "https://example.com/hook", "events": []},
            {"url": "https://example.com/hook", "events": ["session.everything"]},
            {"url": "https://example.com/hook"},
        ]
        async with srv.client(key) as c:
            for body in refused:
                r = await c.post("/v1/webhooks", json=body)
                assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", body
            for url in (
                "https://example.com/hook",
                "http://127.0.0.1:9/hook",
                "http://localhost:9/x",
                "http://[::1]:9/",
            ):
                assert (await c.post("/v1/webhooks", json={"url": url, "events": ["handoff.ready"]})).status_code == 201
            assert (await c.get("/v1/webhooks")).json()["webhooks"][0]["events"] == ["handoff.ready"]
        async with srv.client(read) as c:
            assert (await c.get("/v1/webhooks")).status_code == 200
            r = await c.post("/v1/webhooks", json={"url": "https://example.com/hook", "events": ["handoff.ready"]})
            assert r.status_code == 403


async def test_plain_http_anywhere_is_a_setting(tmp_path: Path) -> None:
    loose = WebhookSettings(allow_http=True)
    async with running_service(tmp_path / "home", webhooks=loose) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            r = await c.post("/v1/webhooks", json={"url": "http://example.com/hook", "events": ["handoff.ready"]})
    assert r.status_code == 201
