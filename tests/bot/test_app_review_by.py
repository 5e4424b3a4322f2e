"""Memory decisions made in a team room name who made them in memory itself (issue 33): the approver who taps
Keep, or replies with a correction, is recorded on the handoff's row (what the web pages show), not only on the
card and in bot.db's decisions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.bot.app_harness import Harness, button, harness
from tests.doubles.telegram import TelegramDouble

GROUP = -100778  # the team room
ALICE, BOB = 60, 61  # approver, member


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_ROLES=f"approver:@user{ALICE},member:@user{BOB}") as hh:
        yield hh


async def _handoff_card(h: Harness, instruction: str) -> tuple[dict[str, Any], str]:
    """A member's instruction run to its end: the handoff card posted in the room, and its session."""
    app = h.apps[-1]
    assert app.services is not None
    h.tg.push_message(BOB, GROUP, instruction)
    card = await h.wait_message(lambda m: "📒" in str(m.get("text", "")), chat_id=GROUP)
    return card, (await app.services.state.chat(GROUP)).session_id


async def test_a_keep_tapped_in_the_room_stores_who_in_memory(h: Harness) -> None:
    h.claude.enqueue("Renamed the nightly job.")
    app = await h.start()
    assert app.services is not None
    card, session_id = await _handoff_card(h, "rename the nightly job")
    h.tg.push_callback(ALICE, GROUP, card["message_id"], button(card, "Keep"))
    await h.wait_message(lambda m: f"Decided by @user{ALICE}" in str(m.get("text", "")), chat_id=GROUP)
    kept = (await app.services.eywa.show(session_id)).handoff
    assert kept is not None and kept.review == "kept"
    assert kept.reviewed_by == f"@user{ALICE}" and kept.reviewed_at


async def test_a_correction_replied_in_the_room_stores_who_in_memory(h: Harness) -> None:
    h.claude.enqueue("Moved the cron to 02:00.")
    app = await h.start()
    assert app.services is not None
    card, session_id = await _handoff_card(h, "move the billing cron")
    h.tg.push_message(ALICE, GROUP, "it is 02:00 UTC, not local time", reply_to_message=card)
    await h.wait_text(lambda t: "Correction stored" in t, chat_id=GROUP)
    fixed = (await app.services.eywa.show(session_id)).handoff
    assert fixed is not None and fixed.source == "correction" and fixed.reviewed_by == f"@user{ALICE}"
    assert f"by @user{ALICE}): it is 02:00 UTC, not local time" in fixed.markdown
