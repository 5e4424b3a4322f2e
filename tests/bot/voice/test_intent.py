"""Spoken answers to waiting prompts: the words Whisper writes → the button they stand for, or not."""

from __future__ import annotations

import pytest

from bot.voice.intent import (
    CHOICES,
    MAX_ANSWER_WORDS,
    Choice,
    PromptKind,
    answer_hotwords,
    ask_again,
    interpret,
)
from bot.voice.transcribe import Transcriber
from tests.bot.conftest import VoiceNote

ANSWERS: list[tuple[PromptKind, str, Choice]] = [
    # approval
    ("approval", "Allow.", "allow"),
    ("approval", "allow", "allow"),
    ("approval", "Allow it.", "allow"),
    ("approval", "Yes, allow it!", "allow"),
    ("approval", "yes please", "allow"),
    ("approval", "Go ahead.", "allow"),
    ("approval", "OK.", "allow"),
    ("approval", "All right.", "allow"),
    ("approval", "Approved.", "allow"),
    ("approval", "Deny.", "deny"),
    ("approval", "Denied.", "deny"),
    ("approval", "no", "deny"),
    ("approval", "No, deny it.", "deny"),
    ("approval", "Don't allow it.", "deny"),
    ("approval", "Don’t allow that.", "deny"),  # Whisper's curly apostrophe
    ("approval", "do not allow", "deny"),
    ("approval", "Okay, deny.", "deny"),  # "okay" only starts the sentence
    ("approval", "Allow for this session.", "allow_session"),
    ("approval", "allow for the session", "allow_session"),
    ("approval", "Yes, for this session.", "allow_session"),
    ("approval", "Always allow.", "allow_session"),
    ("approval", "allow it every time", "allow_session"),
    # confirmation of a transcript
    ("confirmation", "Yes.", "run"),
    ("confirmation", "Yes, run it.", "run"),
    ("confirmation", "Run it.", "run"),
    ("confirmation", "run it now please", "run"),
    ("confirmation", "Go ahead and run it.", "run"),
    ("confirmation", "Do it.", "run"),
    ("confirmation", "No.", "cancel"),
    ("confirmation", "No thanks.", "cancel"),
    ("confirmation", "Cancel.", "cancel"),
    ("confirmation", "Cancelled.", "cancel"),
    ("confirmation", "Never mind.", "cancel"),
    ("confirmation", "Forget it.", "cancel"),
    ("confirmation", "Don't run it.", "cancel"),
    ("confirmation", "Not now.", "cancel"),
    # handoff review
    ("review", "Keep.", "keep"),
    ("review", "Keep that.", "keep"),
    ("review", "keep it please", "keep"),
    ("review", "Yes.", "keep"),
    ("review", "Save it.", "keep"),
    ("review", "Forget.", "forget"),
    ("review", "Forget it.", "forget"),
    ("review", "Delete it.", "forget"),
    ("review", "No.", "forget"),
    ("review", "Throw it away.", "forget"),
    ("review", "Don't keep it.", "forget"),
]


@pytest.mark.parametrize(("kind", "transcript", "choice"), ANSWERS)
def test_short_replies_are_taken_as_the_button_they_name(kind: PromptKind, transcript: str, choice: Choice) -> None:
    answer = interpret(transcript, kind)
    assert (answer.outcome, answer.choice) == ("answer", choice)
    assert choice in CHOICES[kind]
    assert answer.heard == transcript


AMBIGUOUS: list[tuple[PromptKind, str]] = [
    ("approval", "Allow, no, deny."),  # both allow and deny words
    ("approval", "yes no"),
    ("approval", "Deny for this session."),  # no such button
    ("approval", "Allow, deny it."),  # what a primed tiny.en wrote for a fast "no, deny it"
    ("approval", "allow the rm"),  # an answer word and a stray word
    ("confirmation", "Yes, cancel."),
    ("confirmation", "Run it, no, cancel."),
    ("confirmation", "run the tests"),  # may be a new instruction, may be "run": ask
    ("review", "Keep it, no, forget it."),
    ("review", "yes delete it"),
    ("review", "keep the first part"),
]


@pytest.mark.parametrize(("kind", "transcript"), AMBIGUOUS)
def test_contradictory_or_unclear_replies_are_ambiguous(kind: PromptKind, transcript: str) -> None:
    answer = interpret(transcript, kind)
    assert answer.outcome == "ambiguous"
    assert answer.choice is None and answer.button is None
    assert answer.label == "not clear"


NOT_ANSWERS: list[tuple[PromptKind, str]] = [
    ("approval", "Push the branch."),
    ("approval", "Thank you."),  # Whisper's favourite words for a silent note
    ("approval", "Good night."),  # what tiny.en wrote for an unprimed "deny it": "good" agrees to nothing
    ("approval", "Allow the rm command please and then run the tests again."),  # long: an instruction
    ("approval", ""),
    ("approval", "…"),
    ("confirmation", "Run the tests in Eywa and fix the failing one."),
    ("confirmation", "What did we decide about the schema?"),
    ("review", "Keep the old behaviour behind a feature flag for now."),
    ("review", "Summarise what changed since yesterday."),
]


@pytest.mark.parametrize(("kind", "transcript"), NOT_ANSWERS)
def test_instructions_and_chatter_are_not_answers(kind: PromptKind, transcript: str) -> None:
    answer = interpret(transcript, kind)
    assert answer.outcome == "not_an_answer"
    assert answer.choice is None
    assert answer.label == "not an answer"


def test_a_long_reply_is_an_instruction_even_when_it_is_all_answer_words() -> None:
    words = " ".join(["yes"] * (MAX_ANSWER_WORDS + 1))
    assert interpret(words, "confirmation").outcome == "not_an_answer"
    assert interpret(" ".join(["yes"] * MAX_ANSWER_WORDS), "confirmation").choice == "run"


def test_words_of_another_prompt_kind_are_not_answers_here() -> None:
    assert interpret("Keep it.", "approval").outcome == "not_an_answer"
    assert interpret("Allow.", "review").outcome == "not_an_answer"
    assert interpret("Forget it.", "review").choice == "forget"
    assert interpret("Forget it.", "confirmation").choice == "cancel"


def test_the_heard_text_is_one_line_for_the_echo() -> None:
    assert interpret("  Yes,\n run   it. ", "confirmation").heard == "Yes, run it."


def test_labels_and_buttons_match_the_prompts_own_buttons() -> None:
    session = interpret("Allow for this session.", "approval")
    assert session.label == "Allow for this session"
    assert session.button == "session"  # bot.approvals' payload for that button
    assert interpret("Deny.", "approval").button == "deny"
    assert interpret("Run it.", "confirmation").button == "run"
    assert interpret("Keep.", "review").label == "Keep"


def test_ask_again_names_every_answer_of_the_kind() -> None:
    assert ask_again("approval").endswith('Say "allow", "deny" or "allow for this session".')
    assert '"run" or "cancel"' in ask_again("confirmation")
    assert '"keep" or "forget"' in ask_again("review")
    assert "nothing was changed" in ask_again("review")


def test_answer_hotwords_are_the_button_words() -> None:
    assert answer_hotwords("approval") == ["Allow", "Deny", "Allow for this session"]
    assert answer_hotwords("confirmation") == ["Run", "Cancel"]


def test_an_unknown_prompt_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown prompt kind"):
        interpret("yes", "vote")  # type: ignore[arg-type]


SPOKEN: list[tuple[PromptKind, str, Choice]] = [
    ("approval", "allow for this session", "allow_session"),
    ("approval", "deny it", "deny"),
    ("confirmation", "yes, run it", "run"),
    ("confirmation", "no thanks", "cancel"),
    ("review", "keep that", "keep"),
    ("review", "forget it", "forget"),
]


@pytest.mark.parametrize(("kind", "said", "choice"), SPOKEN)
async def test_spoken_answers_survive_the_real_transcriber(
    transcriber: Transcriber, voice_note: VoiceNote, kind: PromptKind, said: str, choice: Choice
) -> None:
    transcript = await transcriber.transcribe(voice_note(said), hotwords=answer_hotwords(kind))
    answer = interpret(transcript.text, kind)
    assert (answer.outcome, answer.choice) == ("answer", choice), transcript.text
