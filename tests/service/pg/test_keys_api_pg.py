"""`/v1/keys` on PostgreSQL (a fleet's key store): an admin key issues, lists and revokes its own tenant's keys,
another server of the fleet refuses a revoked key from its next request, and another tenant's key stays out
of reach."""

from __future__ import annotations

from pathlib import Path

from service.settings import Limits
from tests.service.pg.conftest import running_pg_service


async def test_keys_issued_and_revoked_over_http_hold_on_every_server_of_the_fleet(tmp_path: Path, pg_url: str) -> None:
    limits = Limits(rate_per_s=0.01, rate_burst=100)
    async with (
        running_pg_service(tmp_path / "one", pg_url, limits=limits) as one,
        running_pg_service(tmp_path / "two", pg_url, limits=limits) as two,
    ):
        admin = await one.add_key("alice", "admin")
        bob = await one.add_key("bob")
        async with one.client(admin) as c:
            made = await c.post("/v1/keys", json={"scope": "read", "label": "fleet reader"})
            assert made.status_code == 201, made.text
            new = made.json()
            assert (new["tenant"], new["scope"], new["label"]) == ("alice", "read", "fleet reader")
            assert int(made.headers["x-ratelimit-limit"]) == 100
            listed = (await c.get("/v1/keys")).json()["keys"]
            assert {k["id"] for k in listed} == {admin[4:16], new["id"]}
            assert (await c.delete(f"/v1/keys/{bob[4:16]}")).status_code == 404  # bob's: not this tenant's
        async with two.client(new["key"]) as reader:
            assert (await reader.get("/v1/stats")).json()["tenant"] == "alice"
            async with one.client(admin) as c:
                assert (await c.delete(f"/v1/keys/{new['id']}")).status_code == 204
                revoked = {k["id"]: k for k in (await c.get("/v1/keys")).json()["keys"]}[new["id"]]
            assert revoked["revoked_at"] is not None
            assert (await reader.get("/v1/stats")).status_code == 401  # the other server reads the same row
        async with two.client(bob) as c:
            assert (await c.get("/v1/stats")).status_code == 200
        async with two.client(admin) as c:
            refused = await c.post("/v1/keys", json={"scope": "admin"})
            assert refused.status_code == 400
