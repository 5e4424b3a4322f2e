"""The review queue over real HTTP: Forget asks first (and the confirm step changes nothing), every change
returns to the card after the one acted on with the filter and page it had, a refused correction comes back
with the text typed, and several cards are kept or forgotten together with what happened to each."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx

from memory.facade import Eywa
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from tests.service.web.conftest import csrf_of, memory_settings, seed_memory
from tests.service.web.local_pages import assert_no_markup, logged_in_local


async def add_pending(home: Path, *names: str, project: str = "billing") -> list[str]:
    """Handoffs waiting for review (imported, then set pending as a fresh one would be)."""
    folder = home / f"more-{names[0]}"
    folder.mkdir()
    for i, name in enumerate(names):
        h = Handoff(
            session_id=name,
            date=f"2026-03-0{3 + i}T09:00:00+00:00",
            headline=f"{name} <b>bold</b>",
            projects=[project],
            keywords=["ledger"],
            substance=2,
            what_happened=[f"worked on {name}"],
        )
        (folder / f"h{i}.md").write_text(to_markdown(h), encoding="utf-8")
    async with await Eywa.open(memory_settings(home)) as eywa:
        await eywa.import_dir(folder)
        async with eywa.db.write() as conn:
            for name in names:
                await conn.execute("UPDATE handoffs SET review = 'pending' WHERE session_id = ?", (name,))
    return list(names)


def waiting(html: str) -> list[str]:
    return re.findall(r'<article class="card review" id="h-[^"]*" data-session="([^"]+)"', html)


@asynccontextmanager
async def reviewing(home: Path, *pending: str) -> AsyncIterator[tuple[httpx.AsyncClient, str, dict[str, str]]]:
    """The hostile seed in ``home`` and the handoffs ``pending`` waiting for review (newest last), served by
    `serve --local`: (a logged-in client, its CSRF token, the seed's ids)."""
    ids = await seed_memory(home)
    if pending:
        await add_pending(home, *pending)
    async with logged_in_local(home) as web:
        yield web, csrf_of((await web.get("/review")).text), ids


async def test_forget_asks_first_and_the_confirm_step_changes_nothing(tmp_path: Path) -> None:
    async with reviewing(tmp_path / "home") as (web, csrf, ids):
        form = {"csrf": csrf, "id": ids["imported"], "op": "ask-forget", "next": ids["main"]}
        ask = await web.post("/review", data=form)
        assert ask.status_code == 200
        assert 'id="confirm-forget"' in ask.text and "cannot be undone" in ask.text
        assert f'name="id" value="{ids["imported"]}"' in ask.text
        assert 'href="/review#h-web-imported-1"' in ask.text  # Cancel: back to that card
        assert_no_markup(ask.text)
        assert ids["imported"] in waiting((await web.get("/review")).text)  # asking changed nothing
        gone = await web.post("/review", data={**form, "op": "forget"})
        assert gone.status_code == 303
        assert gone.headers["location"] == f"/review?done=forgotten#h-{ids['main']}"
        assert ids["imported"] not in waiting((await web.get("/review")).text)
        assert (await web.get(f"/sessions/{ids['imported']}")).status_code == 404
        # Asked from a session's page: Cancel goes back to that page.
        from_session = {"csrf": csrf, "id": ids["main"], "op": "ask-forget", "back": f"/sessions/{ids['main']}"}
        ask = await web.post("/review", data=from_session)
        assert f'href="/sessions/{ids["main"]}" id="cancel-forget"' in ask.text
        assert 'name="back" value="/sessions/web-main-1"' in ask.text


async def test_keep_returns_to_the_next_card_with_the_filter_and_page_it_had(tmp_path: Path) -> None:
    names = ["ledger-a", "ledger/c", "ledger-b"]  # newest last
    async with reviewing(tmp_path / "home", *names) as (web, csrf, _):
        page = (await web.get("/review", params={"project": "billing"})).text
        shown = waiting(page)
        assert shown[:3] == ["ledger-b", "ledger/c", "ledger-a"] and set(names) <= set(shown)
        # The form of the first card names the card after it; the answer opens the queue there.
        form = {"csrf": csrf, "op": "keep", "id": shown[0], "next": shown[1], "project": "billing", "page": "1"}
        kept = await web.post("/review", data=form)
        url = urlsplit(kept.headers["location"])
        assert url.path == "/review" and parse_qs(url.query) == {"done": ["kept"], "project": ["billing"]}
        assert url.fragment == "h-" + quote(shown[1], safe="")
        after = await web.get(kept.headers["location"])
        assert 'id="done"' in after.text and shown[0] not in waiting(after.text)
        # The anchor the browser scrolls to is on the page (a slash in an id travels as %2F, which the
        # browser decodes to find the element).
        assert url.fragment == "h-ledger%2Fc" and 'id="h-ledger/c"' in after.text


async def test_a_refused_correction_comes_back_with_the_text_typed_and_the_reason(tmp_path: Path) -> None:
    async with reviewing(tmp_path / "home") as (web, csrf, ids):
        typed = "the deploy went to <b>staging</b> " + "and more " * 500  # over the 4,000 characters
        refused = await web.post("/review", data={"csrf": csrf, "op": "correct", "id": ids["main"], "text": typed})
        assert refused.status_code == 400
        html = refused.text
        assert "longer than 4000 characters" in html and 'id="correct-error"' in html
        box = re.search(r'<textarea name="text"[^>]*autofocus[^>]*>([^<]*)</textarea>', html)
        assert box, "the correction box with the error has no focus"
        assert box.group(1).startswith("the deploy went to &lt;b&gt;staging&lt;/b&gt; and more")
        assert ids["main"] in waiting(html)  # nothing was stored
        ok = await web.post(
            "/review", data={"csrf": csrf, "op": "correct", "id": ids["main"], "text": "it was staging"}
        )
        assert ok.status_code == 303 and ok.headers["location"].startswith("/review?done=corrected")


async def test_several_cards_are_kept_together_and_the_answer_names_what_was_gone(tmp_path: Path) -> None:
    names = ["bulk-a", "bulk-b"]
    async with reviewing(tmp_path / "home", *names) as (web, csrf, _):
        page = (await web.get("/review")).text
        assert 'form="bulk" name="sel-' in page and 'id="bulk"' in page
        form = {"csrf": csrf, "op": "keep", "sel-1": names[0], "sel-2": names[1], "sel-3": "no-such-handoff"}
        kept = await web.post("/review", data=form)
        assert kept.status_code == 303
        after = await web.get(kept.headers["location"])
        assert "Kept: 2 handoffs." in after.text and "1 was no longer in memory: no-such-handoff" in after.text
        left = waiting(after.text)
        assert names[0] not in left and names[1] not in left
        none = await web.post("/review", data={"csrf": csrf, "op": "keep"})
        assert "Select+one" in none.headers["location"] or "Select%20one" in none.headers["location"]


async def test_several_cards_are_forgotten_together_only_after_the_confirm(tmp_path: Path) -> None:
    names = ["gone-a", "gone-b"]
    async with reviewing(tmp_path / "home", *names) as (web, csrf, _):
        ask = await web.post("/review", data={"csrf": csrf, "op": "ask-forget", "sel-1": names[0], "sel-2": names[1]})
        assert ask.status_code == 200 and "Forget 2 handoffs for good?" in ask.text
        assert "gone-a &lt;b&gt;bold&lt;/b&gt;" in ask.text  # the headlines, escaped
        assert set(waiting((await web.get("/review")).text)) >= set(names)
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', ask.text))
        gone = await web.post("/review", data={**fields, "op": "forget"})
        after = await web.get(gone.headers["location"])
        assert "Forgotten: 2 handoffs." in after.text
        assert not set(waiting(after.text)) & set(names)


async def test_a_read_login_sees_no_review_buttons(tmp_path: Path) -> None:
    from tests.service.conftest import running_service
    from tests.service.web.test_pages import key_login

    async with running_service(tmp_path / "home") as srv:
        key = await srv.add_key("alice", scope="read")
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as web:
            await key_login(web, key)
            page = await web.get("/review")
            assert page.status_code == 200 and 'id="bulk"' not in page.text and "confirm-forget" not in page.text
