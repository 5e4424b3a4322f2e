"""Exactly once across a crash: `macupos bot` killed mid-run; the next start reports it, re-runs nothing, resumes
on the owner's word; stored updates are handled (never started) or reported (cut mid-way: a text instruction
with its Resume button)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.state import BotState
from relay.process import kill_marked
from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.cli_env import MACUPOS
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


def _message(update_id: int, text: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "message_id": update_id,
        "date": 1_700_000_000,
        "chat": {"id": OWNER, "type": "private", "first_name": "owner"},
        "from": {"id": OWNER, "is_bot": False, "first_name": "owner"},
        "text": text,
    }
    if text.startswith("/"):
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
    return {"update_id": update_id, "message": message}


async def test_a_bot_killed_mid_run_reports_it_at_restart_and_resumes_only_when_asked(h: Harness) -> None:
    h.write_config_toml()
    h.claude.hold = 1
    log = (h.tmp / "bot.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        str(MACUPOS), "bot", env=h.env, cwd=str(h.tmp), stdout=log, stderr=log
    )
    try:
        h.tg.push_message(OWNER, OWNER, "run the nightly import")
        await asyncio.wait_for(h.claude.held.wait(), 90)
    finally:
        process.kill()  # SIGKILL: no cleanup of any kind, as a power cut would
        await process.wait()
        log.close()
    kill_marked("CLAUDE_CONFIG_DIR", str(h.tmp / "claude-home" / ".claude"))  # the CLI orphan
    h.claude.release.set()

    # Answer by content: the killed CLI's held request is answered too, and must not take this reply.
    h.claude.default = lambda body: "Resumed and finished the import." if "restarted" in last_user_text(body) else "?"
    app = await h.start()
    assert app.services is not None
    card = await h.wait_message(lambda m: "restarted" in str(m.get("text", "")))
    assert "run the nightly import" in card["text"] and "Nothing has been re-run" in card["text"]
    await h.wait_handled(app)
    assert h.claude.arrivals == 1  # nothing re-ran by itself
    runs = await app.services.state.recent_runs(OWNER)
    assert [r.status for r in runs] == ["interrupted"]

    h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "Resume"))
    await h.wait_text(lambda t: "Resumed and finished" in t)
    assert h.claude.arrivals == 2
    resumed = last_user_text(h.claude.bodies[-1])
    assert "restarted" in resumed and "run the nightly import" in resumed
    await h.wait_message(lambda m: "📒" in str(m.get("text", "")))
    statuses = [r.status for r in await app.services.state.recent_runs(OWNER)]
    assert statuses == ["done", "resumed"]


async def test_stored_updates_are_handled_if_never_started_and_reported_if_cut(h: Harness) -> None:
    settings = h.settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    state = await BotState.open(settings.db_path)
    try:
        rows = (
            (900, "/status", "received"),
            (901, "deploy it to production", "handling"),
            (902, "/remember the deploy key rotates monthly", "handling"),
        )
        for update_id, text, status in rows:
            payload = _message(update_id, text)
            assert await state.claim_update(update_id, OWNER, OWNER, "message", payload)
            await state.mark_update(update_id, status)  # type: ignore[arg-type]
    finally:
        await state.close()

    app = await h.start()
    assert app.services is not None
    await h.wait_text(lambda t: t.startswith("📁 Project"))  # the stored /status ran now
    # A text instruction cut before it was queued or run is reported like a cut run: Resume runs it once.
    card = await h.wait_message(lambda m: "deploy it to production" in str(m.get("text", "")))
    assert "Nothing has been re-run" in card["text"] and button(card, "Resume")
    cut_command = await h.wait_text(lambda t: "/remember the deploy key" in t)  # a command is only reported
    assert "not re-run" in cut_command
    await h.wait_handled(app)
    assert h.claude.arrivals == 0
    done, cut_update = (await app.services.state.get_update(900)), (await app.services.state.get_update(901))
    assert done is not None and done.status == "done"
    assert cut_update is not None and cut_update.status == "interrupted"

    h.claude.default = "Deployed."
    h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "Resume"))
    await h.wait_text(lambda t: "Deployed." in t)
    assert h.claude.arrivals == 1 and "deploy it to production" in last_user_text(h.claude.bodies[-1])


async def test_instructions_left_in_the_queue_between_two_runs_run_once_each_after_a_restart(h: Harness) -> None:
    # The process died after one run ended and before the next queued instruction's run was recorded.
    settings = h.settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    state = await BotState.open(settings.db_path)
    try:
        first = await state.enqueue(OWNER, "rename the fixtures", "text")
        await state.finish_run(await state.start_run(OWNER, "rename the fixtures", queue_id=first), "done")
        await state.mark_queued(first, "done")
        taken = await state.enqueue(OWNER, "run the linters", "text")
        await state.mark_queued(taken, "running")
        await state.enqueue(OWNER, "then push", "text")
    finally:
        await state.close()

    h.claude.default = lambda body: f"did: {last_user_text(body)}"
    app = await h.start()
    assert app.services is not None
    await h.wait_text(lambda t: "did: then push" in t)
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)
    asked = [x for b in h.claude.bodies for x in ("run the linters", "then push") if x in last_user_text(b)]
    assert asked == ["run the linters", "then push"], asked
    assert not any("restarted" in t for t in h.texts(OWNER))  # nothing was cut: no card
    assert await app.services.state.queued(OWNER) == []
    statuses = [r.status for r in await app.services.state.recent_runs(OWNER)]
    assert statuses == ["done", "done", "done"]
