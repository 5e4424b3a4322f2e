"""Branches across a crash: `macupos bot` killed (SIGKILL) while three ``@branch`` sessions run side by side and
a fourth waits for a slot. The next start reports each cut session with Resume, keeps every worktree, re-runs
nothing cut by itself, runs what only waited once; Resume runs a branch's instruction again in its worktree.
(The real bot as a subprocess, then restarted in-process, against the doubles; real git.)"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.app import BotApp
from bot.state import BotState
from relay.process import kill_marked
from tests.bot.app_harness import OWNER, Harness, button, buttons, harness
from tests.bot.test_app_branches import commit_file, cwd_of, git, worktree
from tests.cli_env import MACUPOS
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble

BRANCHES = ("one", "two", "three")
_JOB = re.compile(r"job (one|two|three|four|five)\b")
GROUP = -1001234567890  # a forum supergroup
_RESUME_NOTE = "restarted while you were working"


def _job(body: Mapping[str, Any]) -> str:
    found = _JOB.findall(last_user_text(body))
    return found[-1] if found else ""


def _answer(body: Mapping[str, Any]) -> str:
    """Says where it ran, what it was asked, and whether it was a resume: "[two] resumed job two"."""
    resumed = "resumed " if _RESUME_NOTE in last_user_text(body) else ""
    return f"[{Path(cwd_of(body)).name}] {resumed}job {_job(body)}"


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_MAX_PARALLEL="3") as hh:
        git(hh.project, "init", "-q", "-b", "main")
        commit_file(hh.project, "app.py", "print('hello')\n", "first")
        hh.write_config_toml()
        hh.claude.default = _answer
        yield hh


async def settled(h: Harness, app: BotApp) -> None:
    """Every update handled and every lane's worker done."""
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)


def _db(h: Harness) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(f"file:{h.home / 'bot.db'}?mode=ro", uri=True))


def _cards(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.tg.messages(OWNER).values() if "I was restarted while working" in str(m.get("text", ""))]


async def test_branches_cut_by_a_kill_are_reported_each_with_resume_and_a_waiting_one_runs_once(h: Harness) -> None:
    h.claude.hold = 3
    log_path = h.tmp / "bot.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(MACUPOS), "-v", "bot", env=h.env, cwd=str(h.tmp), stdout=log, stderr=log
        )
        try:
            for b in BRANCHES:
                h.tg.push_message(OWNER, OWNER, f"@{b} run job {b}")
            # All three sessions are in flight at once, each held at the model.
            await h.tg.wait_for(lambda: h.claude.arrivals >= 3, timeout=120)
            assert {cwd_of(body) for body in h.claude.arrived} == {str(worktree(h, b)) for b in BRANCHES}
            h.tg.push_message(OWNER, OWNER, "@four run job four")
            await h.wait_text(lambda t: "Waiting for a free slot: 1 in line" in t and "four" in t)
        finally:
            exited = process.returncode
            with contextlib.suppress(ProcessLookupError):
                process.kill()  # SIGKILL: no cleanup of any kind, as a power cut would
            await process.wait()
            if exited is not None:  # died by itself: its log says why
                raise AssertionError(f"the bot exited ({exited}): {log_path.read_text(errors='replace')[-3000:]}")
    kill_marked("CLAUDE_CONFIG_DIR", str(h.tmp / "claude-home" / ".claude"))  # the CLIs it left
    assert h.claude.arrivals == 3  # the fourth never reached the model
    h.claude.release.set()  # the dead sessions' held requests go (nobody reads their answers)
    before = len(h.claude.arrived)

    app = await h.start()
    assert app.services is not None
    # The fourth only waited: it runs once, by itself, in its own worktree.
    await h.wait_text(lambda t: "[four] job four" in t)
    # One card per cut session, naming its branch, each with Resume; nothing cut was re-run.
    await h.tg.wait_for(lambda: len(_cards(h)) >= 3, timeout=60)
    await settled(h, app)
    cards = {b: [c for c in _cards(h) if f"in branch {b} " in c["text"]] for b in BRANCHES}
    assert all(len(found) == 1 for found in cards.values()), [c["text"] for c in _cards(h)]
    assert len(_cards(h)) == 3
    for b, (card,) in cards.items():
        assert f"run job {b}" in card["text"] and "Nothing has been re-run" in card["text"]
        assert "Resume" in " ".join(buttons(card))
    after_restart = h.claude.arrived[before:]
    assert [(_job(body), cwd_of(body)) for body in after_restart] == [("four", str(worktree(h, "four")))]
    assert not any("[four]" in t for t in h.texts() if "resumed" in t)

    # Every worktree is still there, on its own branch.
    listed = git(h.project, "branch", "--list", "--format=%(refname:short)").split()
    for b in (*BRANCHES, "four"):
        assert worktree(h, b).is_dir() and b in listed
        assert git(worktree(h, b), "rev-parse", "--abbrev-ref", "HEAD").strip() == b

    # Resume on each card runs that branch's instruction once more, in its worktree, and nothing else.
    taps = {b: (card["message_id"], button(card, "Resume")) for b, (card,) in cards.items()}
    for message_id, resume in taps.values():
        h.tg.push_callback(OWNER, OWNER, message_id, resume)
    for b in BRANCHES:
        await h.wait_text(lambda t, b=b: f"[{b}] resumed job {b}" in t)
    await settled(h, app)
    resumed = h.claude.arrived[before + 1 :]
    assert sorted((_job(body), cwd_of(body)) for body in resumed) == sorted(
        (b, str(worktree(h, b))) for b in BRANCHES
    ), [last_user_text(body)[-200:] for body in resumed]
    assert all(_RESUME_NOTE in last_user_text(body) for body in resumed)
    assert all(buttons(card) == {} for (card,) in cards.values())  # each card lost its buttons
    # A second tap on a spent card (a stale client) does nothing.
    h.tg.push_callback(OWNER, OWNER, *taps["one"])
    await settled(h, app)
    assert len(h.claude.arrived) == before + 4

    with _db(h) as conn:
        per_lane = conn.execute(
            "SELECT branch, count(*) FROM runs WHERE status = 'running' GROUP BY branch HAVING count(*) > 1"
        )
        assert per_lane.fetchall() == []
        runs = conn.execute("SELECT branch, status FROM runs ORDER BY id").fetchall()
        assert sorted(runs) == sorted(
            [(b, "resumed") for b in BRANCHES] + [(b, "done") for b in BRANCHES] + [("four", "done")]
        ), runs
        assert conn.execute("SELECT status FROM queue WHERE branch = 'four'").fetchall() == [("done",)]
        assert conn.execute("SELECT count(*) FROM queue WHERE status IN ('queued', 'running', 'held')").fetchone() == (
            0,
        )


async def test_an_at_instruction_cut_before_its_update_was_done_runs_once_and_gets_no_card(h: Harness) -> None:
    # The process died after "@four …" was stored in its lane's queue (waiting for a slot) and before its
    # update was marked handled: the queue runs it at the next start; the update must not also be
    # reported as a cut run with a Resume that would run it a second time.
    settings = h.settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    state = await BotState.open(settings.db_path)
    try:
        await state.add_branch(OWNER, "four", "billing", "main", str(worktree(h, "four")))
        # Telegram delivers it again (never confirmed): the bot finds it claimed and does not handle it twice.
        update = h.tg.push_message(OWNER, OWNER, "@four run job four")
        assert await state.claim_update(update["update_id"], OWNER, OWNER, "message", update)
        await state.mark_update(update["update_id"], "handling")
        await state.enqueue(OWNER, "run job four", "text", status="running", branch="four")
    finally:
        await state.close()

    app = await h.start()
    assert app.services is not None
    await h.wait_text(lambda t: "[four] job four" in t)
    await settled(h, app)
    assert [(_job(body), cwd_of(body)) for body in h.claude.arrived] == [("four", str(worktree(h, "four")))]
    assert _cards(h) == [] and not any("I stopped while handling" in t for t in h.texts())


async def test_in_a_forum_a_message_cut_in_a_branch_topic_is_reported_there_and_resumes_in_the_branch(
    h: Harness,
) -> None:
    h.tg.make_forum(GROUP)
    app = await h.start()
    h.tg.push_message(OWNER, GROUP, "@five run job five")
    await h.tg.wait_for(lambda: any("[five] job five" in t for t in h.tg.texts(GROUP)), timeout=120)
    await settled(h, app)
    tid = next(tid for tid, t in h.tg.topics(GROUP).items() if t["name"] == "🌿 five")
    await app.stop()
    # The next process died while handling a plain message written in five's topic, before it was queued.
    # Telegram gave it the implicit reply to the topic's first message: that is no reply of the owner's.
    update = h.tg.push_message(OWNER, GROUP, "now redo job five", message_thread_id=tid)
    assert update["message"]["reply_to_message"]["message_id"] == tid
    state = await BotState.open(h.settings().db_path)
    try:
        assert await state.claim_update(update["update_id"], GROUP, OWNER, "message", update)
        await state.mark_update(update["update_id"], "handling")
    finally:
        await state.close()

    before = len(h.claude.arrived)
    app = await h.start()
    card = await h.wait_message(lambda m: "I was restarted while working" in str(m.get("text", "")), chat_id=GROUP)
    assert card.get("message_thread_id") == tid and "in branch five" in card["text"], card
    assert "now redo job five" in card["text"]
    await settled(h, app)
    assert len(h.claude.arrived) == before  # nothing re-run without the owner's word
    h.tg.push_callback(OWNER, GROUP, card["message_id"], button(card, "Resume"))
    await h.tg.wait_for(lambda: any("[five] resumed job five" in t for t in h.tg.texts_in(GROUP, tid)), timeout=120)
    await settled(h, app)
    assert [cwd_of(body) for body in h.claude.arrived[before:]] == [str(worktree(h, "five"))]
