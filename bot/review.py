"""Handoff review in chat: each session's handoff is posted with Keep / Forget / Show full / Correct.

A correction (the text after "Correct", or any reply to the posted handoff) is stored with the handoff:
the handoff is re-imported through Eywa's public ``import_dir`` with the correction appended as an insight
and ``source: correction``, so retrieval and the mirror both see it.
"""

from __future__ import annotations

import logging

from telegram.error import TelegramError

from bot.lanes import LANE, branch_label
from bot.progress import escape
from bot.records import Callback, ReviewState
from bot.roles import DECIDER
from bot.services import Services
from bot.telegram_split import split_message
from memory import Handoff, HandoffFormatError, MemoryStoreError, SessionNotFoundError
from memory import handoffs as memory_review
from memory.handoffs import from_markdown

__all__ = ["REVIEW_ACTION", "Reviews", "handoff_card"]

logger = logging.getLogger(__name__)
# A review button's outcome: (the state stored, the card's new last line, the answer to the tap).
_DONE: dict[str, tuple[ReviewState, str, str]] = {
    "keep": ("kept", "👍 Kept.", "Kept."),
    "forget": ("forgotten", "🗑 Forgotten: removed from memory.", "Forgotten."),
}

REVIEW_ACTION = "review"
_ITEMS = 5


def _section(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    shown = [f"• {escape(' '.join(i.split()))}" for i in items[:_ITEMS]]
    if len(items) > _ITEMS:
        shown.append(f"… and {len(items) - _ITEMS} more")
    return [f"<b>{title}</b>", *shown]


def handoff_card(h: Handoff) -> str:
    """The phone-sized view: headline, what happened, decisions, open threads."""
    lines = [
        f"📒 <b>{escape(h.headline or 'Session handoff')}</b>",
        f"<i>{escape(h.session_id[:8])} · {h.date[:16]}</i>",
    ]
    lines += _section("What happened", h.what_happened)
    lines += _section("Decisions", h.insights)
    lines += _section("Open threads", h.open_threads)
    text = "\n".join(lines)
    # Cut at a boundary the HTML survives (never inside a tag or an entity).
    return text if len(text) <= 3800 else split_message(text, 3790)[0] + "…"


class Reviews:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def post(self, chat_id: int, user_id: int, session_id: str, markdown: str) -> int | None:
        """Post a handoff for review; returns the message id (None when it could not be shown)."""
        s = self.services
        try:
            handoff = from_markdown(markdown)
        except HandoffFormatError as exc:
            logger.warning("handoff %s unreadable: %s", session_id, exc)
            return None
        buttons = await self._buttons(chat_id, user_id, session_id)
        try:
            tag = LANE.get()  # a branch session's handoff says whose it is
            label = escape(branch_label(tag.branch)) if tag is not None and tag.chat_id == chat_id else ""
            message = await s.sender.send(chat_id, label + handoff_card(handoff), buttons=buttons)
        except TelegramError as exc:
            logger.warning("could not post the handoff of %s: %s", session_id, exc)
            return None
        await s.state.review(session_id, chat_id, message.message_id)
        return message.message_id

    async def on_callback(self, callback: Callback, message_id: int | None) -> str:
        s = self.services
        session_id = str(callback.payload.get("session_id", ""))
        op = str(callback.payload.get("op", ""))
        chat_id = callback.chat_id
        review = await s.state.get_review(session_id)
        if review is None:
            return "Unknown handoff."
        if op == "full":
            markdown = await self._markdown(session_id)
            if markdown is None:
                return "That handoff is gone."
            await s.sender.send_markdown(chat_id, markdown, document_threshold=s.tuning.document_threshold)
            await self._renew(callback, message_id, markdown)
            return "Full handoff sent."
        if review.state == "forgotten":
            return "Already forgotten."
        if op in ("keep", "forget"):
            # Keep sets memory's own flag too: the web pages' review queue no longer shows it.
            # Memory records who decided too (the web pages show it): the presser, as the card names them.
            who = self._who(callback.user_id)
            keep, forget = memory_review.keep, memory_review.forget
            act = keep(s.eywa, session_id, by=who) if op == "keep" else forget(s.eywa, session_id, by=who)
            state, mark, said = _DONE[op]
            try:
                await act
            except MemoryStoreError as exc:
                logger.info("%s %s: %s", op, session_id, exc)
            await s.state.set_review(session_id, state, review.correction)
            by = DECIDER.get() if chat_id < 0 else ""  # a team room's card says who decided
            await self._mark(chat_id, message_id, f"{mark} Decided by {by}." if by else mark)
            return said
        if op == "correct":
            await s.state.set_pending_correction(chat_id, session_id)
            await s.sender.send(
                chat_id, "✏️ Send the correction as your next message (or reply to the handoff).", html_text=False
            )
            await self._renew(callback, message_id)
            return "Waiting for your correction."
        return "Unknown action."

    def _who(self, user_id: int) -> str:
        """Who decided, as memory records it: the presser as cards name them ("@alice"), else the Telegram id."""
        roles = self.services.roles
        return DECIDER.get() or (roles.name(user_id) if roles is not None else f"telegram {user_id}")

    async def _markdown(self, session_id: str) -> str | None:
        """The stored handoff file of ``session_id``; None when memory has none (or cannot be read)."""
        try:
            view = await self.services.eywa.show(session_id)
        except MemoryStoreError:
            return None
        return view.handoff.markdown if view.handoff is not None else None

    async def _buttons(self, chat_id: int, user_id: int, session_id: str) -> list[list[tuple[str, str]]]:
        """Fresh Keep / Forget / Show full / Correct buttons (each press spends its token)."""
        s = self.services
        ttl = s.tuning.review_ttl_s
        tokens = {
            op: await s.state.new_callback(chat_id, user_id, REVIEW_ACTION, {"session_id": session_id, "op": op}, ttl)
            for op in ("keep", "forget", "full", "correct")
        }
        return [
            [("👍 Keep", tokens["keep"]), ("🗑 Forget", tokens["forget"])],
            [("📄 Show full", tokens["full"]), ("✏️ Correct", tokens["correct"])],
        ]

    async def _renew(self, callback: Callback, message_id: int | None, markdown: str | None = None) -> None:
        """Show full / Correct do not end the review: put fresh buttons back on the card."""
        if message_id is None:
            return
        session_id = str(callback.payload.get("session_id", ""))
        markdown = markdown if markdown is not None else await self._markdown(session_id)
        if markdown is None:
            return
        try:
            handoff = from_markdown(markdown)
        except HandoffFormatError:
            return
        buttons = await self._buttons(callback.chat_id, callback.user_id, handoff.session_id)
        try:
            await self.services.sender.edit(callback.chat_id, message_id, handoff_card(handoff), buttons=buttons)
        except TelegramError as exc:
            logger.debug("could not renew review buttons: %s", exc)

    async def _mark(self, chat_id: int, message_id: int | None, note: str) -> None:
        if message_id is None:
            return
        review_text = note
        try:
            await self.services.sender.edit(chat_id, message_id, escape(review_text))
        except TelegramError as exc:
            logger.debug("could not mark the review: %s", exc)

    async def correct(self, chat_id: int, session_id: str, text: str, user_id: int = 0) -> str:
        """Store a correction with the handoff (memory.handoffs.review: the web pages' Correct does the same), made
        by ``user_id``; returns the reply for the chat."""
        s = self.services
        by = self._who(user_id) if user_id else ""
        try:
            note = await memory_review.correct(s.eywa, session_id, text, scratch=s.tmp_dir, by=by)
        except SessionNotFoundError:
            return "That handoff is no longer in memory."
        except memory_review.ReviewError as exc:
            return f"The correction could not be stored: {exc.reason}"
        await s.state.set_review(session_id, "corrected", note)
        await s.state.set_pending_correction(chat_id, "")
        return "✏️ Correction stored with the handoff; future sessions will see it."
