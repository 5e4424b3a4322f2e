"""Prompts answered by voice, end to end: espeak-ng notes, the real Whisper model, the real tap handler.

Approvals (allow, deny, allow for this session), a transcript waiting for Run (run, cancel) and a handoff
review (keep, forget); an ambiguous note asks again and changes nothing; a stranger's note is ignored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import FAST, FRIEND, OWNER, STRANGER, Harness, harness
from tests.bot.conftest import VoiceNote
from tests.bot.voice_harness import approval_waiting, say
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_APPROVAL_TIMEOUT_S="120") as hh:
        yield hh


def echoes(h: Harness) -> list[str]:
    return [t for t in h.texts() if t.startswith("🎙")]


@pytest.mark.parametrize(
    ("said", "label", "verdict", "made"),
    [
        ("allow", "Allow", "✅ allowed", True),
        ("deny", "Deny", "⛔ denied", False),
        ("allow for this session", "Allow for this session", "✅ allowed for this session", True),
    ],
)
async def test_an_approval_is_answered_by_voice_like_its_button(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber, said: str, label: str, verdict: str, made: bool
) -> None:
    _, card = await approval_waiting(h, transcriber, "voiced.txt")
    say(h, voice_note, said)
    echo = await h.wait_text(lambda t: t.startswith("🎙"))
    assert echo.endswith(f"→ taken as: <b>{label}</b>"), echo
    await h.wait_text(lambda t: t == "Finished.")
    assert h.tg.messages(OWNER)[card["message_id"]]["text"].endswith(verdict)
    assert (h.project / "voiced.txt").exists() is made
    tool_result = h.claude.bodies[-1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["is_error"] is not made
    assert echoes(h) == [echo]  # nothing else was said: the press did what it stood for


async def test_an_ambiguous_answer_asks_again_and_changes_nothing_then_a_clear_one_counts(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    app, card = await approval_waiting(h, transcriber, "unsure.txt")
    say(h, voice_note, "allow, no, deny")
    asked = await h.wait_text(lambda t: t.startswith("🎙"))
    await h.wait_handled(app)
    assert "not sure which you meant; nothing was changed" in asked and '"allow for this session"' in asked
    assert "🔐" in h.tg.messages(OWNER)[card["message_id"]]["text"]  # still waiting, buttons and all
    assert h.claude.arrivals == 1 and not (h.project / "unsure.txt").exists()
    say(h, voice_note, "deny")
    await h.wait_text(lambda t: t == "Finished.")
    assert h.tg.messages(OWNER)[card["message_id"]]["text"].endswith("⛔ denied")
    assert not (h.project / "unsure.txt").exists()


async def test_only_the_prompts_owner_answers_it_by_voice(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    app, card = await approval_waiting(h, transcriber, "owned.txt", "The friend's turn.")
    say(h, voice_note, "allow", user=STRANGER)  # not on the allowlist: never reaches a handler
    await h.wait_handled(app)
    assert h.tg.calls("getFile") == [] and echoes(h) == []
    say(h, voice_note, "allow", user=FRIEND)  # on the allowlist, but the prompt is not theirs: an instruction
    await h.wait_text(lambda t: t.startswith("📥 Queued"))
    assert "🔐" in h.tg.messages(OWNER)[card["message_id"]]["text"]
    assert not (h.project / "owned.txt").exists()
    say(h, voice_note, "allow")
    await h.wait_text(lambda t: t == "Finished.")
    assert (h.project / "owned.txt").exists()


@pytest.mark.parametrize(("said", "runs"), [("yes, run it", True), ("cancel", False)])
async def test_a_transcript_waiting_for_run_is_answered_by_voice(
    tmp_path: Path,
    telegram_double: TelegramDouble,
    voice_note: VoiceNote,
    transcriber: Transcriber,
    said: str,
    runs: bool,
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_VOICE_CONFIRM="1") as h:
        h.claude.enqueue("Checked the billing logs.")
        app = await h.start(transcriber=transcriber)
        say(h, voice_note, "check the billing logs")
        prompt = await h.wait_text(lambda t: t.startswith("🎙") and "Run it" in t)
        await h.wait_handled(app)
        assert h.claude.arrivals == 0
        say(h, voice_note, said)
        echo = await h.wait_text(lambda t: "taken as" in t)
        assert echo.endswith("<b>Run</b>" if runs else "<b>Cancel</b>"), echo
        if runs:
            await h.wait_text(lambda t: t == "Checked the billing logs.")
            assert "billing" in last_user_text(h.claude.bodies[0]).lower()
        await h.wait_handled(app)
        assert app.services is not None
        assert (await app.services.state.chat(OWNER)).pending_transcript == ""
        assert h.claude.arrivals == (1 if runs else 0)
        assert "check the billing logs" in prompt.lower()


@pytest.mark.parametrize(
    ("said", "state", "mark"), [("keep", "kept", "👍 Kept."), ("forget", "forgotten", "🗑 Forgotten")]
)
async def test_a_handoff_review_is_answered_by_voice(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber, said: str, state: str, mark: str
) -> None:
    h.claude.enqueue("Deleted the legacy exporter module.")
    app = await h.start(transcriber=transcriber)
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "delete the legacy exporter module")
    card = await h.wait_message(lambda m: "📒" in str(m.get("text", "")))  # the session ended: its handoff is up
    session_id = (await app.services.state.chat(OWNER)).session_id
    say(h, voice_note, said)
    echo = await h.wait_text(lambda t: "taken as" in t)
    assert echo.endswith(f"<b>{said.capitalize()}</b>"), echo
    await h.wait_message(lambda m: m["message_id"] == card["message_id"] and mark in str(m.get("text", "")))
    review = await app.services.state.get_review(session_id)
    assert review is not None and review.state == state
    handoffs = [row.session_id for row in await app.services.eywa.list_handoffs(limit=50)]
    assert (session_id in handoffs) is (state == "kept")
    assert h.claude.arrivals == 1  # an answer is never an instruction


async def test_a_review_card_is_no_answer_target_once_another_instruction_ran(
    tmp_path: Path, telegram_double: TelegramDouble, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    async with harness(tmp_path, telegram_double) as h:
        h.claude.enqueue("Deleted the legacy exporter module.", "Noted.", "Forget what?")
        # Sessions stay live between instructions, so only /new posts a handoff card.
        app = await h.start(transcriber=transcriber, tuning=replace(FAST, session_idle_s=600.0))
        assert app.services is not None
        h.tg.push_message(OWNER, OWNER, "delete the legacy exporter module")
        await h.wait_text(lambda t: t == "Deleted the legacy exporter module.")
        first = (await app.services.state.chat(OWNER)).session_id
        h.tg.push_message(OWNER, OWNER, "/new")
        await h.wait_message(lambda m: "📒" in str(m.get("text", "")))
        h.tg.push_message(OWNER, OWNER, "thanks")  # a new instruction ran: the card is history now
        await h.wait_text(lambda t: t == "Noted.")
        await h.wait_handled(app)
        say(h, voice_note, "forget")
        await h.wait_text(lambda t: t == "Forget what?")  # a normal instruction, not an answer
        assert not [t for t in h.texts() if "taken as" in t]
        review = await app.services.state.get_review(first)
        assert review is not None and review.state == "pending"
        assert h.claude.arrivals == 3  # unprimed, tiny.en may write "So get." for it: it ran as said
