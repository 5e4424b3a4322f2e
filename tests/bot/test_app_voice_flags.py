"""Flag, don't guess, end to end: espeak-ng notes, the real Whisper model, the real tap handler.

A note whose deciding word the model was unsure of is echoed with the word marked and its alternatives as
buttons, and waits: it runs only after a tap (with the word tapped), a spoken "yes" (as heard) or the
alternative said; a waiting one survives a restart and runs once. A note without flags runs at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import BotApp
from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import OWNER, Harness, buttons, harness
from tests.bot.conftest import VoiceNote
from tests.bot.voice_harness import say
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble

# tiny.en hears espeak's "sash my changes" as "That's my changes." with its first word at p ≈ 0.1: flagged,
# with what the other beams and the lexicon offer ("push", "Hash"…). "push the branch" it hears surely.
UNSURE = "sash my changes"
SURE = "push the branch"


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def flagged_card(h: Harness, voice_note: VoiceNote, transcriber: Transcriber) -> tuple[BotApp, dict[str, Any]]:
    """The bot started and UNSURE said: its card once the note is handled, nothing run yet."""
    app = await h.start(transcriber=transcriber)
    say(h, voice_note, UNSURE)
    card = await h.wait_message(lambda m: "❓" in str(m.get("text", "")))
    await h.wait_handled(app)
    return app, card


def ran(h: Harness) -> str:
    """The instruction Claude was given, lower case (after the bot's own preamble)."""
    return last_user_text(h.claude.bodies[0]).split("\n\n")[-1].lower()


def first_pick(card: dict[str, Any]) -> tuple[str, str]:
    """The first alternative offered: (the word, its button's callback data)."""
    label, data = next((label, data) for label, data in buttons(card).items() if label.startswith("✏️ "))
    return label.removeprefix("✏️ "), data


async def test_a_flagged_instruction_waits_and_runs_with_the_word_tapped(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    h.claude.enqueue("Stashed.")
    app, card = await flagged_card(h, voice_note, transcriber)
    assert h.claude.arrivals == 0  # nothing runs while a deciding word is in doubt
    assert "Not sure I heard <b>" in card["text"]
    labels = buttons(card)
    assert "▶️ Run as heard" in labels and "✖️ Cancel" in labels, card["text"]
    word, data = first_pick(card)
    h.tg.push_callback(OWNER, OWNER, card["message_id"], data)
    await h.wait_text(lambda t: t == "Stashed.")
    assert ran(h).startswith(f"{word.lower()} my changes"), ran(h)  # the word tapped, in the flagged one's place
    # The other buttons of the card are spent with it: a second tap runs nothing.
    h.tg.push_callback(OWNER, OWNER, card["message_id"], labels["▶️ Run as heard"])
    await h.wait_handled(app)
    assert h.claude.arrivals == 1


async def test_an_instruction_without_flags_runs_at_once(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    h.claude.enqueue("Pushed.")
    await h.start(transcriber=transcriber)
    say(h, voice_note, SURE)
    echo = await h.wait_text(lambda t: t.startswith("🎙"))
    await h.wait_text(lambda t: t == "Pushed.")
    assert "❓" not in echo and "push the branch" in echo.lower()
    assert "push the branch" in ran(h)


@pytest.mark.parametrize("answer", ["yes", "the alternative"])
async def test_a_spoken_yes_runs_it_as_heard_and_a_spoken_alternative_with_that_word(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber, answer: str
) -> None:
    h.claude.enqueue("Done.")
    app, card = await flagged_card(h, voice_note, transcriber)
    offered = [label.removeprefix("✏️ ") for label in buttons(card) if label.startswith("✏️ ")]
    # A word espeak says clearly alone (a lone "ask" comes out of tiny.en as silence).
    word = next((w for w in offered if w.lower() in ("stash", "push", "squash", "search")), offered[0])
    said, starts = ("yes", "that's my changes") if answer == "yes" else (word, f"{word.lower()} my changes")
    say(h, voice_note, said)
    taken = await h.wait_text(lambda t: "taken as" in t)
    await h.wait_text(lambda t: t == "Done.")
    assert h.claude.arrivals == 1, taken
    assert ran(h).startswith(starts), ran(h)
    assert app.services is not None and (await app.services.state.chat(OWNER)).pending_transcript == ""


async def test_a_waiting_flagged_instruction_survives_a_restart_and_runs_once(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    h.claude.enqueue("Stashed after the restart.")
    first, card = await flagged_card(h, voice_note, transcriber)
    await first.stop()
    second = await h.start(transcriber=transcriber)
    word, token = first_pick(card)
    h.tg.push_callback(OWNER, OWNER, card["message_id"], token)
    await h.wait_text(lambda t: t == "Stashed after the restart.")
    h.tg.push_callback(OWNER, OWNER, card["message_id"], token)  # the same tap again: spent
    await h.wait_handled(second)
    assert h.claude.arrivals == 1
    assert ran(h).startswith(f"{word.lower()} my changes"), ran(h)


async def test_a_command_heard_as_another_word_waits_with_the_verb_the_audio_supports(
    h: Harness, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    # tiny.en hears espeak's "add a docstring" as "And another string", surely: no command is left in the
    # sentence, and "Add" in place of "And" explains the audio nearly as well (bot.voice.rivals). It waits.
    h.claude.enqueue("Added.")
    app = await h.start(transcriber=transcriber)
    say(h, voice_note, "add a docstring to the billing class")
    card = await h.wait_message(lambda m: "❓" in str(m.get("text", "")))
    await h.wait_handled(app)
    assert h.claude.arrivals == 0
    assert "Not sure I heard <b>And</b>" in card["text"], card["text"]
    label, data = first_pick(card)
    assert label.split(" → ")[-1].lower() == "add", card["text"]  # "And → add" when other words are unsure too
    h.tg.push_callback(OWNER, OWNER, card["message_id"], data)
    await h.wait_text(lambda t: t == "Added.")
    assert ran(h).startswith("add "), ran(h)
