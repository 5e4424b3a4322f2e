"""Prompt answers heard by scoring the prompt's few answers against the audio, with the real tiny.en model.

Notes are spoken by espeak-ng (tests/bot/conftest.py); decide()'s rules are checked on given scores too, so
what each threshold does is pinned without a model. The language hint (MACUPOS_VOICE_LANGUAGE) is here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError, VoiceModelError
from bot.settings import BotSettings
from bot.voice.intent import answer_hotwords
from bot.voice.prompt_scoring import MARGIN, SEPARATION, Scored, decide, score_answer
from bot.voice.transcribe import Transcriber
from tests.bot.conftest import VoiceNote


async def _heard(transcriber: Transcriber, voice_note: VoiceNote, said: str, kind: str = "approval") -> tuple:  # type: ignore[type-arg]
    audio = voice_note(said).read_bytes()
    words = answer_hotwords(kind)  # type: ignore[arg-type]
    transcript = await transcriber.transcribe(audio, hotwords=words, names=words)
    scored = await score_answer(transcriber, audio, kind, transcript)  # type: ignore[arg-type]
    return transcript, scored


@pytest.mark.parametrize(
    ("said", "kind", "choice"),
    [("allow", "approval", "allow"), ("no, cancel", "confirmation", "cancel"), ("keep it", "review", "keep")],
)
async def test_a_spoken_answer_scores_best_as_itself(
    transcriber: Transcriber, voice_note: VoiceNote, said: str, kind: str, choice: str
) -> None:
    transcript, scored = await _heard(transcriber, voice_note, said, kind)
    assert scored is not None and scored.choice == choice, scored
    assert scored.score >= scored.heard - MARGIN and scored.score - scored.runner_up >= SEPARATION, scored
    answer = decide(kind, transcript.text, scored)  # type: ignore[arg-type]
    assert (answer.outcome, answer.choice) == ("answer", choice)


@pytest.mark.parametrize("said", ["hello", "what time is it", "run the tests in eywa"])
async def test_speech_that_is_no_answer_is_not_forced_into_one(
    transcriber: Transcriber, voice_note: VoiceNote, said: str
) -> None:
    transcript, scored = await _heard(transcriber, voice_note, said)
    assert decide("approval", transcript.text, scored).outcome != "answer", (transcript.text, scored)


async def test_the_end_of_the_utterance_is_scored_so_a_short_answer_does_not_win_by_being_short(
    transcriber: Transcriber, voice_note: VoiceNote
) -> None:
    audio = voice_note("allow the deploy to staging and then run all the tests").read_bytes()
    allow, long_one, own = await transcriber.score_answers(
        audio, ["Allow.", "Allow the deploy to staging and then run all the tests."]
    )
    assert allow < long_one - MARGIN and allow < own - MARGIN, (allow, long_one, own)


def test_the_scores_decide_only_when_an_answer_explains_the_audio() -> None:
    rescued = Scored("deny", "Deny.", score=-3.0, runner_up=-9.0, heard=-2.0)
    taken = decide("approval", "Hello.", rescued)  # the sound rescues a misheard refusal…
    assert (taken.outcome, taken.choice, taken.heard) == ("answer", "deny", "Deny")
    unsafe = Scored("allow", "Allow.", score=-3.0, runner_up=-9.0, heard=-2.0)
    assert decide("approval", "Hello.", unsafe).outcome == "ambiguous"  # …but never runs a tool on sound alone
    far = Scored("allow", "Allow.", score=-3.0 - MARGIN - 0.5, runner_up=-20.0, heard=-3.0)
    assert decide("approval", "Hello.", far).outcome == "not_an_answer"  # the transcript explains it better
    close = Scored("allow", "Allow.", score=-3.0, runner_up=-3.0 - SEPARATION / 2, heard=-2.0)
    assert decide("approval", "Hello.", close).outcome == "ambiguous"  # two answers sound alike: ask
    conflict = Scored("allow", "Allow.", score=-2.0, runner_up=-9.0, heard=-2.0)
    assert decide("approval", "Deny.", conflict).outcome == "ambiguous"  # words and sound disagree: ask
    assert decide("approval", "Deny.", None).choice == "deny"  # unscored: the words decide, as before


async def test_the_openai_backend_cannot_score_and_says_so() -> None:
    t = Transcriber(backend="openai-whisper")
    try:
        with pytest.raises(VoiceModelError, match="faster-whisper"):
            await t.score_answers(b"", ["Allow."])
    finally:
        t.close()


def _settings(tmp_path: Path, **env: str) -> BotSettings:
    base = {"TELEGRAM_BOT_TOKEN": "1:x", "MACUPOS_ALLOWED_USERS": "1", "MACUPOS_HOME": str(tmp_path)}
    return BotSettings.from_env({**base, **env}, dotenv=None, toml={}, cwd=tmp_path)


def test_the_language_hint_defaults_to_english_and_auto_lets_a_multilingual_model_detect(tmp_path: Path) -> None:
    assert _settings(tmp_path).voice_language == "en"
    assert _settings(tmp_path, MACUPOS_VOICE_LANGUAGE="auto").voice_language is None
    assert _settings(tmp_path, MACUPOS_WHISPER_MODEL="small", MACUPOS_VOICE_LANGUAGE="DE").voice_language == "de"


@pytest.mark.parametrize(
    ("model", "language", "says"),
    [("", "de", "hears English only"), ("base.en", "ko", "hears English only"), ("small", "korean", "language code")],
)
def test_a_language_an_english_only_model_cannot_hear_is_refused_at_start(
    tmp_path: Path, model: str, language: str, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        _settings(tmp_path, MACUPOS_WHISPER_MODEL=model, MACUPOS_VOICE_LANGUAGE=language)
