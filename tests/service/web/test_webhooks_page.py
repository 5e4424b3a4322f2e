"""The webhooks page over real HTTP: a tenant's webhooks with their recent deliveries (hostile text escaped,
never the secret), deleted after a confirm step with the session's CSRF token by a write login only, another
tenant's never shown nor deleted, and `serve --local` saying webhooks belong to `macupos serve`."""

from __future__ import annotations

from pathlib import Path

import httpx

from service.settings import WebhookSettings
from tests.service.conftest import running_service
from tests.service.test_webhooks import receiving, register, settled, upload
from tests.service.web.conftest import csrf_of, running_local
from tests.service.web.test_pages import assert_inert, key_login

FAST = WebhookSettings(backoff_s=0.05, backoff_max_s=0.2, poll_s=0.2, timeout_s=5)
HOSTILE_URL = "http://127.0.0.1:9/<script>window.__pwned=1</script>"  # never sent to: no event it wants


async def test_the_page_lists_webhooks_with_their_deliveries_and_a_write_login_deletes_one(tmp_path: Path) -> None:
    async with receiving() as rx, running_service(tmp_path / "home", webhooks=FAST) as srv:
        key = await srv.add_key("alice")
        made = await register(srv, key, rx.url, ["session.ingested"])
        hostile = await register(srv, key, HOSTILE_URL, ["session.forgotten"])
        await upload(srv, key, "sess-page-1")
        await settled(srv, key, made["id"], 1)
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            assert (await key_login(web, key)).status_code == 303
            page = await web.get("/webhooks")
            assert page.status_code == 200
            html = page.text
            assert_inert(html)
            assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html  # shown, as text
            assert rx.url in html and made["id"] in html and hostile["id"] in html
            assert made["secret"] not in html and hostile["secret"] not in html
            assert '<table class="cards deliveries">' in html and '<td data-label="status">delivered</td>' in html
            assert 'href="/webhooks" class="on" aria-current="page"' in html
            assert 'name="op" value="ask-delete"' in html and 'value="delete"' not in html  # Delete asks first
            asked = await web.post("/webhooks", data={"csrf": csrf_of(html), "op": "ask-delete", "id": made["id"]})
            assert asked.status_code == 200 and 'id="confirm-delete"' in asked.text and rx.url in asked.text
            assert f'href="/webhooks#webhook-{made["id"]}" id="cancel-delete"' in asked.text
            assert_inert(asked.text)
            async with srv.client(key) as c:  # asking deleted nothing
                assert len((await c.get("/v1/webhooks")).json()["webhooks"]) == 2
            gone = await web.post("/webhooks", data={"csrf": csrf_of(asked.text), "op": "delete", "id": made["id"]})
            assert gone.status_code == 303 and gone.headers["location"] == "/webhooks?done=deleted"
            after = (await web.get(gone.headers["location"])).text
            assert "Webhook deleted" in after and made["id"] not in after and hostile["id"] in after
            stale = await web.post("/webhooks", data={"op": "delete", "id": hostile["id"]})  # no CSRF token
            assert stale.status_code == 403
        async with srv.client(key) as c:
            assert [h["id"] for h in (await c.get("/v1/webhooks")).json()["webhooks"]] == [hostile["id"]]


async def test_a_read_login_cannot_delete_and_another_tenant_sees_none(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home", webhooks=FAST) as srv:
        alice = await srv.add_key("alice")
        made = await register(srv, alice, "https://example.com/hook", ["handoff.ready"])
        reader = await srv.add_key("alice", "read")
        bob = await srv.add_key("bob")
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            assert (await key_login(web, reader)).status_code == 303
            html = (await web.get("/webhooks")).text
            assert made["id"] in html and 'name="op"' not in html
            for op in ("ask-delete", "delete"):
                refused = await web.post("/webhooks", data={"csrf": csrf_of(html), "op": op, "id": made["id"]})
                assert refused.status_code == 403
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            assert (await key_login(web, bob)).status_code == 303
            html = (await web.get("/webhooks")).text
            assert made["id"] not in html and 'id="no-webhooks"' in html
            theirs = await web.post("/webhooks", data={"csrf": csrf_of(html), "op": "delete", "id": made["id"]})
            assert theirs.status_code == 404
        async with srv.client(alice) as c:
            assert [h["id"] for h in (await c.get("/v1/webhooks")).json()["webhooks"]] == [made["id"]]


async def test_serve_local_says_webhooks_belong_to_macupos_serve(tmp_path: Path) -> None:
    async with running_local(tmp_path / "home") as srv, srv.client() as web:
        assert (await web.get(f"/login?token={srv.token}")).status_code == 303
        page = await web.get("/webhooks")
        assert page.status_code == 200
        assert 'id="no-webhooks"' in page.text and "<code>macupos serve</code>" in page.text
        html = page.text
        refused = await web.post("/webhooks", data={"csrf": csrf_of(html), "op": "delete", "id": "wh_x"})
        assert refused.status_code == 404
