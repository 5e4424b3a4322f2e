"""The per-person daily cap (MACUPOS_USER_DAILY_BUDGET_USD) end to end, in a team room: a member whose run reaches
it is stopped and told why, their next instruction that day is refused, while the owner (never capped) and another
member (a budget of their own) still run. The real CLI against the Anthropic double, whose replies report expensive
usage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import BotApp
from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.anthropic import Reply, ToolUse
from tests.doubles.telegram import TelegramDouble

GROUP, OTHER_ROOM = -100778, -100779  # two team rooms
BOB, CARL = 51, 54  # two members, each with a day's budget of their own
CAP = "0.5"
# One model call that costs $0.82 and asks to run a command: the session would make a second request once the
# command ran (or was denied), unless the run is stopped after this one.
EXPENSIVE = Reply(
    ("Cleaning up first.", ToolUse("Bash", {"command": "rm -f build.log"})), input_tokens=200_000, output_tokens=1_000
)
EXPENSIVE_USD = 0.82


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    roles = f"member:@user{BOB},member:{CARL}"
    env = {"MACUPOS_ROLES": roles, "MACUPOS_USER_DAILY_BUDGET_USD": CAP, "MACUPOS_APPROVAL_TIMEOUT_S": "60"}
    async with harness(tmp_path, telegram_double, **env) as hh:
        yield hh


def _asked(h: Harness) -> str:
    """Everything that reached the model, as one string."""
    return "\n".join(str(b["messages"]) for b in h.claude.bodies)


async def _runs(app: BotApp, chat_id: int) -> list[tuple[str, float]]:
    assert app.services is not None
    return [(r.status, r.cost_usd) for r in reversed(await app.services.state.recent_runs(chat_id))]


async def _settle(h: Harness, app: BotApp) -> None:
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)


async def test_a_member_at_the_cap_is_stopped_and_refused_while_the_owner_and_another_member_run(h: Harness) -> None:
    h.claude.enqueue(EXPENSIVE, "Owner's answer.", "Carl's answer.")
    app = await h.start()

    h.tg.push_message(BOB, GROUP, "remove build.log")
    stopped = await h.wait_text(lambda t: t.startswith("💸"), chat_id=GROUP)
    await _settle(h, app)
    assert len(h.claude.requests) == 1  # stopped after the call that crossed the cap: the command never ran
    assert "remove build.log" in _asked(h)
    assert "this run spent $0.8200" in stopped  # the spend, the cap, and who can raise it how
    assert f"today's cap for each person's instructions (MACUPOS_USER_DAILY_BUDGET_USD={CAP}) is reached" in stopped
    assert "The owner can raise MACUPOS_USER_DAILY_BUDGET_USD in the environment or .env" in stopped
    assert [t for t in h.texts(GROUP) if t.startswith("💸")] == [stopped]  # told once

    # The member's next instruction that day never reaches the model.
    h.tg.push_message(BOB, GROUP, "then rebuild the docs")
    refused = await h.wait_text(lambda t: t.startswith("⛔"), chat_id=GROUP)
    await _settle(h, app)
    assert len(h.claude.requests) == 1 and "rebuild the docs" not in _asked(h)
    assert f"MACUPOS_USER_DAILY_BUDGET_USD={CAP}) is reached with $0.8200 spent today" in refused
    assert "The owner can raise" in refused and "«then rebuild the docs»" in refused

    # The owner is not under the cap: in the same room, the same day, their instruction runs.
    h.tg.push_message(OWNER, GROUP, "summarise the changes")
    await h.wait_text(lambda t: t == "Owner's answer.", chat_id=GROUP)
    await _settle(h, app)
    assert len(h.claude.requests) == 2 and "summarise the changes" in str(h.claude.bodies[1]["messages"])
    assert [t for t in h.texts(GROUP) if t.startswith(("💸", "⛔"))] == [stopped, refused]

    # Another member (in another team room: a session of its own) has a budget of their own.
    h.tg.push_message(CARL, OTHER_ROOM, "list the open issues")
    await h.wait_text(lambda t: t == "Carl's answer.", chat_id=OTHER_ROOM)
    await _settle(h, app)
    assert len(h.claude.requests) == 3 and "list the open issues" in str(h.claude.bodies[2]["messages"])
    assert not [t for t in h.texts(OTHER_ROOM) if t.startswith(("💸", "⛔"))]

    # The cap is the person's, not the room's: Bob is refused there too, for the rest of the day.
    h.tg.push_message(BOB, OTHER_ROOM, "just one more thing")
    again = await h.wait_text(lambda t: t.startswith("⛔"), chat_id=OTHER_ROOM)
    await _settle(h, app)
    assert "«just one more thing»" in again and f"MACUPOS_USER_DAILY_BUDGET_USD={CAP}" in again
    assert len(h.claude.requests) == 3 and "just one more thing" not in _asked(h)

    runs = await _runs(app, GROUP)
    assert [s for s, _ in runs] == ["stopped", "done"]  # the refused instruction left no run
    assert runs[0][1] == pytest.approx(EXPENSIVE_USD)
    assert [s for s, _ in await _runs(app, OTHER_ROOM)] == ["done"]


async def test_a_members_cap_does_not_stop_the_owners_run_in_flight_on_the_same_project(h: Harness) -> None:
    # The owner's run (their private chat, project billing) waits at the model while the member's run in the team
    # room (the same project) crosses the member's cap: only the member's run is stopped.
    h.claude.enqueue(EXPENSIVE, "Owner's long answer.")
    h.claude.hold = 1
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "review the whole module")
    await h.claude.held.wait()  # the owner's call is in flight (its reply is taken when it is released)

    h.tg.push_message(BOB, GROUP, "remove build.log")
    stopped = await h.wait_text(lambda t: t.startswith("💸"), chat_id=GROUP)
    assert f"MACUPOS_USER_DAILY_BUDGET_USD={CAP}" in stopped and "$0.8200" in stopped
    h.claude.release.set()

    await h.wait_text(lambda t: t == "Owner's long answer.", chat_id=OWNER)
    await _settle(h, app)
    assert len(h.claude.requests) == 2
    assert "review the whole module" in _asked(h) and "remove build.log" in _asked(h)
    assert not [t for t in h.texts(OWNER) if t.startswith(("💸", "⛔"))]
    assert [s for s, _ in await _runs(app, OWNER)] == ["done"]
    assert [s for s, _ in await _runs(app, GROUP)] == ["stopped"]


async def test_another_member_in_the_same_room_is_charged_only_their_own_run(h: Harness) -> None:
    h.claude.enqueue(EXPENSIVE, "Carl's answer.")
    app = await h.start()
    h.tg.push_message(BOB, GROUP, "remove build.log")
    await h.wait_text(lambda t: t.startswith("💸"), chat_id=GROUP)
    await _settle(h, app)
    h.tg.push_message(CARL, GROUP, "list the open issues")  # resumes the room's session
    await h.wait_text(lambda t: t == "Carl's answer.", chat_id=GROUP)
    await _settle(h, app)
    assert len(h.claude.requests) == 2
    runs = await _runs(app, GROUP)
    assert [s for s, _ in runs] == ["stopped", "done"], runs  # today: "stopped", Carl charged $0.8201
    assert runs[1][1] < 0.01
