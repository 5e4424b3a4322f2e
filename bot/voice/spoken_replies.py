"""Spoken answers in the chat: ``/speak``, and a voice note beside the text answer, made after it is sent.

Which answers are spoken is the chat's speech mode (bot.db): "voice", the default, speaks the answers to
instructions that came as a voice note; "on" (``/speak on``) every answer; "off" (``/speak off``) none. The
note is the answer's ``spoken_summary`` in the Piper voice, made in a background task once the text answer
is out, so it never delays the text: bounded in time and in number, and a failure is logged, never shown in
place of the answer. Without the ``speech`` extra there is no Speaker: nothing is spoken and ``/speak on``
says how to install it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from telegram.constants import ChatAction
from telegram.error import TelegramError

from bot.errors import SpeechError, SpeechUnavailableError
from bot.records import SpeechMode
from bot.services import Services
from bot.voice.speak import Speaker, spoken_summary
from memory import MemoryStoreError

__all__ = ["MAX_PENDING_NOTES", "SPEAK_TIMEOUT_S", "SpokenReplies"]

logger = logging.getLogger(__name__)

SPEAK_TIMEOUT_S = 120.0  # a 75-word note takes seconds; minutes means the machine is stuck, not busy
MAX_PENDING_NOTES = 4  # notes queue on the voice's one thread; beyond this the newest is dropped (logged)
_SHUTDOWN_GRACE_S = 5.0
_MODES: dict[str, SpeechMode] = {"on": "on", "off": "off", "voice": "voice"}


class SpokenReplies:
    """The chat's spoken answers; ``speaker`` is None when the ``speech`` extra is not installed. ``owns_speaker``:
    close it in ``aclose`` (False for a speaker lent by the caller, as tests share one)."""

    def __init__(self, services: Services, speaker: Speaker | None, *, owns_speaker: bool = True) -> None:
        self.services = services
        self.speaker = speaker
        self.owns_speaker = owns_speaker
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def available(self) -> bool:
        return self.speaker is not None

    def after_answer(self, chat_id: int, source: str, answer: str) -> None:
        """Call once the text answer has been sent: its voice note follows in the background, if the chat's
        mode asks for one (``source`` "voice": the instruction came as a voice note)."""
        if self.speaker is None or not answer.strip():
            return
        if len(self._tasks) >= MAX_PENDING_NOTES:
            logger.warning(
                "chat %s: %d voice notes already waiting; this answer is not spoken", chat_id, len(self._tasks)
            )
            return
        task = asyncio.create_task(self._speak(chat_id, source, answer), name=f"speak-{chat_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _speak(self, chat_id: int, source: str, answer: str) -> None:
        assert self.speaker is not None
        s = self.services
        try:
            mode = await s.state.speech(chat_id)
            if mode == "off" or (mode == "voice" and source != "voice"):
                return
            said = spoken_summary(answer)
            if not said:
                return
            async with asyncio.timeout(SPEAK_TIMEOUT_S), s.sender.showing(chat_id, ChatAction.RECORD_VOICE):
                note = await self.speaker.synthesize(said)
                await s.sender.voice(chat_id, note.ogg, max(1, round(note.duration_s)))
        except SpeechError as exc:
            logger.warning("chat %s: no voice note for the answer: %s", chat_id, exc)
        except TelegramError as exc:
            logger.warning("chat %s: the voice note was not delivered: %s", chat_id, exc)
        except TimeoutError:
            logger.warning("chat %s: the voice note took over %.0f s; dropped", chat_id, SPEAK_TIMEOUT_S)
        except MemoryStoreError as exc:  # bot.db's own faults (the speech mode could not be read)
            logger.warning("chat %s: no voice note (state unavailable): %s", chat_id, exc)
        except Exception:  # a background task's top level: nothing may reach the text answer or the chat
            logger.exception("chat %s: the voice note failed", chat_id)

    async def command(self, chat_id: int, args: str) -> str:
        """``/speak on | off | voice | status``: the reply text (plain)."""
        word = args.strip().lower()
        if word in ("", "status"):
            return await self._status(chat_id)
        mode = _MODES.get(word)
        if mode is None:
            return "Usage: /speak on | off | voice | status"
        if mode != "off" and self.speaker is None:
            return (
                "🔇 Spoken answers are not installed on this bot. Enable them with "
                f"{SpeechUnavailableError.install_hint} and restart the bot (docs/speech.md; the voice is GPL "
                "software, read its licence note first)."
            )
        await self.services.state.set_speech(chat_id, mode)
        return {
            "on": "🔊 Spoken answers on: every answer here also comes as a short voice note. /speak off stops it.",
            "off": "🔇 Spoken answers off, also for voice notes. /speak voice speaks the answers to voice notes again.",
            "voice": "🔈 Answers to voice notes are spoken; typed ones get text only. /speak on for every answer.",
        }[mode]

    async def _status(self, chat_id: int) -> str:
        if self.speaker is None:
            return (
                "🔇 Spoken answers are not installed on this bot "
                f"(enable them with {SpeechUnavailableError.install_hint})."
            )
        return {
            "on": "🔊 Spoken answers: on, for every answer in this chat. /speak off | voice to change.",
            "off": "🔇 Spoken answers: off. /speak on | voice to change.",
            "voice": "🔈 Spoken answers: for voice notes (the default). /speak on | off to change.",
        }[await self.services.state.speech(chat_id)]

    async def idle(self) -> None:
        """Wait until every voice note under way has been sent or dropped (tests and benchmarks)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Shutdown: notes still being made are dropped (the text answers went out), then the voice is closed."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE_S)
        if self.speaker is not None and self.owns_speaker:
            with contextlib.suppress(SpeechError):
                await self.speaker.aclose()
