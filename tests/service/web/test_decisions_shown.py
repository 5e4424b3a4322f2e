"""Who made a memory decision, on the pages over real HTTP (issue 33): Keep, Correct and Forget on the review
page record the login that made them in memory, and the pages show it: the answer says who decided, a
session's page says "kept by … at …" or "corrected by …", a forgotten session's address says who forgot it. A
name someone chose (a Telegram first name) is shown as text, never as markup."""

from __future__ import annotations

import re
from pathlib import Path

from memory.facade import Eywa
from memory.handoffs import forgotten, keep
from tests.service.web.conftest import HOSTILE, csrf_of, memory_settings, running_local, seed_memory
from tests.service.web.local_pages import assert_no_markup, logged_in_local, telegram_init_data


def decided(html: str) -> str:
    """The session page's line on the handoff's decision ("" when it has none)."""
    found = re.search(r'<span id="decided">([^<]*)</span>', html)
    return found.group(1) if found else ""


async def _stored(home: Path, session_id: str) -> tuple[str, str]:
    async with await Eywa.open(memory_settings(home)) as eywa:
        row = await eywa.handoff(session_id)
        assert row is not None
        return row.reviewed_by, row.reviewed_at


async def test_keep_and_correct_on_the_pages_record_the_login_and_the_session_page_shows_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with logged_in_local(home) as web:
        before = await web.get(f"/sessions/{ids['main']}")
        assert decided(before.text) == ""  # waiting: nobody decided
        csrf = csrf_of(before.text)
        kept = await web.post("/review", data={"csrf": csrf, "op": "keep", "id": ids["main"]})
        assert kept.status_code == 303 and kept.headers["location"] == "/review?done=kept"
        answer = await web.get(kept.headers["location"])
        assert "Kept. Decided by owner." in answer.text  # a one-time-link login is the owner
        page = await web.get(f"/sessions/{ids['main']}")
        line = decided(page.text)
        assert re.fullmatch(r"kept by owner at \d{4}-\d\d-\d\d \d\d:\d\d UTC", line), line

        back = f"/sessions/{ids['imported']}"  # an imported handoff: kept by nobody known until corrected
        assert decided((await web.get(back)).text) == ""
        fix = {"csrf": csrf, "op": "correct", "id": ids["imported"], "text": "it was staging", "back": back}
        fixed = await web.post("/review", data=fix)
        assert fixed.status_code == 303 and fixed.headers["location"] == f"{back}?done=corrected"
        page = await web.get(back)
        assert decided(page.text).startswith("corrected by owner at ")
        assert ", by owner): it was staging" in page.text  # the note in the handoff names who too
    assert (await _stored(home, ids["main"]))[0] == "owner"
    assert (await _stored(home, ids["imported"]))[0] == "owner"


async def test_forget_on_the_pages_records_the_login_and_the_gone_session_says_who(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with logged_in_local(home) as web:
        csrf = csrf_of((await web.get("/review")).text)
        gone = await web.post("/review", data={"csrf": csrf, "op": "forget", "id": ids["main"]})
        assert gone.status_code == 303 and "Decided by owner." in (await web.get(gone.headers["location"])).text
        page = await web.get(f"/sessions/{ids['main']}")
        assert page.status_code == 404
        assert re.search(r"was forgotten by owner at \d{4}-\d\d-\d\d \d\d:\d\d UTC", page.text), page.text
        assert (await web.get("/sessions/never-was-here")).status_code == 404
    async with await Eywa.open(memory_settings(home)) as eywa:
        record = await forgotten(eywa, ids["main"])
        sub = await forgotten(eywa, ids["subagent"])  # its subagents go with it, by the same hand
        assert record is not None and record.by == "owner" and sub is not None and sub.by == "owner"


async def test_a_mini_app_login_decides_as_its_telegram_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with running_local(home) as srv, srv.client() as web:
        assert (await web.post("/tg/auth", data={"init_data": telegram_init_data()})).status_code == 200
        csrf = csrf_of((await web.get("/review")).text)
        kept = await web.post("/review", data={"csrf": csrf, "op": "keep", "id": ids["main"]})
        assert kept.status_code == 303
        assert decided((await web.get(f"/sessions/{ids['main']}")).text).startswith("kept by telegram Ann at ")
    assert (await _stored(home, ids["main"]))[0] == "telegram Ann"


async def test_a_hostile_decider_name_is_shown_as_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with await Eywa.open(memory_settings(home)) as eywa:  # as a chat would record a chosen first name
        assert await keep(eywa, ids["main"], by=HOSTILE)
        await eywa.forget(ids["codex"], by=HOSTILE)
    async with logged_in_local(home) as web:
        page = await web.get(f"/sessions/{ids['main']}")
        assert page.status_code == 200 and decided(page.text).startswith("kept by ")
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in decided(page.text)
        assert_no_markup(page.text)
        gone = await web.get(f"/sessions/{ids['codex']}")
        assert gone.status_code == 404 and "was forgotten by " in gone.text
        assert_no_markup(gone.text)
