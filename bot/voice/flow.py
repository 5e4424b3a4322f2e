"""A voice note becomes an instruction: size check before download, local transcription, the echo, then the run.

The transcript is echoed ("🎙 …") before any work starts; with ``voice_confirm`` the owner first taps Run
(or sends a corrected text instead). Project names and recent memory keywords prime Whisper's spelling, and
misheard command verbs and names are snapped back to them (bot.voice.snap; the echo says what was changed).
While one of the owner's prompts waits, the note may answer it instead (bot.voice.answers).

Flag, don't guess: when a deciding word was unsure (bot.voice.doubt), the echo marks it and offers the
likely alternatives as buttons, and the instruction waits like a confirmation (the same stored transcript and
buttons, so it survives a restart and runs once): a tap runs it with the word chosen, a spoken "yes" runs it
as shown, a spoken alternative ("stash") runs it with that word. An instruction without flags runs at once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from dataclasses import KW_ONLY, dataclass

from telegram import Voice
from telegram.constants import ChatAction
from telegram.error import TelegramError

from bot.auth import quote_text
from bot.errors import VoiceError
from bot.progress import escape, ptb_seconds
from bot.schedule_commands import ScheduleCommands
from bot.services import Services
from bot.sessions import SessionManager
from bot.voice.answers import CONFIRM_ACTION, VoiceAnswers, WaitingPrompt, corrections
from bot.voice.doubt import Flag, bare, substitute
from bot.voice.intent import answer_hotwords
from bot.voice.transcribe import Transcriber, Transcript
from memory import MemoryStoreError

__all__ = ["MAX_VOICE_BYTES", "MAX_VOICE_SECONDS", "VOICE_ACTION", "VoiceFlow", "echo_text", "strip_trigger"]

logger = logging.getLogger(__name__)

MAX_VOICE_BYTES = 20 * 1024 * 1024  # Telegram's getFile limit for bots
MAX_VOICE_SECONDS = 15 * 60  # longer notes are refused before download: an instruction is short
TRANSCRIBE_TIMEOUT_S = 300.0
VOICE_ACTION = CONFIRM_ACTION
_CONFIRM_TTL_S = 3600.0
_WORDS = re.compile(r"[\w']+")
_MAX_PICKS = 6  # alternative buttons on one echo: two rows of three
_PICK_WORDS = 3  # a follow-up note naming an alternative is that word and little more ("stash, please")


def strip_trigger(transcript: str, trigger: str) -> str | None:
    """The task after a spoken trigger ("Run the relay: fix the flaky test" → "fix the flaky test"), else None."""
    words = _WORDS.findall(transcript)
    wanted = _WORDS.findall(trigger.lower())
    if not wanted or [w.lower() for w in words[: len(wanted)]] != wanted:
        return None
    # Cut the spoken text after the trigger's last word, keeping the rest as said.
    pattern = r"\W*".join(re.escape(w) for w in wanted)
    match = re.match(rf"\W*{pattern}\W*", transcript, re.IGNORECASE)
    rest = transcript[match.end() :] if match else " ".join(words[len(wanted) :])
    return rest.strip() or None


def echo_text(transcript: Transcript, text: str) -> str:
    """The echo (HTML): the text as it will run, and the words snapping corrected, so the owner sees them."""
    return f"🎙 {escape(text)}{corrections(transcript)}"


def picks(text: str, flags: tuple[Flag, ...]) -> list[tuple[str, str, str]]:
    """(button label, the word chosen, the text it runs) for each alternative of each flagged word."""
    out: list[tuple[str, str, str]] = []
    for f in flags:
        for alt in f.alternatives:
            label = f"{alt}" if len(flags) == 1 else f"{f.heard} → {alt}"
            out.append((label, alt, substitute(text, f.index, alt, f.span)))
    return out[:_MAX_PICKS]


@dataclass(eq=False)  # a service object: equal only to itself, and hashable
class VoiceFlow:
    services: Services
    sessions: SessionManager
    answers: VoiceAnswers | None = None
    _: KW_ONLY
    schedules: ScheduleCommands | None = None  # a note that starts with a schedule is offered as one

    async def hotwords(self) -> list[str]:
        s = self.services
        words = [p.name for p in s.settings.projects]
        try:
            for h in await s.eywa.list_handoffs(limit=10):
                words += list(h.keywords[:4])
        except MemoryStoreError as exc:
            logger.debug("no memory keywords for the transcriber: %s", exc)
        return list(dict.fromkeys(w for w in words if w))[:40]

    async def handle(
        self,
        chat_id: int,
        user_id: int,
        voice: Voice,
        *,
        forwarded_from: str | None = None,
        thread_id: int | None = None,
    ) -> None:
        """Transcribe and run a voice note; one ``forwarded_from`` someone is quoted as their words, never
        run as the owner's instruction (as forwarded text is)."""
        s = self.services
        size = voice.file_size or 0
        if size > MAX_VOICE_BYTES:
            await s.sender.send(
                chat_id,
                f"🎙 That voice note is {size / 1_048_576:.1f} MB; Telegram lets bots download at most 20 MB. "
                "Please send a shorter one, or type the instruction.",
                html_text=False,
            )
            return
        seconds = int(ptb_seconds(voice, "duration"))
        if seconds > MAX_VOICE_SECONDS:
            await s.sender.send(
                chat_id,
                f"🎙 That voice note is {seconds // 60} min long; I transcribe up to "
                f"{MAX_VOICE_SECONDS // 60} min. Please split it, or type the instruction.",
                html_text=False,
            )
            return
        # "typing…" in the chat from the moment the note is taken until its transcript is out.
        async with s.sender.showing(chat_id, ChatAction.TYPING):
            try:
                file = await s.sender.bot.get_file(voice.file_id)
                data = bytes(await file.download_as_bytearray())
            except TelegramError as exc:
                await s.sender.send(chat_id, f"🎙 Could not download the voice note: {exc.message}", html_text=False)
                return
            # Someone else's words (forwarded) never answer the owner's prompt.
            prompt = (
                None
                if self.answers is None or forwarded_from is not None
                else await self.answers.waiting(chat_id, user_id)
            )
            # While a prompt waits, its answers' words prime the model and are snapping targets too ("Console." for
            # a mumbled "cancel"); they stop being targets if the note turns out to be an instruction.
            answer_words = answer_hotwords(prompt.kind) if prompt is not None else []
            # A flagged instruction waits: its alternatives are what the owner may say next ("stash").
            offered = await self._offered(chat_id, user_id) if prompt is not None else {}
            answer_words += list(offered)
            words = [*answer_words, *await self.hotwords()]
            try:
                transcriber = await s.get_transcriber()
                # Bounded so a pathological note frees the chat; the worker thread finishes on its own.
                async with asyncio.timeout(TRANSCRIBE_TIMEOUT_S):
                    transcript = await transcriber.transcribe(data, hotwords=words, names=words)
            except VoiceError as exc:
                await s.sender.send(chat_id, f"🎙 {exc}", html_text=False)
                return
            except TimeoutError:
                await s.sender.send(chat_id, "🎙 Transcribing that note took too long; please type it.", html_text=False)
                return
        text = " ".join(transcript.text.split())
        if not text:
            await s.sender.send(chat_id, "🎙 I could not hear any words in that voice note.", html_text=False)
            return
        answers = self.answers
        if prompt is not None and answers is not None:
            if await self._take_pick(chat_id, user_id, prompt, transcript, offered):
                return
            if await answers.take(chat_id, user_id, prompt, transcript, data):  # data: answers are scored on it
                return
            transcript = transcript.without(answer_words)
            text = " ".join(transcript.text.split())
        if forwarded_from is not None:
            text = quote_text(forwarded_from, text)
        if s.settings.voice_confirm:
            # Every note is confirmed anyway: weigh first, so the question can name the unsure words.
            if forwarded_from is None:  # someone else's words are quoted, never flagged
                transcript = await self._weighed(transcriber, transcript)
                if transcript.flags:
                    await self._ask_flagged(chat_id, user_id, text, transcript)
                    return
            await self._ask_confirm(chat_id, user_id, text, transcript)
            return
        # The echo first; then the rivals are weighed (a few decoder passes) and the echo becomes the question
        # if a deciding word is in doubt. Nothing runs before that.
        echo = await s.sender.send(chat_id, echo_text(transcript, text))
        if forwarded_from is None:
            transcript = await self._weighed(transcriber, transcript)
            if transcript.flags:
                await self._ask_flagged(chat_id, user_id, text, transcript, edit=echo.message_id)
                return
        await self.run_transcript(chat_id, user_id, text, thread_id)

    async def _weighed(self, transcriber: Transcriber, transcript: Transcript) -> Transcript:
        """The transcript with its rivals weighed (bot.voice.rivals); as it was if that fails or overruns."""
        try:
            async with asyncio.timeout(TRANSCRIBE_TIMEOUT_S):
                return await transcriber.weigh(transcript)
        except (VoiceError, TimeoutError) as exc:  # the flags found while transcribing stand
            logger.warning("could not weigh the note's rivals: %s", exc)
            return transcript

    async def run_transcript(self, chat_id: int, user_id: int, text: str, thread_id: int | None = None) -> None:
        # A quoted (forwarded) note starts "Forwarded from …": neither a branch nor the trigger word matches it.
        s = self.services
        if self.schedules is not None and await self.schedules.offer_spoken(chat_id, user_id, text):
            return
        routed = await self.sessions.router.route(chat_id, text, thread_id=thread_id, spoken=True, now=time.time())
        if isinstance(routed, str):
            await s.sender.send(chat_id, f"🎙 {routed}", html_text=False)
            return
        if routed.note:
            await s.sender.send(chat_id, routed.note, html_text=False)
        task = strip_trigger(routed.text, s.settings.rpa_trigger)
        if task is not None:
            await self.sessions.submit(chat_id, user_id, task, "rpa", branch=routed.branch)
            return
        await self.sessions.submit(chat_id, user_id, routed.text, "voice", branch=routed.branch)

    async def _ask_confirm(self, chat_id: int, user_id: int, text: str, transcript: Transcript) -> None:
        s = self.services
        await s.state.set_pending_transcript(chat_id, text)
        group = f"voice-{secrets.token_urlsafe(8)}"
        # The buttons carry their own transcript: an older prompt's Run can never run a newer note's text.
        run = await s.state.new_callback(
            chat_id, user_id, VOICE_ACTION, {"op": "run", "text": text}, _CONFIRM_TTL_S, group=group
        )
        drop = await s.state.new_callback(
            chat_id, user_id, VOICE_ACTION, {"op": "cancel", "text": text}, _CONFIRM_TTL_S, group=group
        )
        await s.sender.send(
            chat_id,
            f"{echo_text(transcript, text)}\n\n<i>Run it (or say “yes”), or send the corrected text instead.</i>",
            buttons=[[("▶️ Run", run), ("✖️ Cancel", drop)]],
        )

    async def _ask_flagged(
        self, chat_id: int, user_id: int, text: str, transcript: Transcript, *, edit: int | None = None
    ) -> None:
        """Echo with the unsure words marked and their alternatives as buttons (``edit``: the echo already
        sent, which becomes this question); the instruction waits."""
        s = self.services
        await s.state.set_pending_transcript(chat_id, text)
        group = f"voice-{secrets.token_urlsafe(8)}"
        rows: list[list[tuple[str, str]]] = [[]]
        for label, word, run in picks(text, transcript.flags):
            # "text" is the transcript the press answers (it must still be the pending one); "run" what runs.
            token = await s.state.new_callback(
                chat_id, user_id, VOICE_ACTION, {"op": "pick", "text": text, "run": run, "word": word},
                _CONFIRM_TTL_S, group=group,
            )  # fmt: skip
            if len(rows[-1]) == 3:
                rows.append([])
            rows[-1].append((f"✏️ {label}", token))
        # Saying the flagged word again is as good as "yes": "words" lets a follow-up note find this button.
        heard = [f.heard for f in transcript.flags]
        run = await s.state.new_callback(
            chat_id, user_id, VOICE_ACTION, {"op": "run", "text": text, "words": heard}, _CONFIRM_TTL_S, group=group
        )
        drop = await s.state.new_callback(
            chat_id, user_id, VOICE_ACTION, {"op": "cancel", "text": text}, _CONFIRM_TTL_S, group=group
        )
        rows = [r for r in rows if r] + [[("▶️ Run as heard", run), ("✖️ Cancel", drop)]]
        # The text stays as it would run (copyable, quotable); the unsure words are named under it.
        unsure = ", ".join(f"<b>{escape(f.heard)}</b>" for f in transcript.flags)
        card = (
            f"{echo_text(transcript, text)}\n\n❓ <i>Not sure I heard {unsure}: tap what you said (or say it). "
            "Run it as heard (or say “yes”), or send the corrected text; nothing runs until then.</i>"
        )
        if edit is not None:
            await s.sender.edit(chat_id, edit, card, buttons=rows)
        else:
            await s.sender.send(chat_id, card, buttons=rows)

    async def _offered(self, chat_id: int, user_id: int) -> dict[str, str]:
        """The alternatives of a waiting flagged instruction, by word (lower case) → their button's token."""
        s = self.services
        pending = (await s.state.chat(chat_id)).pending_transcript
        if not pending:
            return {}
        out: dict[str, str] = {}
        for callback in await s.state.open_callbacks(chat_id, user_id, VOICE_ACTION):
            p = callback.payload
            if p.get("text") != pending:
                continue
            if p.get("op") == "pick" and p.get("word"):
                out.setdefault(str(p["word"]).lower(), callback.token)
            elif p.get("op") == "run":
                for word in p.get("words") or ():
                    out.setdefault(str(word).lower(), callback.token)
        return out

    async def _take_pick(
        self, chat_id: int, user_id: int, prompt: WaitingPrompt, transcript: Transcript, offered: dict[str, str]
    ) -> bool:
        """A short note naming one of the offered alternatives presses its button; False when it names none."""
        words = [bare(w).lower() for w in transcript.text.split()]
        said = f" {' '.join(words)} "
        named = [w for w in offered if f" {w} " in said]
        if prompt.kind != "confirmation" or self.answers is None or len(named) != 1 or len(words) > _PICK_WORDS:
            return False
        s = self.services
        await s.sender.send(chat_id, f"🎙 «{escape(transcript.text)}» → taken as: <b>{escape(named[0])}</b>")
        toast = await self.answers.press(offered[named[0]], user_id, prompt.message_id)
        if not toast or not toast.startswith("Running"):
            await s.sender.send(chat_id, f"🎙 {toast or 'That prompt is no longer waiting; nothing was changed.'}")
        return True

    async def on_callback(self, chat_id: int, user_id: int, op: str, text: str, run: str = "") -> str:
        """A press of a waiting transcript's button: run it (as heard, or with the word picked), or cancel."""
        s = self.services
        chat = await s.state.chat(chat_id)
        if not chat.pending_transcript or chat.pending_transcript != text:
            return "That transcript was replaced or already handled."
        await s.state.set_pending_transcript(chat_id, "")
        if op not in ("run", "pick"):
            return "Cancelled."
        chosen = run if op == "pick" and run else text
        await self.run_transcript(chat_id, user_id, chosen)
        return "Running." if chosen == text else f"Running: {chosen}"

    async def take_edit(self, chat_id: int) -> bool:
        """A text message while a transcript waits replaces it: the pending one is dropped. True if one waited."""
        s = self.services
        chat = await s.state.chat(chat_id)
        if not chat.pending_transcript:
            return False
        await s.state.set_pending_transcript(chat_id, "")
        return True
