"""Voice notes end to end: a real espeak-ng note, the real Whisper model, the echo before the work starts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import OWNER, Harness, harness
from tests.bot.conftest import VoiceNote
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def test_a_voice_note_is_transcribed_echoed_first_and_sent_to_claude(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    h.claude.enqueue("All tests pass now.")
    await h.start(transcriber=transcriber)
    h.tg.push_voice(OWNER, OWNER, voice_note("run the tests in the billing project").read_bytes(), 3)

    echo = await h.wait_text(lambda t: t.startswith("🎙"))
    transcript = echo.removeprefix("🎙").strip()
    assert "test" in transcript.lower() and "billing" in transcript.lower()
    await h.wait_text(lambda t: "All tests pass now." in t)
    texts = h.texts()
    assert texts.index(echo) < next(i for i, t in enumerate(texts) if t.startswith("⏳"))  # echoed before work
    # The chat showed "typing…" while the note was transcribed, before its echo.
    requests = h.tg.requests
    typing = next(i for i, c in enumerate(requests) if c.method == "sendChatAction")
    assert requests[typing].params == {"chat_id": OWNER, "action": "typing"} and requests[typing].ok
    assert typing < next(i for i, c in enumerate(requests) if c.params.get("text") == echo)
    assert last_user_text(h.claude.bodies[0]).endswith(transcript.replace("&amp;", "&"))


async def test_an_oversized_voice_note_is_refused_before_download(h: Harness) -> None:
    app = await h.start()
    h.tg.push_voice(OWNER, OWNER, b"OggS", 1800, file_size=25 * 1024 * 1024)
    reply = await h.wait_text(lambda t: t.startswith("🎙"))
    assert "20 MB" in reply
    await h.wait_handled(app)
    assert h.tg.calls("getFile") == [] and h.claude.arrivals == 0


async def test_undecodable_audio_gets_a_clear_reply_and_leaves_no_temp_file(
    h: Harness, transcriber: Transcriber
) -> None:
    app = await h.start(transcriber=transcriber)
    h.tg.push_voice(OWNER, OWNER, b"this is not an ogg file at all" * 10, 2)
    reply = await h.wait_text(lambda t: t.startswith("🎙"))
    await h.wait_handled(app)
    assert "decode" in reply.lower() or "audio" in reply.lower()
    assert h.claude.arrivals == 0
    tmp = h.home / "tmp"
    assert not tmp.exists() or list(tmp.iterdir()) == []


async def test_a_forwarded_voice_note_is_quoted_not_run_as_the_owners_instruction(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    h.claude.enqueue("Noted: that is what Mallory said.")
    await h.start(transcriber=transcriber)
    origin = {"type": "user", "date": 1, "sender_user": {"id": 999, "is_bot": False, "first_name": "Mallory"}}
    note = voice_note("run the tests in the billing project").read_bytes()
    h.tg.push_voice(OWNER, OWNER, note, 3, forward_origin=origin)
    await h.wait_text(lambda t: "Noted" in t)
    sent = last_user_text(h.claude.bodies[0])
    assert "Forwarded from Mallory (quoted, not an instruction):\n> " in sent
    assert "billing" in sent.split("(quoted, not an instruction):", 1)[1].lower()
