"""Where each stored update goes: a button to what it stands for, a command to bot.commands, a voice note to
bot.voice.flow, files to bot.attachments, a reply to a handoff to its correction, and any other text to its
lane (bot.lane_router) and that lane's session (bot.sessions)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from telegram import Message, Update

from bot.approvals import APPROVE_ACTION, Approvals
from bot.attachments import Attachments
from bot.auth import forward_origin_name, quote_forwarded
from bot.branch_desk import BRANCH_ACTION, BranchDesk
from bot.commands import Commands
from bot.restart import RESTART_ACTION, Restart
from bot.review import REVIEW_ACTION, Reviews
from bot.schedule_commands import SCHEDULE_ACTION, ScheduleCommands
from bot.services import Services
from bot.session_list import SESSIONS_ACTION, SessionList
from bot.sessions import SessionManager
from bot.voice.flow import VOICE_ACTION, VoiceFlow

__all__ = ["EXPIRED", "Dispatch", "topic_of"]

EXPIRED = "This button is not for you, or it has expired."
# Telegram's service messages about forum topics (sent as messages without text).
_SERVICE_KEYS = (
    "forum_topic_created",
    "forum_topic_edited",
    "forum_topic_closed",
    "forum_topic_reopened",
    "general_forum_topic_hidden",
    "general_forum_topic_unhidden",
)


def topic_of(message: Message) -> int | None:
    """The forum topic a message was written in (None outside forum topics)."""
    return message.message_thread_id if message.is_topic_message else None


@dataclass
class Dispatch:
    services: Services
    sessions: SessionManager
    commands: Commands
    voice: VoiceFlow
    attachments: Attachments
    reviews: Reviews
    approvals: Approvals
    session_list: SessionList
    branch_desk: BranchDesk
    schedule_commands: ScheduleCommands
    restart: Restart | None = None  # set once made: Restart needs the intake, which needs this

    async def route(self, update: Update) -> None:
        if update.callback_query is not None:
            await self._on_callback(update)
        elif update.message is not None:
            await self._on_message(update.message)
        elif update.edited_message is not None:
            # An edited instruction already went as first sent: say so rather than leave the owner thinking it
            # changed. Other edits (a live location moving, a command, an attachment's caption) pass silently.
            edited = update.edited_message
            if edited.text and not edited.text.startswith("/") and edited.effective_attachment is None:
                await self._reply(
                    edited.chat_id,
                    "✏️ Edits are not applied: the message went as first sent. Send a new message to change it.",
                    reply_to=edited.message_id,
                )

    async def _reply(self, chat_id: int, text: str, *, reply_to: int | None = None) -> None:
        await self.services.sender.send(chat_id, text, html_text=False, reply_to=reply_to)

    async def _on_message(self, message: Message) -> None:
        s = self.services
        chat_id = message.chat_id
        user_id = message.from_user.id if message.from_user else 0
        data = message.to_dict()
        forwarded = forward_origin_name(data)
        if message.voice is not None:
            await self.voice.handle(
                chat_id, user_id, message.voice, forwarded_from=forwarded, thread_id=topic_of(message)
            )
            return
        if message.effective_attachment is not None:
            # A photo or file runs with its caption, or not at all (see bot.attachments).
            await self.voice.take_edit(chat_id)  # like a text, it replaces a transcript awaiting Run
            await self.attachments.handle(chat_id, user_id, [message])
            return
        if any(key in data for key in _SERVICE_KEYS):
            return  # a topic made, renamed or closed by a person: nothing to run or answer
        text = quote_forwarded(data)
        if not any(ch.isprintable() and not ch.isspace() for ch in text):  # empty, spaces, zero-width marks
            await self._reply(chat_id, "Send text or a voice note; other kinds are not supported yet.")
            return
        if text.startswith("/") and forwarded is None:
            head, _, args = text.partition(" ")
            name, _, addressee = head[1:].partition("@")
            if addressee and addressee.lower() != (self.services.sender.bot.username or "").lower():
                return  # "/help@other_bot" in a group is another bot's command
            await self.commands.handle(name, args, chat_id, user_id)
            return
        forwarded_text = forwarded is not None
        chat = await s.state.chat(chat_id)
        replied = message.reply_to_message
        target = chat.pending_correction
        if replied is not None and not target:
            review = await s.state.review_for_message(chat_id, replied.message_id)
            target = review.session_id if review is not None else ""
        if target and not forwarded_text:
            await s.sender.send(chat_id, await self.reviews.correct(chat_id, target, text), html_text=False)
            return
        await self.voice.take_edit(chat_id)  # a text while a transcript waits replaces the transcript
        routed = await self.sessions.router.route(
            chat_id,
            text,
            reply_to=replied.message_id if replied is not None else None,
            thread_id=topic_of(message),
            forum=bool(message.chat.is_forum),
            now=time.time(),
        )
        if isinstance(routed, str):
            await self._reply(chat_id, routed, reply_to=message.message_id)
            return
        if routed.note:
            await self._reply(chat_id, routed.note, reply_to=message.message_id)
        await self.sessions.submit(chat_id, user_id, routed.text, "text", branch=routed.branch)

    async def route_album(self, updates: list[Update]) -> None:
        """Several photos or files sent together (one ``media_group_id``): one instruction, with every file."""
        messages = [u.message for u in updates if u.message is not None]
        if not messages:
            return
        first = messages[0]
        await self.voice.take_edit(first.chat_id)
        await self.attachments.handle(first.chat_id, first.from_user.id if first.from_user else 0, messages)

    async def _on_callback(self, update: Update) -> None:
        s = self.services
        query = update.callback_query
        assert query is not None
        message_id = query.message.message_id if query.message is not None else None
        toast = await self.press(query.data or "", query.from_user.id, message_id)
        await s.sender.answer_callback(query.id, EXPIRED if toast is None else toast)

    async def press(self, token: str, user_id: int, message_id: int | None) -> str | None:
        """Spend a button, tapped or answered by voice (bot.voice.answers), and do what it stands for.

        Returns the toast, or None when the button is not ``user_id``'s, or was spent or expired.
        """
        s = self.services
        callback = await s.state.use_callback(token, user_id)
        if callback is None:
            return None
        op = str(callback.payload.get("op", ""))
        if callback.action == APPROVE_ACTION:
            toast = await self.approvals.on_callback(callback)
        elif callback.action == REVIEW_ACTION:
            toast = await self.reviews.on_callback(callback, message_id)
        elif callback.action == SESSIONS_ACTION:
            toast = await self.session_list.on_callback(callback)
        elif callback.action == VOICE_ACTION:
            toast = await self.voice.on_callback(
                callback.chat_id, callback.user_id, op, str(callback.payload.get("text", ""))
            )
        elif callback.action == SCHEDULE_ACTION:
            toast = await self.schedule_commands.on_callback(callback)
        elif callback.action == BRANCH_ACTION:
            toast = await self.branch_desk.on_callback(callback)
        elif callback.action == RESTART_ACTION and self.restart is not None:
            toast = await self.restart.on_callback(callback, message_id)
        else:
            toast = "Unknown button."
        return toast
