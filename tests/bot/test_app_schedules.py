"""Agents on their own: ``/at``, ``/every`` and ``/schedules`` against the real bot (the Telegram double, the
real Claude CLI against the Anthropic double). Time is the test's: the Scheduler's clock is swapped for one the
test moves, and ``Scheduler.tick`` fires what is due; nothing sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app import BotApp
from bot.profiles import PROFILES, ProfileGate
from bot.schedule_spec import Spec
from bot.schedules import local_time
from bot.state import BotState
from relay.approvals import ApprovalRequest
from tests.bot.app_harness import OWNER, Harness, button, buttons, harness
from tests.bot.test_app_branches import commit_file, cwd_of, git, worktree
from tests.doubles.anthropic import ToolUse, last_user_text
from tests.doubles.telegram import TelegramDouble

MIN = 60.0
HOUR = 3600.0


class Clock:
    """The Scheduler's clock, moved by the test."""

    def __init__(self) -> None:
        self.t = float(int(time.time()))

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def handled(h: Harness, app: BotApp) -> None:
    """Every pushed update fetched and its handler finished (the runs it started may go on)."""
    await h.tg.wait_for(lambda: not h.tg.pending, timeout=30)
    assert app.intake is not None
    await asyncio.wait_for(app.intake.idle(), 60)


async def settle(h: Harness, app: BotApp) -> None:
    """Every pushed update handled and every lane's worker finished (its run's bookkeeping included)."""
    await handled(h, app)
    sessions = app.sessions
    assert sessions is not None
    await h.tg.wait_for(lambda: sessions.idle, timeout=120)


async def started(h: Harness) -> tuple[BotApp, Clock]:
    app = await h.start()
    clock = Clock()
    app.scheduler.clock = clock
    return app, clock


async def tick(h: Harness, app: BotApp, at: float) -> list[int]:
    """Fire what is due at ``at``; returns once the runs it started (and their bookkeeping) are done."""
    made = await app.scheduler.tick(at)
    await settle(h, app)
    return made


async def command(h: Harness, app: BotApp, text: str) -> str:
    """Send a command; the bot's reply (the newest text after it)."""
    before = len(h.texts())
    h.tg.push_message(OWNER, OWNER, text)
    await handled(h, app)
    await h.tg.wait_for(lambda: len(h.texts()) > before)
    return h.texts()[-1]


async def cards(h: Harness, app: BotApp) -> list[dict[str, Any]]:
    """``/schedules``: the cards it sent, as they stand."""
    before = set(h.tg.messages(OWNER))
    await command(h, app, "/schedules")
    return [m for k, m in h.tg.messages(OWNER).items() if k not in before]


async def press(h: Harness, app: BotApp, card: Mapping[str, Any], label: str) -> None:
    h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, label))
    await settle(h, app)


def answers(h: Harness, text: str) -> int:
    return sum(text in t for t in h.texts())


async def test_at_fires_once_when_due_and_schedules_shows_its_result(h: Harness) -> None:
    h.claude.default = "The report is ready."
    app, clock = await started(h)
    t0 = clock.t
    reply = await command(h, app, "/at 30m run the report")
    assert reply.startswith("🗓 Schedule #1: once,") and "profile tests" in reply and "Next run" in reply
    assert "run the report" in reply
    [made] = await app.services.state.schedules(OWNER)  # type: ignore[union-attr]
    assert made.next_at == t0 + 30 * MIN and made.profile == "tests" and made.state == "active"

    assert await tick(h, app, t0 + 29 * MIN) == []
    assert h.claude.arrivals == 0
    assert len(await tick(h, app, t0 + 31 * MIN)) == 1
    await h.wait_text(lambda t: "The report is ready." in t)
    assert h.claude.arrivals == 1
    assert "run the report" in last_user_text(h.claude.bodies[0])
    assert not any("while the bot was down" in t for t in h.texts())  # on time: no note
    assert await tick(h, app, t0 + 31 * MIN) == []
    assert await tick(h, app, t0 + 48 * HOUR) == []
    assert h.claude.arrivals == 1

    [card] = await cards(h, app)
    text = card["text"]
    assert "#1 once," in text and "next: done · profile tests" in text
    assert "· done · $" in text  # the last result and its cost
    assert set(buttons(card)) == {"⚡ Run now", "🗑 Delete"}  # nothing to pause or resume once done


async def test_every_runs_in_its_branch_and_pause_resume_run_now_delete(h: Harness) -> None:
    git(h.project, "init", "-q", "-b", "main")
    commit_file(h.project, "app.py", "print('hello')\n", "first")
    h.claude.default = lambda body: "Build checked in " + cwd_of(body).rsplit("/", 1)[-1]
    app, clock = await started(h)
    state = app.services.state  # type: ignore[union-attr]
    t0 = clock.t
    reply = await command(h, app, "/every 2h @nightly profile=tests check the build")
    assert reply.startswith("🗓 Schedule #1: every 2 hours") and "in @nightly" in reply and "profile tests" in reply
    sched = await state.schedule(1)
    assert sched is not None and sched.branch == "nightly" and sched.text == "check the build"
    assert sched.next_at == t0 + 2 * HOUR
    assert (await state.chat(OWNER)).last_branch == ""  # making it did not move the owner's next message there

    assert await tick(h, app, t0 + 2 * HOUR - 1) == []
    assert len(await tick(h, app, t0 + 2 * HOUR + 5)) == 1
    # The owner throws the branch away meanwhile: the next fire starts it anew rather than failing each time.
    git(h.project, "worktree", "remove", "--force", str(worktree(h, "nightly")))
    git(h.project, "branch", "-q", "-D", "nightly")
    await state.remove_branch(OWNER, "nightly")
    h.claude.hold = 1
    assert len(await app.scheduler.tick(t0 + 4 * HOUR + 5)) == 1
    await asyncio.wait_for(h.claude.held.wait(), 60)
    [card] = await cards(h, app)
    assert "· running · $" in card["text"]  # not the last run's result while this one runs
    h.claude.release.set()
    await settle(h, app)
    assert await tick(h, app, t0 + 4 * HOUR + 50) == []
    assert h.claude.arrivals == 2
    assert not any(t.startswith("❌") for t in h.texts())
    assert [cwd_of(b) for b in h.claude.bodies] == [str(worktree(h, "nightly"))] * 2
    assert answers(h, "Build checked in nightly") == 2
    assert [f[0] for f in await state.schedule_fires(1)] == [t0 + 2 * HOUR, t0 + 4 * HOUR]

    [card] = await cards(h, app)
    await press(h, app, card, "Pause")
    await h.wait_text(lambda t: "Schedule #1 paused" in t)
    clock.t = t0 + 7 * HOUR + 100
    assert await tick(h, app, clock.t) == []  # the 6h fire passes while paused
    assert h.claude.arrivals == 2

    [card] = await cards(h, app)
    assert "next: paused" in card["text"]
    await press(h, app, card, "Resume")
    await h.wait_text(lambda t: "Schedule #1 resumed" in t)
    sched = await state.schedule(1)
    assert sched is not None and sched.state == "active" and sched.next_at == t0 + 8 * HOUR  # from now: no catch-up
    assert await tick(h, app, clock.t) == []
    assert h.claude.arrivals == 2

    [card] = await cards(h, app)
    clock.t += 60
    await press(h, app, card, "Run now")
    await settle(h, app)
    await h.tg.wait_for(lambda: answers(h, "Build checked in nightly") == 3)
    assert h.claude.arrivals == 3 and cwd_of(h.claude.bodies[-1]) == str(worktree(h, "nightly"))
    sched = await state.schedule(1)
    assert sched is not None and sched.next_at == t0 + 8 * HOUR  # an extra run: the times stay

    [card] = await cards(h, app)
    await press(h, app, card, "Delete")
    await h.wait_text(lambda t: "Schedule #1 deleted" in t)
    assert "No schedules" in await command(h, app, "/schedules")
    assert await tick(h, app, t0 + 8 * HOUR + 5) == []
    assert h.claude.arrivals == 3


def tool_results(body: Mapping[str, Any]) -> list[str]:
    """The text of every tool result the CLI sent back to the model in this request."""
    found: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                found.append(inner if isinstance(inner, str) else " ".join(str(b.get("text", "")) for b in inner))
    return found


async def test_a_scheduled_run_does_what_its_profile_allows_and_nothing_asks(h: Harness) -> None:
    (h.project / "build").mkdir()
    notes = h.project / "notes.txt"
    notes.write_text("old notes\n", encoding="utf-8")
    edit = ToolUse("Edit", {"file_path": str(notes), "old_string": "old notes", "new_string": "new notes"})
    read = ToolUse("Read", {"file_path": str(notes)})
    h.claude.enqueue(
        ToolUse("Bash", {"command": "rm -rf build", "description": "clean the build"}),
        ToolUse("Bash", {"command": "pytest -q", "description": "run the tests"}),
        ToolUse("Bash", {"command": "pytest -q --basetemp=build", "description": "tests, temp in build"}),
        read,
        edit,
        "Tidied what I could.",
    )
    app, clock = await started(h)
    t0 = clock.t
    await command(h, app, "/at 30m tidy up")
    await tick(h, app, t0 + 31 * MIN)
    await h.wait_text(lambda t: "Tidied what I could." in t)
    denied = await h.wait_text(lambda t: t.startswith("🔒"))
    assert "Denied by the run's permission profile (tests)" in denied
    assert "Bash rm -rf build; Bash pytest -q --basetemp=build; Edit " in denied  # the plain pytest -q ran
    assert not any("🔐" in str(m.get("text", "")) for m in h.tg.messages(OWNER).values())  # no approval card
    assert (h.project / "build").is_dir() and notes.read_text(encoding="utf-8") == "old notes\n"
    results = tool_results(h.claude.bodies[-1])
    assert len(results) == 5
    assert "permission profile (tests)" in results[0]  # rm: denied
    assert "permission profile" not in results[1]  # pytest -q: allowed (it ran, whatever it found)
    assert "permission profile (tests)" in results[2]  # pytest --basetemp=build would remove build/
    assert "permission profile (tests)" in results[4]  # Edit: denied

    h.claude.enqueue(read, edit, "Edited the notes.")
    await command(h, app, "/at 2h profile=edit fix the notes")
    await tick(h, app, t0 + 2 * HOUR + 5)
    await h.wait_text(lambda t: "Edited the notes." in t)
    assert notes.read_text(encoding="utf-8") == "new notes\n"
    assert sum(t.startswith("🔒") for t in h.texts()) == 1  # nothing denied this time
    assert not any("🔐" in str(m.get("text", "")) for m in h.tg.messages(OWNER).values())


@pytest.mark.parametrize(
    ("tool", "command", "allowed_in"),
    [
        ("Bash", "pytest -q", {"tests", "edit", "full"}),
        ("Bash", "make test -j4", {"tests", "edit", "full"}),
        ("Bash", "ruff format --check .", {"tests", "edit", "full"}),
        ("Bash", "rm -rf build", {"full"}),
        ("Bash", "pytest -q && git push", {"full"}),
        ("Bash", "pytest --basetemp=/home/owner", {"full"}),
        ("Bash", "git log -1 --format=%B --output=/home/owner/.bashrc", {"full"}),
        ("Bash", "ruff check --fix .", {"full"}),
        ("Bash", "ruff format .", {"full"}),
        ("Bash", "make test PYTEST=sh", {"full"}),
        ("Bash", "go test -exec=rm ./...", {"full"}),
        ("Edit", "", {"edit", "full"}),
        ("Write", "", {"edit", "full"}),
        ("WebFetch", "", {"full"}),
    ],
)
def test_each_profile_allows_what_it_says(tool: str, command: str, allowed_in: set[str]) -> None:
    request = ApprovalRequest("s", tool, {"command": command} if command else {"file_path": "/x"})
    assert {p for p in PROFILES if ProfileGate(p).allows(request)} == allowed_in


async def test_fires_missed_while_down_run_once_at_start_with_a_note(h: Harness) -> None:
    now = time.time()
    anchor = datetime.fromtimestamp(now, UTC) - timedelta(hours=5, minutes=30)
    spec = Spec.interval(timedelta(hours=1), anchor)
    first = (spec.anchor or anchor).timestamp() + HOUR  # 4h30m ago; fires every hour since
    settings = h.settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    state = await BotState.open(settings.db_path)
    # Every 2 minutes for 200 days: more missed fires than the scheduler counts; still one run.
    often = Spec.interval(timedelta(minutes=2), datetime.fromtimestamp(now, UTC) - timedelta(days=200))
    try:
        made = await state.add_schedule(
            OWNER, OWNER, spec.text, "check the nightly", "billing", "", "tests", None, first
        )
        busy = await state.add_schedule(
            OWNER,
            OWNER,
            often.text,
            "poll the queue",
            "billing",
            "",
            "tests",
            None,
            (often.anchor or anchor).timestamp() + 2 * MIN,
        )
    finally:
        await state.close()
    h.claude.default = lambda body: "Polled." if "poll the queue" in last_user_text(body) else "Nightly looks fine."
    app = await h.start()  # the real clock: its loop fires what is due at start
    note = await h.wait_text(lambda t: f"Schedule #{made.id} was due" in t)
    assert "while the bot was down" in note and "4 earlier fire(s) missed too" in note
    other = await h.wait_text(lambda t: f"Schedule #{busy.id} was due" in t)
    assert "more than 100000 earlier fire(s) missed too" in other
    due = app.scheduler.next_after(often, now - 2 * MIN)
    assert due is not None and local_time(due, app.scheduler.tz) in other  # the newest fire due is the one run
    await h.wait_text(lambda t: "Nightly looks fine." in t)
    await h.wait_text(lambda t: "Polled." in t)
    await settle(h, app)
    assert h.claude.arrivals == 2
    assert sum("while the bot was down" in t for t in h.texts()) == 2
    assert len(await app.services.state.schedule_fires(busy.id)) == 1  # type: ignore[union-attr]
    stored = await app.services.state.schedule(made.id)  # type: ignore[union-attr]
    assert stored is not None and stored.next_at is not None and stored.next_at > time.time()
    assert stored.next_at - time.time() < HOUR and stored.state == "active"
    [(fire_at, _, missed)] = await app.services.state.schedule_fires(made.id)  # type: ignore[union-attr]
    assert missed == 4 and fire_at == first + 4 * HOUR
    assert await app.scheduler.tick(now) == []  # nothing due at start is left


async def test_a_spoken_schedule_is_echoed_and_made_only_when_confirmed(h: Harness) -> None:
    app, _ = await started(h)
    assert await app.schedule_commands.offer_spoken(OWNER, OWNER, "every weekday at nine run the tests")
    offer = await h.wait_message(lambda m: "Heard a schedule" in str(m.get("text", "")))
    assert "every weekday at 09:00" in offer["text"] and "run the tests" in offer["text"]
    assert "Schedule it" in str(offer["reply_markup"]) and "Cancel" in str(offer["reply_markup"])
    assert await app.services.state.schedules(OWNER) == []  # type: ignore[union-attr]
    await press(h, app, offer, "Schedule it")
    made = await h.wait_text(lambda t: t.startswith("🗓 Schedule #1"))
    assert "every weekday at 09:00" in made and "run the tests" in made
    [sched] = await app.services.state.schedules(OWNER)  # type: ignore[union-attr]
    assert sched.spec == "every weekday at 09:00" and sched.text == "run the tests" and sched.profile == "tests"

    sent = len(h.tg.sent)
    assert not await app.schedule_commands.offer_spoken(OWNER, OWNER, "at the end, add logging")
    assert len(h.tg.sent) == sent  # not a schedule: nothing is offered

    assert await app.schedule_commands.offer_spoken(OWNER, OWNER, "in two hours check the deploy")
    offer = await h.wait_message(lambda m: "check the deploy" in str(m.get("text", "")))
    await press(h, app, offer, "Cancel")
    assert len(await app.services.state.schedules(OWNER)) == 1  # type: ignore[union-attr]

    reply = await command(h, app, "/at 30m @macupos_test_bot note the time")  # the bot's name: no branch
    assert reply.startswith("🗓 Schedule #2") and " in @" not in reply
    assert await app.services.state.branches(OWNER) == []  # type: ignore[union-attr]
    assert h.claude.arrivals == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/at 25:00 x", "25:00"),
        ("/every 0 99 * * * x", "99"),
        ("/at 30m", "What should I do"),
        ("/at 30m profile=tests", "say what to run"),
        ("/at 30m profile=root do it", "known: read, tests, edit, full"),
        ("/every 30s ping", "too often"),
        ("/at 30m budget=lots do it", "not an amount of dollars"),
    ],
)
async def test_a_schedule_it_cannot_read_is_explained_and_nothing_is_made(h: Harness, text: str, expected: str) -> None:
    app, _ = await started(h)
    reply = await command(h, app, text)
    assert reply.startswith("🗓") and expected in reply, reply
    assert "Schedule #" not in reply
    assert await app.services.state.schedules(OWNER) == []  # type: ignore[union-attr]
