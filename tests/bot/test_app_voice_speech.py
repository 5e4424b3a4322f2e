"""Spoken answers end to end: the real Piper voice, the voice note after the text answer, /speak, and a bot
without the speech extra."""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import av
import pytest

from bot.app import BotApp
from bot.voice.speak import Speaker
from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import OWNER, Harness, harness
from tests.bot.conftest import VoiceNote
from tests.doubles.telegram import TelegramDouble

ANSWER = "All the billing tests pass now. Should I push the branch?"


@pytest.fixture(scope="module")
def speaker() -> Iterator[Speaker]:
    """The bundled joe voice, loaded once for this module (the bot only borrows it)."""
    s = Speaker()
    yield s
    s.close()


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def spoken(app: BotApp) -> None:
    """Every voice note under way sent or dropped (bounded): first the runs' workers finish (a voice note is
    started after its text answer is out and recorded), then the notes."""
    assert app.spoken is not None and app.sessions is not None
    for _ in range(2400):  # bounded: 120 s
        if app.sessions.idle:
            break
        await asyncio.sleep(0.05)
    await asyncio.wait_for(app.spoken.idle(), 120)


def probe(ogg: bytes) -> tuple[str, int, int, float]:
    """Codec, sample rate, channels and decoded length of an OGG file, as FFmpeg (PyAV) reads it."""
    with av.open(io.BytesIO(ogg), "r") as container:
        assert container.format.name == "ogg"
        stream = container.streams.audio[0]
        samples: int = sum(frame.samples for frame in container.decode(stream))
        return stream.codec_context.name, stream.rate, stream.channels, samples / stream.rate


def position(h: Harness, predicate: Any) -> int:
    """Index in the bot's sends of the first one ``predicate`` accepts."""
    return next(i for i, c in enumerate(h.tg.sent) if c.params.get("chat_id") == OWNER and predicate(c))


async def test_a_voice_instruction_gets_the_text_answer_then_a_voice_note(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber, speaker: Speaker
) -> None:
    h.claude.enqueue(ANSWER)
    app = await h.start(transcriber=transcriber, speaker=speaker)
    h.tg.push_voice(OWNER, OWNER, voice_note("run the tests in the billing project").read_bytes(), 3)
    await h.wait_text(lambda t: "billing tests pass" in t)
    sent = await h.tg.wait_for(lambda: h.sent(OWNER, "sendVoice"), timeout=120)
    await spoken(app)
    assert len(h.sent(OWNER, "sendVoice")) == 1
    voice = sent[0]
    # After the text answer, never before it.
    answer_at = position(h, lambda c: c.method == "sendMessage" and "billing tests pass" in str(c.params.get("text")))
    assert position(h, lambda c: c.method == "sendVoice") > answer_at
    # "recording a voice message…" showed while it was made, after the text answer.
    recording = position(h, lambda c: c.method == "sendChatAction" and c.params.get("action") == "record_voice")
    assert answer_at < recording < position(h, lambda c: c.method == "sendVoice")
    # Telegram shows it as a voice note: OGG/Opus, 48 kHz mono, with its length set.
    message = voice.result
    assert message["voice"]["mime_type"] == "audio/ogg" and "document" not in message
    ogg = h.tg.files[message["voice"]["file_id"]].data
    codec, rate, channels, seconds = probe(ogg)
    assert (codec, rate, channels) == ("opus", 48_000, 1)
    duration = int(voice.params["duration"])
    assert duration >= 1 and abs(seconds - duration) <= 1.0
    assert 2.0 < seconds < 30.0


async def test_speak_on_speaks_typed_answers_and_speak_off_stops_every_voice_note(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber, speaker: Speaker
) -> None:
    h.claude.enqueue("Typed and not spoken.", "Typed and spoken.", "Spoken to nobody.", "Voice but silent.")
    app = await h.start(transcriber=transcriber, speaker=speaker)
    h.tg.push_message(OWNER, OWNER, "/speak")
    await h.wait_text(lambda t: "Spoken answers: for voice notes (the default)" in t)
    h.tg.push_message(OWNER, OWNER, "check the logs")  # typed, default mode: text only
    await h.wait_text(lambda t: t == "Typed and not spoken.")
    await spoken(app)
    assert h.sent(OWNER, "sendVoice") == []

    h.tg.push_message(OWNER, OWNER, "/speak on")
    await h.wait_text(lambda t: t.startswith("🔊 Spoken answers on"))
    h.tg.push_message(OWNER, OWNER, "check the logs again")
    await h.wait_text(lambda t: t == "Typed and spoken.")
    await h.tg.wait_for(lambda: h.sent(OWNER, "sendVoice"), timeout=120)
    await spoken(app)
    assert len(h.sent(OWNER, "sendVoice")) == 1

    h.tg.push_message(OWNER, OWNER, "/speak off")
    await h.wait_text(lambda t: t.startswith("🔇 Spoken answers off"))
    h.tg.push_message(OWNER, OWNER, "and once more")
    await h.wait_text(lambda t: t == "Spoken to nobody.")
    h.tg.push_voice(OWNER, OWNER, voice_note("run the tests in the billing project").read_bytes(), 3)
    await h.wait_text(lambda t: t == "Voice but silent.")  # off: not even a voice instruction is spoken
    await spoken(app)
    assert len(h.sent(OWNER, "sendVoice")) == 1
    h.tg.push_message(OWNER, OWNER, "/speak status")
    await h.wait_text(lambda t: t.startswith("🔇 Spoken answers: off"))
    assert app.services is not None and await app.services.state.speech(OWNER) == "off"  # kept in bot.db


async def test_a_voice_note_that_cannot_be_made_never_touches_the_text_answer(
    h: Harness, tmp_path: Path, voice_note: VoiceNote, transcriber: Transcriber, caplog: pytest.LogCaptureFixture
) -> None:
    # A voice whose files are missing: synthesis fails for real (SpeechError), after the answer went out.
    broken = Speaker(tmp_path / "missing.onnx", tmp_path / "missing.onnx.json")
    try:
        h.claude.enqueue(ANSWER)
        app = await h.start(transcriber=transcriber, speaker=broken)
        h.tg.push_voice(OWNER, OWNER, voice_note("run the tests in the billing project").read_bytes(), 3)
        await h.wait_text(lambda t: "billing tests pass" in t)
        await spoken(app)
        assert h.sent(OWNER, "sendVoice") == []
        assert not [t for t in h.texts() if "Piper" in t or "voice note" in t.lower()]  # nothing said in the chat
        assert "no voice note for the answer" in caplog.text
    finally:
        broken.close()


async def test_without_the_speech_extra_speak_says_how_to_enable_it_and_answers_stay_text(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an installation without the extra sees: piper cannot be imported (no mock of our code).
    monkeypatch.setitem(sys.modules, "piper", None)
    h.claude.enqueue("Done, in text only.")
    app = await h.start(transcriber=transcriber)
    assert app.spoken is not None and not app.spoken.available
    h.tg.push_message(OWNER, OWNER, "/speak on")
    reply = await h.wait_text(lambda t: t.startswith("🔇"))
    assert "not installed" in reply and "pip install 'macupos[speech]'" in reply
    assert app.services is not None and await app.services.state.speech(OWNER) == "voice"  # unchanged
    h.tg.push_message(OWNER, OWNER, "/speak")
    await h.wait_text(lambda t: t.startswith("🔇 Spoken answers are not installed on this bot ("))
    h.tg.push_voice(OWNER, OWNER, voice_note("run the tests in the billing project").read_bytes(), 3)
    await h.wait_text(lambda t: t == "Done, in text only.")
    await spoken(app)
    assert h.sent(OWNER, "sendVoice") == []


async def test_speak_refuses_an_unknown_mode(h: Harness) -> None:
    await h.start()
    h.tg.push_message(OWNER, OWNER, "/speak loudly")
    await h.wait_text(lambda t: t == "Usage: /speak on | off | voice | status")
