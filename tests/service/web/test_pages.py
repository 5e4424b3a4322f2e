"""The memory pages over real HTTP: logging in (an API key, the one-time link, Telegram's initData), every
page answering with hostile text escaped, changes that need the session's CSRF token, a key's scope and
tenant, and a long transcript read a page at a time."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from service.web.initdata import sign_init_data
from service.web.security import CSP, MINI_APP_CSP
from tests.service.conftest import running_service, transcript_bytes
from tests.service.web.conftest import BOT_TOKEN, HOSTILE, OWNER_ID, csrf_of, running_local, seed_memory

PAGES = ["/", "/search?q=zeppelin", "/sessions", "/review", "/facts", "/cost", "/stats", "/facts/graph.svg"]
RAW = ("<script>window.__pwned", "<img src=x onerror", "<svg onload", '<a href="javascript')


def assert_inert(html: str) -> None:
    for raw in RAW:
        assert raw not in html, raw


async def key_login(client: httpx.AsyncClient, key: str) -> httpx.Response:
    page = await client.get("/login")
    token = re.search(r'name="form_token" value="([^"]+)"', page.text)
    assert token
    return await client.post("/login", data={"form_token": token.group(1), "api_key": key, "next": "/review"})


async def test_a_key_logs_a_browser_in_and_every_page_shows_hostile_text_escaped(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home") as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as api:
            body = transcript_bytes("sess-a1", "zeppelin", HOSTILE, turns=3)
            assert (await api.post("/v1/transcripts", params={"name": "a.jsonl"}, content=body)).status_code == 200
            script = 'remember c1 user Fact predicate likes object "<img src=x onerror=window.__pwned=1>"'
            assert (await api.post("/v1/script", json={"script": script})).status_code == 200
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            assert (await web.get("/review")).headers["location"].startswith("/login?next=")
            done = await key_login(web, key)
            assert done.status_code == 303 and done.headers["location"] == "/review"
            cookie = done.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie and "macupos_session=" in cookie
            for path in [*PAGES, "/sessions/sess-a1", "/facts/edit?id=c1"]:
                page = await web.get(path)
                assert page.status_code == 200, (path, page.text[:300])
                assert_inert(page.text)
                if path.endswith(".svg"):
                    assert page.headers["content-type"].startswith("image/svg+xml")
                    continue
                assert page.headers["content-security-policy"] == CSP
                assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
                # No inline script and no other origin's: only our own files under /static (the CSP says so too).
                assert not re.search(r'<script(?![^>]*\ssrc="/static/[\w.-]+\.js")', page.text), path
            session = (await web.get("/sessions/sess-a1")).text
            assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in session  # shown, as text
            assert "zeppelin" in (await web.get("/search?q=zeppelin")).text


async def test_a_wrong_key_a_missing_form_token_and_a_revoked_key_are_refused(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home") as srv:
        key = await srv.add_key("alice")
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            wrong = await key_login(web, "mpk_000000000000_" + "x" * 43)
            assert wrong.status_code == 401 and "not valid" in wrong.text and "macupos_session" not in str(web.cookies)
            bare = await web.post("/login", data={"api_key": key})  # no form token: a cross-site login attempt
            assert bare.status_code == 403 and "macupos_session" not in bare.headers.get("set-cookie", "")
            assert (await key_login(web, key)).status_code == 303
            assert (await web.get("/stats")).status_code == 200
            keys = await srv_keys(srv.home)
            await keys.revoke((await keys.list_keys("alice"))[0].key_id)
            await keys.close()
            after = await web.get("/stats")
            assert after.status_code == 303 and after.headers["location"].startswith("/login")


async def srv_keys(home: Path):  # type: ignore[no-untyped-def]
    from service.keys import SqliteKeyStore

    return await SqliteKeyStore.open(home / "service.db")


async def test_a_change_without_the_csrf_token_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with running_local(home) as srv, srv.client() as web:
        assert (await web.get(f"/login?token={srv.token}")).status_code == 303
        page = await web.get("/review")
        token = csrf_of(page.text)
        for form in (
            {"op": "forget", "id": ids["imported"]},
            {"op": "forget", "id": ids["imported"], "csrf": "forged"},
            {"op": "forget", "id": ids["imported"], "csrf": ""},
        ):
            refused = await web.post("/review", data=form)
            assert refused.status_code == 403 and "security token" in refused.text
        assert ids["imported"] in (await web.get("/review")).text  # still waiting
        assert (await web.post("/facts", data={"op": "forget", "id": "coffee"})).status_code == 403
        assert "coffee" in (await web.get("/facts")).text
        json_body = await web.post("/review", json={"op": "forget", "id": ids["imported"], "csrf": token})
        assert json_body.status_code == 415  # only our own forms' encoding
        logout = await web.post("/logout", data={"csrf": "forged"})
        assert logout.status_code == 403  # a logout needs the token too (no cross-site log-out)
        ok = await web.post("/review", data={"op": "keep", "id": ids["imported"], "csrf": token})
        assert ok.status_code == 303 and ok.headers["location"] == "/review?done=kept"


async def test_review_keep_forget_and_correct_as_the_chat_does(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with running_local(home) as srv, srv.client() as web:
        await web.get(f"/login?token={srv.token}")
        page = (await web.get("/review")).text
        token = csrf_of(page)
        assert ids["main"] in page and ids["imported"] in page and ids["subagent"] not in page
        fix = await web.post(
            "/review", data={"op": "correct", "id": ids["main"], "text": "it was <b>staging</b>", "csrf": token}
        )
        assert fix.headers["location"] == "/review?done=corrected"
        handoff = (await web.get(f"/sessions/{ids['main']}")).text
        assert "Correction from the owner" in handoff and "it was &lt;b&gt;staging&lt;/b&gt;" in handoff
        gone = await web.post("/review", data={"op": "forget", "id": ids["imported"], "csrf": token})
        assert gone.headers["location"] == "/review?done=forgotten"
        assert (await web.get(f"/sessions/{ids['imported']}")).status_code == 404
        again = await web.post("/review", data={"op": "keep", "id": ids["imported"], "csrf": token})
        assert "no+longer" in again.headers["location"] or "no%20longer" in again.headers["location"]
        left = (await web.get("/review")).text
        assert f'data-session="{ids["main"]}"' not in left and f'data-session="{ids["imported"]}"' not in left
        assert f'data-session="{ids["codex"]}"' not in left  # a linked rollout is read with its parent


async def test_facts_remember_edit_and_forget_go_through_the_script_engine(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    async with running_local(home) as srv, srv.client() as web:
        await web.get(f"/login?token={srv.token}")
        token = csrf_of((await web.get("/facts")).text)
        form = {"op": "remember", "type": "Fact", "id": "tea", "subject": "user", "csrf": token}
        made = await web.post("/facts", data=form | {"f_predicate": "drinks", "f_object": "sencha ] [exec rm] $x"})
        assert made.headers["location"] == "/facts?done=remember&as=Fact#remember-Fact"  # back to its form
        facts = (await web.get("/facts?q=sencha")).text
        assert "sencha ] [exec rm] $x" in facts  # stored as words, never evaluated
        edit = await web.get("/facts/edit?id=tea")
        assert 'value="sencha ] [exec rm] $x"' in edit.text
        saved = await web.post(
            "/facts",
            data={"op": "edit", "id": "tea", "subject": "user", "f_predicate": "drinks", "f_object": "genmaicha",
                  "f_confidence": "0.5", "csrf": token},
        )  # fmt: skip
        assert saved.headers["location"] == "/facts?done=edit&id=tea#fact-tea"
        after = (await web.get("/facts?q=genmaicha")).text
        assert "genmaicha" in after and "sencha" not in after
        bad = await web.post("/facts", data=form | {"id": "tea", "f_predicate": "x", "f_object": "y"})
        # add_once: the script's refusal comes back on the page, with what was typed still in the form
        assert bad.status_code == 422
        assert "already exists" in bad.text and 'name="f_object" value="y"' in bad.text
        link = await web.post(
            "/facts", data={"op": "remember", "type": "Relationship", "id": "", "subject": "user",
                            "f_target": "tea-club", "f_kind": "member-of", "csrf": token},
        )  # fmt: skip
        assert link.headers["location"] == "/facts?done=remember&as=Relationship#remember-Relationship"
        svg = (await web.get("/facts/graph.svg?root=user")).text
        assert "member-of" in svg and "genmaicha" in svg and "<img" not in svg
        gone = await web.post("/facts", data={"op": "forget", "id": "tea", "csrf": token})
        assert gone.headers["location"] == "/facts?done=forget#memories"
        assert "genmaicha" not in (await web.get("/facts")).text


async def test_a_read_key_sees_the_pages_but_cannot_change_them(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home") as srv:
        writer = await srv.add_key("alice")
        reader = await srv.add_key("alice", "read")
        async with srv.client(writer) as api:
            await api.post("/v1/transcripts", params={"name": "a.jsonl"}, content=transcript_bytes("sess-r1", "quokka"))
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            await key_login(web, reader)
            page = (await web.get("/review")).text
            assert "sess-r1" in page and 'value="forget"' not in page  # no buttons to press
            token = csrf_of(page)
            refused = await web.post("/review", data={"op": "forget", "id": "sess-r1", "csrf": token})
            assert refused.status_code == 403 and "scope" in refused.text
            assert (await web.get("/facts/edit?id=x")).status_code == 403


async def test_a_tenants_login_never_shows_another_tenants_memory(tmp_path: Path) -> None:
    async with running_service(tmp_path / "home") as srv:
        alice, bob = await srv.add_key("alice"), await srv.add_key("bob")
        async with srv.client(alice) as api:
            await api.post("/v1/transcripts", params={"name": "a.jsonl"}, content=transcript_bytes("alice-s", "walrus"))
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            await key_login(web, bob)
            for path in ["/sessions", "/review", "/search?q=walrus", "/stats"]:
                assert "alice-s" not in (await web.get(path)).text
            assert (await web.get("/sessions/alice-s")).status_code == 404


async def test_the_one_time_link_logs_in_once_and_next_never_leaves_the_site(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    async with running_local(home) as srv:
        async with srv.client() as first:
            done = await first.get(f"/login?token={srv.token}&next=//evil.example/x")
            assert done.status_code == 303 and done.headers["location"] == "/"
            assert (await first.get("/stats")).status_code == 200
        async with srv.client() as second:
            again = await second.get(f"/login?token={srv.token}")
            assert again.status_code == 403 and "used already" in again.text
            assert (await second.get("/stats")).status_code == 303
            assert (await second.post("/login", data={"api_key": "mpk_x"})).status_code == 403  # no keys here
            assert (await second.get("/v1/stats", headers={"X-API-Key": "x"})).status_code == 404  # no API
            assert (await second.get("/healthz")).status_code == 200


async def test_the_mini_app_logs_in_with_valid_init_data_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)

    def init(user: int = OWNER_ID, age: float = 30, token: str = BOT_TOKEN) -> str:
        fields = {"user": json.dumps({"id": user, "first_name": "Ann"}), "auth_date": str(int(time.time() - age))}
        return sign_init_data(fields, token)

    async with running_local(home) as srv, srv.client() as web:
        page = await web.get("/tg")
        assert page.status_code == 200 and page.headers["content-security-policy"] == MINI_APP_CSP
        assert "x-frame-options" not in page.headers and '<script src="/static/tg.js"' in page.text
        for bad, why in ((init(token="999:OTHER"), "not signed"), (init(age=4000), "too old"),
                         (init(user=1), "allowlist"), ("user=1&hash=00", "not signed")):  # fmt: skip
            refused = await web.post("/tg/auth", data={"init_data": bad})
            assert refused.status_code == 403 and why in refused.json()["error"]
            assert (await web.get("/stats")).status_code == 303
        ok = await web.post("/tg/auth", data={"init_data": init()})
        assert ok.status_code == 200 and ok.json() == {"next": "/review"}
        assert "samesite=strict" in ok.headers["set-cookie"].lower()
        stats = await web.get("/stats")
        assert stats.status_code == 200 and "telegram Ann" in stats.text
        js = await web.get("/static/tg.js")
        assert js.status_code == 200 and js.headers["x-content-type-options"] == "nosniff"


async def test_a_long_transcript_is_read_a_page_at_a_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home, big_transcript_bytes=2_000_000)
    async with running_local(home) as srv, srv.client() as web:
        await web.get(f"/login?token={srv.token}")
        turns: list[int] = []  # every turn's anchor, in the order the pages show them
        seen = 0
        where = ""
        pages = 0
        while True:
            page = await web.get(f"/sessions/{quote(ids['big'])}{where}")
            assert page.status_code == 200
            pages += 1
            assert len(page.content) < 600_000  # a page, never the whole transcript
            seen += len(page.content)
            turns += [int(n) for n in re.findall(r'<h3[^>]*\sid="turn-(\d+)"', page.text)]
            found = re.search(r'id="next-page" href="[^"?]*\?(turn=\d+(?:&amp;part=\d+)?)', page.text)
            if not found:
                break
            where = "?" + found.group(1).replace("&amp;", "&")
        assert pages >= 8 and seen > 1_000_000
        assert turns == sorted(set(turns)) and len(turns) > 100  # each turn once, in order
        assert ids["codex"] in (await web.get(f"/sessions/{quote(ids['main'])}")).text  # its linked rollout
        sub = await web.get(f"/sessions/{quote(ids['subagent'])}")
        assert f'href="/sessions/{ids["main"]}"' in sub.text  # a subagent links back to its parent
        kinds = (await web.get("/sessions?kind=codex")).text
        assert ids["codex"] in kinds and ids["main"] not in kinds
