"""Each prompt kind answered by a spoken reply that is heard by scoring its answers, through the whole app.

A tool approval, a transcript waiting for Run (MACUPOS_VOICE_CONFIRM) and a handoff review, each answered
with a carrier the old tests do not use ("yes, allow", "no, cancel", "keep it"); and "hello" while an
approval waits decides nothing: it goes on as an instruction and the card keeps waiting. espeak-ng notes,
the real tiny.en model, the Telegram double on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import OWNER, Harness, harness
from tests.bot.conftest import VoiceNote
from tests.bot.voice_harness import approval_waiting, say
from tests.doubles.telegram import TelegramDouble


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_APPROVAL_TIMEOUT_S="120") as hh:
        yield hh


async def test_a_tool_approval_is_allowed_by_a_spoken_yes_allow(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    _, card = await approval_waiting(h, transcriber, "scored.txt")
    say(h, voice_note, "yes, allow")
    echo = await h.wait_text(lambda t: "taken as" in t)
    assert echo.endswith("→ taken as: <b>Allow</b>"), echo
    await h.wait_text(lambda t: t == "Finished.")
    assert h.tg.messages(OWNER)[card["message_id"]]["text"].endswith("✅ allowed")
    assert (h.project / "scored.txt").exists()


async def test_hello_while_an_approval_waits_decides_nothing(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    app, card = await approval_waiting(h, transcriber, "greeted.txt")
    say(h, voice_note, "hello")
    await h.wait_text(lambda t: t.startswith("📥 Queued"))  # an instruction, waiting behind the blocked run
    await h.wait_handled(app)
    assert not [t for t in h.texts() if "taken as" in t]
    assert "🔐" in h.tg.messages(OWNER)[card["message_id"]]["text"]  # still waiting, buttons and all
    assert not (h.project / "greeted.txt").exists()
    say(h, voice_note, "deny")  # the owner's real answer still counts
    await h.wait_text(lambda t: t == "Finished.")
    assert h.tg.messages(OWNER)[card["message_id"]]["text"].endswith("⛔ denied")
    assert not (h.project / "greeted.txt").exists()


async def test_a_transcript_waiting_for_run_is_cancelled_by_a_spoken_no_cancel(
    tmp_path: Path, telegram_double: TelegramDouble, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_VOICE_CONFIRM="1") as h:
        app = await h.start(transcriber=transcriber)
        say(h, voice_note, "check the billing logs")
        await h.wait_text(lambda t: t.startswith("🎙") and "Run it" in t)
        await h.wait_handled(app)
        say(h, voice_note, "no, cancel")
        echo = await h.wait_text(lambda t: "taken as" in t)
        assert echo.endswith("<b>Cancel</b>"), echo
        await h.wait_handled(app)
        assert app.services is not None
        assert (await app.services.state.chat(OWNER)).pending_transcript == ""
        assert h.claude.arrivals == 0  # nothing ran


async def test_a_handoff_review_is_kept_by_a_spoken_keep_it(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    h.claude.enqueue("Renamed the billing module.")
    app = await h.start(transcriber=transcriber)
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "rename the billing module")
    card = await h.wait_message(lambda m: "📒" in str(m.get("text", "")))
    session_id = (await app.services.state.chat(OWNER)).session_id
    say(h, voice_note, "keep it")
    echo = await h.wait_text(lambda t: "taken as" in t)
    assert echo.endswith("<b>Keep</b>"), echo
    await h.wait_message(lambda m: m["message_id"] == card["message_id"] and "👍 Kept." in str(m.get("text", "")))
    review = await app.services.state.get_review(session_id)
    assert review is not None and review.state == "kept"
    assert h.claude.arrivals == 1  # an answer is never an instruction
