"""``/sessions`` end to end: the list, a Continue button, a session Claude Code forgot, a broken memory."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.session_list import age
from memory.facade import Eywa
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from tests.bot.app_harness import OWNER, Harness, button, buttons, harness
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble
from tests.memory.test_storage_faults import damage_root_pages


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def remember(h: Harness, session_id: str, headline: str, *, days_ago: float = 1.0) -> None:
    """A handoff in memory for the billing project, as a terminal session of the same folder leaves one."""
    handoff = Handoff(
        session_id=session_id,
        date=(datetime.now(UTC) - timedelta(days=days_ago)).replace(microsecond=0).isoformat(),
        headline=headline,
        projects=["billing"],
        keywords=["zeppelin", "exporter"],
        substance=2,
        what_happened=["Rewrote the zeppelin exporter to stream rows"],
        open_threads=["Add a test for empty exports"],
    )
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "h.md").write_text(to_markdown(handoff), encoding="utf-8")
        async with await Eywa.open(h.settings().memory) as eywa:
            assert (await eywa.import_dir(Path(folder))).imported == 1


def test_age_says_the_coarsest_unit() -> None:
    assert [age(s) for s in (5, 120, 7200, 3 * 86400)] == ["just now", "2 min ago", "2 h ago", "3 d ago"]


async def test_sessions_lists_the_projects_sessions_and_a_button_continues_one(h: Harness) -> None:
    await remember(h, "terminal-zeppelin-1", "Zeppelin exporter now streams rows", days_ago=2)
    h.claude.enqueue("Renamed the cron job.", "Fixed the VAT rounding.", "Pushed the cron rename.")
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "rename the billing cron job")
    await h.wait_text(lambda t: "Renamed the cron job." in t)
    await h.wait_message(lambda m: "📒" in str(m.get("text", "")))  # the session ended and was ingested
    first = (await app.services.state.chat(OWNER)).session_id
    h.tg.push_message(OWNER, OWNER, "/new")
    await h.wait_text(lambda t: t.startswith("🆕"))
    h.tg.push_message(OWNER, OWNER, "fix the VAT rounding")
    await h.wait_text(lambda t: "Fixed the VAT rounding." in t)
    second = (await app.services.state.chat(OWNER)).session_id
    assert second != first

    h.tg.push_message(OWNER, OWNER, "/sessions")
    listing = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🧵"))
    text = str(listing["text"])
    for sid in (first, second, "terminal"):
        assert f"({sid[:8]})" in text
    assert "Zeppelin exporter now streams rows" in text and "2 d ago" in text
    assert text.index(second[:8]) < text.index(first[:8]) < text.index("terminal")  # newest first
    assert f"({second[:8]}) ← current" in text
    assert len(buttons(listing)) == 3

    h.tg.push_callback(OWNER, OWNER, listing["message_id"], button(listing, first[:8]))
    await h.wait_text(lambda t: t == f"▶️ The next instruction continues session {first[:8]}.")
    assert (await app.services.state.chat(OWNER)).session_id == first
    h.tg.push_message(OWNER, OWNER, "now push it")
    await h.wait_text(lambda t: "Pushed the cron rename." in t)
    history = str(h.claude.bodies[-1]["messages"])
    assert "rename the billing cron job" in history and "VAT" not in history  # the first session, resumed


async def test_a_session_claude_code_forgot_becomes_a_fresh_one_grounded_in_its_handoff(h: Harness) -> None:
    await remember(h, "terminal-zeppelin-1", "Zeppelin exporter now streams rows")
    h.claude.enqueue("Added the empty-export test.")
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "/sessions")
    listing = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🧵"))
    h.tg.push_callback(OWNER, OWNER, listing["message_id"], button(listing, "terminal"))
    await h.wait_text(lambda t: t.startswith("▶️ The next instruction continues session terminal"))

    h.tg.push_message(OWNER, OWNER, "add the missing test")
    await h.wait_text(lambda t: "Added the empty-export test." in t)
    told = [t for t in h.texts() if t.startswith("↪️")]
    assert told == [
        "↪️ Claude Code no longer has session terminal; starting a fresh session grounded in its handoff "
        "(Zeppelin exporter now streams rows)."
    ]
    assert h.claude.arrivals == 1  # the resume failed before any model call; one fresh run
    body = h.claude.bodies[0]
    system = str(body["system"])
    assert "handoff of session terminal-zeppelin-1, the session this one continues" in system
    assert "> - Add a test for empty exports" in system  # quoted as recalled data
    assert last_user_text(body).endswith("add the missing test")
    fresh = (await app.services.state.chat(OWNER)).session_id
    assert fresh and fresh != "terminal-zeppelin-1"


async def test_with_memory_broken_sessions_lists_the_chats_runs_and_says_so(h: Harness) -> None:
    await remember(h, "terminal-zeppelin-1", "Zeppelin exporter now streams rows")
    damage_root_pages(h.settings().memory.db_path)
    h.claude.enqueue("Renamed the cron job.")
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "rename the billing cron job")
    await h.wait_text(lambda t: "Renamed the cron job." in t)
    await h.wait_handled(app)
    session = (await app.services.state.chat(OWNER)).session_id
    h.tg.push_message(OWNER, OWNER, "/sessions")
    listing = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🧵"))
    text = str(listing["text"])
    assert f"({session[:8]})" in text and "“rename the billing cron job”" in text
    assert "terminal" not in text and "Memory is unavailable" in text
    assert len(buttons(listing)) == 1
