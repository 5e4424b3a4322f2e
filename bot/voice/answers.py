"""A voice note that answers a waiting prompt, exactly as tapping the prompt's button would.

When the owner sends a voice note while one of their prompts waits in the chat (an approval, a transcript
waiting for Run, a handoff review), the note is heard with the answers' own words primed, and the prompt's
few answers are scored against its audio (bot.voice.prompt_scoring): a refusal the transcript got wrong ("Hello."
for "deny") is still heard by its sound (an allow, run or forget heard only by its sound is asked again), and
a note that is none of the answers is read by
bot.voice.intent as written. An answer presses that prompt's button through the bot's one tap handler, so the same
checks hold (only the prompt's owner, once, before it expires) and the same things happen; the echo says how
the note was taken ("🎙 «Allow.» → taken as: Allow"). An ambiguous note asks again and changes nothing;
anything else goes on as a normal instruction.

Which prompt, when several wait: an approval first (a run is blocked on it and it times out), the oldest
(the first asked, the first to time out); then a transcript waiting for Run; then the newest handoff review,
and that only while nothing has run in the chat since it was posted: an older card is history, not the
question of the moment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from bot.approvals import Approvals
from bot.progress import escape
from bot.review import REVIEW_ACTION
from bot.services import Services
from bot.voice.intent import PromptKind, ask_again
from bot.voice.prompt_scoring import decide, score_answer
from bot.voice.transcribe import Transcript

__all__ = ["CONFIRM_ACTION", "Press", "VoiceAnswers", "WaitingPrompt", "corrections"]

CONFIRM_ACTION = "voice"  # the transcript confirmation's buttons (bot.voice.flow)
# What the prompt's own tap handler answers when the press did what it stands for; anything else is said.
_DONE = {
    "allow": "Allowed",
    "deny": "Denied",
    "session": "Allowed for this session",
    "run": "Running.",
    "cancel": "Cancelled.",
    "keep": "Kept.",
    "forget": "Forgotten.",
}
_GONE = "That prompt is no longer waiting; nothing was changed."
_OR_TYPE = " To give it as an instruction instead, type it."

# Press a button: (token, user id, the prompt's message id) → the tap's toast, or None when the button is not
# that user's, or was spent or expired (BotApp.press).
Press = Callable[[str, int, int | None], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class WaitingPrompt:
    """A prompt a voice note may answer: its kind and its buttons' tokens by payload ("allow", "run"…)."""

    kind: PromptKind
    buttons: Mapping[str, str]
    message_id: int | None = None


def corrections(transcript: Transcript) -> str:
    """What snapping changed, for an echo (HTML): ' <i>(heard “Sash” → stash)</i>', or ""."""
    if not transcript.changes:
        return ""
    return " <i>(heard " + escape(", ".join(f"“{a}” → {b}" for a, b in transcript.changes)) + ")</i>"


class VoiceAnswers:
    def __init__(self, services: Services, approvals: Approvals, press: Press) -> None:
        self.services = services
        self.approvals = approvals
        self.press = press

    async def waiting(self, chat_id: int, user_id: int) -> WaitingPrompt | None:
        """The prompt of ``user_id`` a voice note from them in this chat would answer, or None."""
        approvals = self.approvals.waiting(chat_id, user_id)
        if approvals:
            first = approvals[0]
            return WaitingPrompt("approval", dict(first.tokens), first.message_id)
        s = self.services
        chat = await s.state.chat(chat_id)
        if chat.pending_transcript:
            buttons = await self._buttons(chat_id, user_id, CONFIRM_ACTION, "text", chat.pending_transcript)
            if buttons:
                return WaitingPrompt("confirmation", buttons)
        reviews = await s.state.pending_reviews(chat_id)
        if not reviews:
            return None
        latest = max(reviews, key=lambda r: r.updated_at)
        runs = await s.state.recent_runs(chat_id, 1)
        if runs and runs[0].started_at >= latest.updated_at:
            return None
        buttons = await self._buttons(chat_id, user_id, REVIEW_ACTION, "session_id", latest.session_id)
        return WaitingPrompt("review", buttons, latest.message_id) if buttons else None

    async def _buttons(self, chat_id: int, user_id: int, action: str, key: str, value: str) -> dict[str, str]:
        """The newest unspent token of each op among ``action``'s buttons whose payload has ``key`` = ``value``."""
        out: dict[str, str] = {}
        for callback in await self.services.state.open_callbacks(chat_id, user_id, action):
            if callback.payload.get(key) == value:
                out.setdefault(str(callback.payload.get("op", "")), callback.token)
        return out

    async def take(
        self, chat_id: int, user_id: int, prompt: WaitingPrompt, transcript: Transcript, audio: bytes | None = None
    ) -> bool:
        """Answer ``prompt`` with what the note said; False when it was no answer (a normal instruction then).

        ``audio``: the note, to score the answers on; without it the transcript's words alone decide.
        """
        scored = None
        if audio is not None:
            transcriber = await self.services.get_transcriber()
            scored = await score_answer(transcriber, audio, prompt.kind, transcript)
        answer = decide(prompt.kind, transcript.text, scored)
        if answer.outcome == "not_an_answer":
            return False
        sender = self.services.sender
        quoted = f"«{escape(answer.heard)}»{corrections(transcript)}"
        if answer.heard != " ".join(transcript.text.split()):
            # Heard by its sound, not its words: the owner sees both, so a wrong pick would not go unnoticed.
            quoted += f" <i>(by its sound; transcribed “{escape(transcript.text)}”)</i>"
        if answer.outcome == "ambiguous" or answer.button is None:
            await sender.send(chat_id, f"🎙 {quoted} → {escape(ask_again(prompt.kind) + _OR_TYPE)}")
            return True
        await sender.send(chat_id, f"🎙 {quoted} → taken as: <b>{escape(answer.label)}</b>")
        token = prompt.buttons.get(answer.button)
        toast = await self.press(token, user_id, prompt.message_id) if token else None
        if toast != _DONE.get(answer.button):
            await sender.send(chat_id, f"🎙 {toast or _GONE}", html_text=False)
        return True
