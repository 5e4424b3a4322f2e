"""The steps the end-to-end voice tests share: a note said in the owner's chat, and a tool approval waiting
for its answer."""

from __future__ import annotations

from typing import Any

from bot.app import BotApp
from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import OWNER, Harness
from tests.bot.conftest import VoiceNote
from tests.doubles.anthropic import ToolUse

__all__ = ["approval_waiting", "say"]


def say(h: Harness, voice_note: VoiceNote, text: str, user: int = OWNER) -> None:
    """``text`` spoken by espeak-ng, sent by ``user`` in the owner's chat as a 2 s voice note."""
    h.tg.push_voice(user, OWNER, voice_note(text).read_bytes(), 2)


async def approval_waiting(
    h: Harness, transcriber: Transcriber, file_name: str, *later: str
) -> tuple[BotApp, dict[str, Any]]:
    """The bot started and asked (typed) to make ``file_name``: the model's Bash ``touch`` waits on this
    card. Once allowed or denied the model says "Finished.", then answers ``later`` instructions."""
    h.claude.enqueue(
        ToolUse("Bash", {"command": f"touch {file_name}", "description": "make a file"}), "Finished.", *later
    )
    app = await h.start(transcriber=transcriber)
    h.tg.push_message(OWNER, OWNER, "make the file")
    return app, await h.wait_message(lambda m: "🔐" in str(m.get("text", "")))
