"""Webhooks on PostgreSQL: the same API and deliverer over ``macupos.webhooks`` and its delivery log; two
servers of one database deliver each event once between them (claims pass each other by), a receiver that
fails is retried, and tenants never see each other's webhooks."""

from __future__ import annotations

from pathlib import Path

from service.settings import WebhookSettings
from tests.service.pg.conftest import running_pg_service
from tests.service.test_webhooks import deliveries, receiving, register, settled, signed_by, upload

FAST = WebhookSettings(backoff_s=0.05, backoff_max_s=0.2, poll_s=0.1, timeout_s=5)


async def test_two_servers_of_one_database_deliver_each_event_once(tmp_path: Path, pg_url: str) -> None:
    async with (
        receiving(fail_first=2) as rx,
        running_pg_service(tmp_path / "one", pg_url, webhooks=FAST) as one,
        running_pg_service(tmp_path / "two", pg_url, webhooks=FAST) as two,
    ):
        key = await one.add_key("alice")
        made = await register(two, key, rx.url, ["session.ingested", "session.forgotten"])
        await upload(one, key, "sess-pg-1")
        async with two.client(key) as c:
            assert (await c.delete("/v1/sessions/sess-pg-1")).status_code == 200
        log = await settled(one, key, made["id"], 2)
        assert await deliveries(two, key, made["id"]) == log
        bob = await one.add_key("bob")
        async with one.client(bob) as c:
            assert (await c.get("/v1/webhooks")).json() == {"webhooks": []}
            assert (await c.get(f"/v1/webhooks/{made['id']}/deliveries")).status_code == 404
            assert (await c.delete(f"/v1/webhooks/{made['id']}")).status_code == 404
    assert sorted(g.json["event"] for g in rx.delivered) == ["session.forgotten", "session.ingested"]
    assert len(rx.calls) == 4 and all(signed_by(made["secret"], g) for g in rx.calls)
    assert sum(d["attempts"] for d in log) == 4 and all(d["status"] == "delivered" for d in log)
