"""`/v1/keys`: an admin key issues, lists and revokes its own tenant's keys over a real server; other keys, other
tenants and malformed bodies are refused."""

from __future__ import annotations

import re

import pytest

from service.keys import KEY_RE
from tests.service.conftest import Server

KEY_FIELDS = {"id", "scope", "tenant", "label", "created_at", "revoked_at"}


async def test_an_admin_key_issues_a_key_that_works_once_shown(service: Server) -> None:
    async with service.client(service.keys["alice:admin"]) as c:
        made = await c.post("/v1/keys", json={"scope": "read", "label": "ci reader"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert set(body) == {"id", "key", "scope", "tenant", "label", "created_at"}
    assert KEY_RE.fullmatch(body["key"]) and body["key"].startswith(f"mpk_{body['id']}_")
    assert (body["scope"], body["tenant"], body["label"]) == ("read", "alice", "ci reader")
    assert isinstance(body["created_at"], float)
    assert made.headers["cache-control"] == "no-store"
    async with service.client(body["key"]) as c:
        assert (await c.get("/v1/stats")).json()["tenant"] == "alice"
        assert (await c.delete("/v1/sessions/x")).status_code == 403  # read: no more
    async with service.client(service.keys["alice:admin"]) as c:
        writer = (await c.post("/v1/keys", json={"scope": "write"})).json()
    assert writer["label"] == ""
    async with service.client(writer["key"]) as c:
        assert (await c.delete("/v1/sessions/x")).status_code == 404  # write: allowed, and no such session
        assert (await c.get("/metrics")).status_code == 403  # but not admin


async def test_the_list_shows_the_tenants_keys_and_never_a_secret(service: Server) -> None:
    async with service.client(service.keys["alice:admin"]) as c:
        made = (await c.post("/v1/keys", json={"scope": "write", "label": "laptop"})).json()
        listed = await c.get("/v1/keys")
    assert listed.status_code == 200
    keys = listed.json()["keys"]
    assert all(set(k) == KEY_FIELDS for k in keys)
    assert {k["tenant"] for k in keys} == {"alice"}  # bob's key is not shown
    assert len(keys) == 4  # the fixture's write, read and admin keys, and the new one
    assert [k for k in keys if k["id"] == made["id"]] == [
        {k: made[k] for k in ("id", "scope", "tenant", "label", "created_at")} | {"revoked_at": None}
    ]
    assert sorted(k["scope"] for k in keys) == ["admin", "read", "write", "write"]
    assert not re.search(r"mpk_[0-9a-f]{12}_", listed.text)
    assert listed.headers["cache-control"] == "no-store"


async def test_a_revoked_key_is_refused_from_its_next_request_and_revoking_again_is_fine(service: Server) -> None:
    async with service.client(service.keys["alice:admin"]) as admin:
        made = (await admin.post("/v1/keys", json={"scope": "read"})).json()
        async with service.client(made["key"]) as c:
            assert (await c.get("/v1/stats")).status_code == 200
            gone = await admin.delete(f"/v1/keys/{made['id']}")
            assert gone.status_code == 204 and gone.content == b""
            refused = await c.get("/v1/stats")
        again = await admin.delete(f"/v1/keys/{made['id']}")
        listed = {k["id"]: k for k in (await admin.get("/v1/keys")).json()["keys"]}
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert again.status_code == 204
    assert listed[made["id"]]["revoked_at"] >= listed[made["id"]]["created_at"]


async def test_another_tenants_key_or_an_unknown_id_is_not_found_and_stays_live(service: Server) -> None:
    async with service.client(service.keys["bob"]) as c:
        assert (await c.get("/v1/stats")).status_code == 200
    bobs_id = service.keys["bob"][4:16]
    async with service.client(service.keys["alice:admin"]) as c:
        answers = [await c.delete(f"/v1/keys/{i}") for i in (bobs_id, "000000000000", "not-a-key-id")]
    assert [r.status_code for r in answers] == [404, 404, 404]
    assert {r.json()["error"]["code"] for r in answers} == {"not_found"}
    assert all("bob" not in r.text for r in answers)
    async with service.client(service.keys["bob"]) as c:
        assert (await c.get("/v1/stats")).status_code == 200


async def test_an_admin_may_revoke_its_own_key(service: Server) -> None:
    admin = service.keys["alice:admin"]
    async with service.client(admin) as c:
        assert (await c.delete(f"/v1/keys/{admin[4:16]}")).status_code == 204
        assert (await c.get("/v1/keys")).status_code == 401


@pytest.mark.parametrize("who", ["alice", "alice:read"])
async def test_only_admin_keys_reach_the_keys_api(service: Server, who: str) -> None:
    target = service.keys["alice:read"][4:16]
    async with service.client(service.keys[who]) as c:
        answers = [
            await c.post("/v1/keys", json={"scope": "read"}),
            await c.get("/v1/keys"),
            await c.delete(f"/v1/keys/{target}"),
        ]
    assert [r.status_code for r in answers] == [403, 403, 403]
    async with service.client(service.keys["alice:read"]) as c:
        assert (await c.get("/v1/stats")).status_code == 200  # not revoked
    async with service.client(None) as c:
        assert (await c.get("/v1/keys")).status_code == 401


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b'{"scope": "admin"}', "scope"),  # an admin key cannot mint another
        (b"{}", "scope"),
        (b'{"scope": "owner"}', "scope"),
        (b'{"scope": "read", "label": 7}', "label"),
        (b'{"scope": "read", "label": "a\\nforged row"}', "label"),
        (b'{"scope": "read", "label": "' + b"x" * 201 + b'"}', "label"),
        (b"not json", "JSON"),
        (b'["read"]', "object"),
    ],
)
async def test_a_bad_body_is_refused_naming_what_is_wrong(service: Server, body: bytes, names: str) -> None:
    async with service.client(service.keys["alice:admin"]) as c:
        r = await c.post("/v1/keys", content=body, headers={"Content-Type": "application/json"})
        count = len((await c.get("/v1/keys")).json()["keys"])
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    assert names in r.json()["error"]["message"]
    assert count == 3  # nothing was made


async def test_a_body_past_its_cap_is_refused(service: Server) -> None:
    async with service.client(service.keys["alice:admin"]) as c:
        r = await c.post("/v1/keys", content=b'{"scope": "read", "label": "' + b"x" * 8000 + b'"}')
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
