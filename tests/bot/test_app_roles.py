"""Team rooms end to end: several people in one group, each with a role (bot.roles). Members instruct but cannot
decide, approvers decide (and the card says who), viewers only read, strangers get nothing run, and the owner's
/role changes take effect at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.roles import ONLY_APPROVERS, ONLY_OWNER, VIEWER_REFUSAL
from tests.bot.app_harness import OWNER, STRANGER, Harness, button, harness
from tests.doubles.anthropic import ToolUse
from tests.doubles.telegram import TelegramDouble

GROUP = -100777  # the team room
ALICE, BOB, VERA, NEW = 50, 51, 52, 53  # approver, member, viewer (by @username), not yet on the team


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    roles = f"approver:@user{ALICE},member:@user{BOB},viewer:{VERA}"
    async with harness(tmp_path, telegram_double, MACUPOS_APPROVAL_TIMEOUT_S="60", MACUPOS_ROLES=roles) as hh:
        yield hh


def toasts(h: Harness) -> list[str]:
    return [str(c.params.get("text")) for c in h.tg.sent if c.method == "answerCallbackQuery"]


async def _card(h: Harness) -> dict[str, Any]:
    return await h.wait_message(lambda m: "🔐" in str(m.get("text", "")), chat_id=GROUP)


async def test_a_members_tap_on_allow_changes_nothing_and_an_approvers_runs_the_tool(h: Harness) -> None:
    h.claude.enqueue(ToolUse("Bash", {"command": "touch approved.txt", "description": "make a file"}), "Made it.")
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(BOB, GROUP, "make the file")  # a member instructs
    card = await _card(h)
    allow = button(card, "Allow")

    h.tg.push_callback(BOB, GROUP, card["message_id"], allow)  # the member whose instruction it is
    await h.wait_handled(app)
    assert toasts(h) == [ONLY_APPROVERS]
    assert not (h.project / "approved.txt").exists()
    assert "🔐" in h.tg.messages(GROUP)[card["message_id"]]["text"]  # still waiting, the button not spent
    assert await app.services.state.decisions(GROUP) == []

    h.tg.push_callback(ALICE, GROUP, card["message_id"], allow)  # an approver decides the member's card
    await h.wait_text(lambda t: "Made it." in t, chat_id=GROUP)
    assert (h.project / "approved.txt").exists()
    assert f"✅ allowed by @user{ALICE}" in h.tg.messages(GROUP)[card["message_id"]]["text"]
    [decision] = await app.services.state.decisions(GROUP)
    assert (decision.action, decision.choice, decision.user_id, decision.name) == (
        "approve",
        "allow",
        ALICE,
        f"@user{ALICE}",
    )


async def test_viewers_read_strangers_get_nothing_and_role_changes_take_effect(h: Harness) -> None:
    h.claude.enqueue("Done for the new member.")
    app = await h.start()
    assert app.intake is not None
    h.tg.push_message(VERA, GROUP, "delete the staging database")
    refused = await h.wait_text(lambda t: t == VIEWER_REFUSAL, chat_id=GROUP)
    assert refused
    h.tg.push_message(VERA, GROUP, "/status")  # a viewer still reads
    await h.wait_handled(app)
    h.tg.push_message(STRANGER, GROUP, "run the deploy")
    h.tg.push_message(NEW, GROUP, "run the deploy")
    await h.wait_handled(app)
    assert h.claude.arrivals == 0

    # Only the owner gives roles.
    h.tg.push_message(ALICE, GROUP, f"/role @user{NEW} member")
    await h.wait_text(lambda t: t == ONLY_OWNER, chat_id=GROUP)
    h.tg.push_message(OWNER, GROUP, f"/role @user{NEW} member")
    await h.wait_text(lambda t: t == f"✅ @user{NEW} is now member.", chat_id=GROUP)
    h.tg.push_message(NEW, GROUP, "run the deploy checks")
    await h.wait_text(lambda t: t == "Done for the new member.", chat_id=GROUP)
    await h.wait_sessions_idle(app)
    assert h.claude.arrivals == 1

    # Taking a role away, and demoting: the next message is judged by the new role.
    h.tg.push_message(OWNER, GROUP, f"/role @user{BOB} viewer")
    await h.wait_text(lambda t: t == f"✅ @user{BOB} is now viewer.", chat_id=GROUP)
    before = len([t for t in h.texts(GROUP) if t == VIEWER_REFUSAL])
    h.tg.push_message(BOB, GROUP, "make another file")
    await h.wait_handled(app)
    assert len([t for t in h.texts(GROUP) if t == VIEWER_REFUSAL]) == before + 1
    h.tg.push_message(OWNER, GROUP, "/roles")
    listing = await h.wait_text(lambda t: t.startswith("👥 Roles"), chat_id=GROUP)
    assert f"approver: @user{ALICE} (configuration)" in listing
    assert f"viewer: @user{BOB} (/role)" in listing and f"member: @user{NEW} (/role)" in listing
    assert h.claude.arrivals == 1

    # The roles live in bot.db: a restart keeps them.
    await app.stop()
    h.apps.remove(app)
    app = await h.start()
    h.tg.push_message(BOB, GROUP, "and now?")
    await h.wait_handled(app)
    assert len([t for t in h.texts(GROUP) if t == VIEWER_REFUSAL]) == before + 2
    assert h.claude.arrivals == 1


async def test_cost_shows_each_persons_spend(h: Harness) -> None:
    h.claude.enqueue("First.", "Second.")
    app = await h.start()
    h.tg.push_message(BOB, GROUP, "first task")
    await h.wait_text(lambda t: t == "First.", chat_id=GROUP)
    await h.wait_sessions_idle(app)
    h.tg.push_message(ALICE, GROUP, "second task")
    await h.wait_text(lambda t: t == "Second.", chat_id=GROUP)
    await h.wait_sessions_idle(app)
    assert app.services is not None
    runs = await app.services.state.recent_runs(GROUP)
    assert len(runs) == 2
    h.tg.push_message(OWNER, GROUP, "/cost")
    cost = await h.wait_text(lambda t: "By person today" in t, chat_id=GROUP)
    assert f"@user{ALICE}: $" in cost and f"@user{BOB}: $" in cost
