"""Instructions end to end: grounding, the reply, live follow-ups, terse resumes, handoff review, /recall."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def seed_handoff(h: Harness) -> str:
    yesterday = (datetime.now(UTC) - timedelta(days=1)).replace(microsecond=0).isoformat()
    billing_handoff = partial(Handoff, date=yesterday, projects=["billing"], substance=2)
    other = billing_handoff(
        session_id="earlier-invoices-1",
        headline="Invoice PDFs use the new template",
        keywords=["invoice", "pdf", "template"],
        what_happened=["Switched the invoice PDFs to the new template"],
    )
    earlier = billing_handoff(
        session_id="earlier-zeppelin-1",
        headline="Zeppelin exporter now streams rows",
        keywords=["zeppelin", "exporter", "streaming"],
        what_happened=["Rewrote the zeppelin exporter to stream rows instead of buffering"],
        insights=["Keep the exporter's batch size at 500"],
        open_threads=["Add a test for empty exports"],
    )
    settings = h.settings()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "earlier.md").write_text(to_markdown(earlier), encoding="utf-8")
        (Path(folder) / "other.md").write_text(to_markdown(other), encoding="utf-8")
        async with await Eywa.open(settings.memory) as eywa:
            report = await eywa.import_dir(Path(folder))
    assert report.imported == 2
    rules = h.relay(settings).rules_path
    rules.parent.mkdir(parents=True, exist_ok=True)
    rules.write_text("# Rules\n\n- Always run `make check` before pushing.\n", encoding="utf-8")
    return yesterday[:10]


async def test_an_instruction_is_grounded_answered_and_its_handoff_reviewed_and_recalled(h: Harness) -> None:
    day = await seed_handoff(h)
    h.claude.enqueue("I made the zeppelin exporter skip empty batches.")
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "continue the zeppelin exporter work")

    await h.wait_text(lambda t: "skip empty batches" in t)
    body = h.claude.bodies[0]
    system = str(body["system"])
    assert "make check" in system  # MEMORY.md rules
    assert "handoff of session earlier-zeppelin-1" in system  # the earlier handoff, recalled
    assert last_user_text(body).endswith("continue the zeppelin exporter work")
    assert app.services is not None
    session_id = (await app.services.state.chat(OWNER)).session_id
    assert session_id

    # The progress message ended with engine, session, time and cost.
    progress = await h.wait_message(lambda m: "✅" in str(m.get("text", "")))
    assert f"session {session_id[:8]}" in progress["text"] and "tokens" in progress["text"]

    card = await h.wait_message(lambda m: "📒" in str(m.get("text", "")))
    assert "Keep" in str(card["reply_markup"]) and "Forget" in str(card["reply_markup"])
    h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "Keep"))
    await h.wait_message(lambda m: "Kept" in str(m.get("text", "")))
    review = await app.services.state.get_review(session_id)
    assert review is not None and review.state == "kept"
    kept = (await app.services.eywa.show(session_id)).handoff  # memory's own flag: off the web review queue too
    assert kept is not None and kept.review == "kept"

    h.tg.push_message(OWNER, OWNER, "/recall zeppelin")
    reply = await h.wait_text(lambda t: t.startswith("🔎"))
    assert session_id[:8] in reply and "Zeppelin exporter now streams rows" in reply and day in reply


async def test_a_terse_follow_up_resumes_the_finished_session_and_forget_removes_its_handoff(h: Harness) -> None:
    h.claude.enqueue("Deleted the legacy exporter module.", "Pushed to origin/main.")
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "delete the legacy exporter module")
    await h.wait_text(lambda t: "Deleted the legacy" in t)
    await h.wait_message(lambda m: "📒" in str(m.get("text", "")))  # the session ended: its handoff is up
    first = (await app.services.state.chat(OWNER)).session_id

    h.tg.push_message(OWNER, OWNER, "removed; push")
    await h.wait_text(lambda t: "Pushed to origin" in t)
    history = str(h.claude.bodies[-1]["messages"])
    assert "delete the legacy exporter module" in history  # the earlier turn came back with the resume
    assert last_user_text(h.claude.bodies[-1]).endswith("removed; push")
    cards = await h.tg.wait_for(  # the second handoff: posted once the resumed session ended
        lambda: [m for m in h.tg.messages(OWNER).values() if "📒" in str(m.get("text", ""))][1:], timeout=60
    )
    runs = await app.services.state.recent_runs(OWNER)
    assert [r.session_id for r in runs] == [first, first] and [r.status for r in runs] == ["done", "done"]
    h.tg.push_callback(OWNER, OWNER, cards[-1]["message_id"], button(cards[-1], "Forget"))
    await h.wait_message(lambda m: "Forgotten" in str(m.get("text", "")))
    assert first not in [row.session_id for row in await app.services.eywa.list_handoffs(limit=50)]


async def test_a_session_claude_code_no_longer_has_is_replaced_by_a_fresh_one_and_the_owner_told(h: Harness) -> None:
    h.claude.enqueue("Started over and fixed it.")
    app = await h.start()
    assert app.services is not None
    gone = str(uuid.uuid4())  # e.g. the Claude Code config folder was wiped since
    await app.services.state.set_session(OWNER, gone)
    h.tg.push_message(OWNER, OWNER, "fix the flaky export test")
    await h.wait_text(lambda t: "Started over and fixed it." in t)
    told = [t for t in h.texts() if t.startswith("↪️")]
    assert told == [
        f"↪️ Claude Code no longer has session {gone[:8]}; memory holds no handoff of it either, "
        "so this is a fresh session without it."
    ]
    assert h.claude.arrivals == 1 and last_user_text(h.claude.bodies[0]).endswith("fix the flaky export test")
    fresh = (await app.services.state.chat(OWNER)).session_id
    assert fresh and fresh != gone
    await h.wait_message(lambda m: "📒" in str(m.get("text", "")))  # posted once the run was recorded and closed
    runs = await app.services.state.recent_runs(OWNER)
    assert [(r.session_id, r.status) for r in runs] == [(fresh, "done")]


async def test_a_follow_up_while_the_session_runs_reaches_the_live_session(h: Harness) -> None:
    h.claude.hold = 1
    h.claude.enqueue("The long job finished.", "Changelog updated.")
    await h.start()
    h.tg.push_message(OWNER, OWNER, "run the long job")
    await h.tg.wait_for(h.claude.held.is_set, timeout=60)
    h.tg.push_message(OWNER, OWNER, "also update the changelog")
    await h.wait_text(lambda t: t.startswith("📥 Queued"))
    h.claude.release.set()

    await h.wait_text(lambda t: "Changelog updated" in t)
    assert h.claude.arrivals == 2
    follow_up = h.claude.bodies[-1]
    assert last_user_text(follow_up).endswith("also update the changelog")
    assert "run the long job" in str(follow_up["messages"])  # same conversation, same live process
    cards = [m for m in h.tg.messages(OWNER).values() if "📒" in str(m.get("text", ""))]
    assert len(cards) <= 1  # one session, so at most one handoff


async def test_a_reply_to_a_posted_handoff_is_stored_as_its_correction(h: Harness) -> None:
    h.claude.enqueue("Renamed the billing cron job.")
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "rename the billing cron job to nightly-billing")
    card = await h.wait_message(lambda m: "📒" in str(m.get("text", "")))
    session_id = (await app.services.state.chat(OWNER)).session_id
    h.tg.push_message(OWNER, OWNER, "it runs at 02:00 UTC, not midnight", reply_to_message=card)
    await h.wait_text(lambda t: "Correction stored" in t)
    view = await app.services.eywa.show(session_id)
    assert view.handoff is not None and view.handoff.source == "correction"
    assert "it runs at 02:00 UTC, not midnight" in view.handoff.markdown
    review = await app.services.state.get_review(session_id)
    assert review is not None and review.state == "corrected"
