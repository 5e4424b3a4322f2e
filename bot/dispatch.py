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
from bot.keys_command import KEYS_ACTION, KeyDesk
from bot.records import Callback
from bot.restart import RESTART_ACTION, Restart
from bot.review import REVIEW_ACTION, Reviews
from bot.roles import DECIDER, ONLY_APPROVERS, ONLY_OWNER, VIEWER_COMMANDS, VIEWER_REFUSAL, Role
from bot.schedule_commands import SCHEDULE_ACTION, ScheduleCommands
from bot.services import Services
from bot.session_list import SESSIONS_ACTION, SessionList
from bot.sessions import SessionManager
from bot.team_commands import TeamCommands
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


# The buttons that decide (approvers and the owner only): what a tool may do, what memory keeps, what a branch's
# work becomes, whether a cut run resumes.
_DECIDING_OPS = {
    REVIEW_ACTION: frozenset({"keep", "forget", "correct"}),
    BRANCH_ACTION: frozenset(
        {"merge", "resolve", "push", "push-confirmed", "discard", "discard-confirmed", "discard-for-good"}
    ),
}
_OWNER_COMMANDS = frozenset({"role", "key", "keys"})


def decides(callback: Callback) -> bool:
    """Whether pressing the button is a decision only approvers and the owner may make."""
    if callback.action in (APPROVE_ACTION, RESTART_ACTION, KEYS_ACTION):
        return True
    ops = _DECIDING_OPS.get(callback.action)
    return ops is not None and str(callback.payload.get("op", "")) in ops


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
    team: TeamCommands | None = None  # /role, /roles (bot.roles)
    keys: KeyDesk | None = None  # /key, /keys (bot.keys_command)

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

    def _role(self, user_id: int) -> Role | None:
        """The sender's role; "owner" when roles are not in use (the bot's parts built without a RoleBook)."""
        roles = self.services.roles
        return "owner" if roles is None else roles.role_of(user_id)

    async def _on_message(self, message: Message) -> None:
        s = self.services
        chat_id = message.chat_id
        user_id = message.from_user.id if message.from_user else 0
        role = self._role(user_id)
        if role is None:
            return  # a role taken away with /role … none: as a stranger, nothing
        data = message.to_dict()
        forwarded = forward_origin_name(data)
        text = quote_forwarded(data)
        command = text.startswith("/") and forwarded is None and message.effective_attachment is None
        if role == "viewer" and not (command and text[1:].split(" ", 1)[0].split("@", 1)[0].lower() in VIEWER_COMMANDS):
            if not any(key in data for key in _SERVICE_KEYS):
                await self._reply(chat_id, VIEWER_REFUSAL, reply_to=message.message_id)
            return
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
        if not any(ch.isprintable() and not ch.isspace() for ch in text):  # empty, spaces, zero-width marks
            await self._reply(chat_id, "Send text or a voice note; other kinds are not supported yet.")
            return
        if text.startswith("/") and forwarded is None:
            head, _, args = text.partition(" ")
            name, _, addressee = head[1:].partition("@")
            if addressee and addressee.lower() != (self.services.sender.bot.username or "").lower():
                return  # "/help@other_bot" in a group is another bot's command
            name = name.lower()
            if name in _OWNER_COMMANDS and role != "owner":
                await self._reply(chat_id, ONLY_OWNER, reply_to=message.message_id)
            elif name in ("role", "roles") and self.team is not None:
                await self.team.command(name, args, message)
            elif name in ("key", "keys") and self.keys is not None:
                await self.keys.command(name, args, chat_id, user_id)
            else:
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
            if role not in ("owner", "approver"):  # a correction is a memory decision
                await self._reply(chat_id, ONLY_APPROVERS, reply_to=message.message_id)
                return
            answer = await self.reviews.correct(chat_id, target, text, user_id)
            await s.sender.send(chat_id, answer, html_text=False)
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
        role = self._role(first.from_user.id if first.from_user else 0)
        if role in (None, "viewer"):
            if role == "viewer":
                await self._reply(first.chat_id, VIEWER_REFUSAL, reply_to=first.message_id)
            return
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
        roles = s.roles
        peeked = await s.state.peek_callback(token) if roles is not None else None
        deciding = peeked is not None and decides(peeked)
        if peeked is not None and deciding:
            if roles is None or not roles.may_decide(user_id):
                return ONLY_APPROVERS  # a member's tap: nothing spent, nothing changed
            # In a team room (a group) any approver decides a card, whoever's instruction made it; in a private
            # chat a button stays its own user's.
            bound = peeked.user_id if peeked.chat_id < 0 else user_id
            callback = await s.state.use_callback(token, bound)
        else:
            callback = await s.state.use_callback(token, user_id)
        if callback is None:
            return None
        name = roles.name(user_id) if roles is not None else ""
        marker = DECIDER.set(name)
        try:
            toast = await self._handle_press(callback, message_id)
        finally:
            DECIDER.reset(marker)
        if deciding:
            choice = str(callback.payload.get("choice") or callback.payload.get("op") or "")
            await s.state.record_decision(callback.chat_id, message_id, callback.action, choice, user_id, name)
        return toast

    async def _handle_press(self, callback: Callback, message_id: int | None) -> str:
        op = str(callback.payload.get("op", ""))
        if callback.action == APPROVE_ACTION:
            toast = await self.approvals.on_callback(callback)
        elif callback.action == REVIEW_ACTION:
            toast = await self.reviews.on_callback(callback, message_id)
        elif callback.action == SESSIONS_ACTION:
            toast = await self.session_list.on_callback(callback)
        elif callback.action == VOICE_ACTION:
            toast = await self.voice.on_callback(
                callback.chat_id,
                callback.user_id,
                op,
                str(callback.payload.get("text", "")),
                str(callback.payload.get("run", "")),  # a flagged note's alternative (bot.voice.flow)
            )
        elif callback.action == SCHEDULE_ACTION:
            toast = await self.schedule_commands.on_callback(callback)
        elif callback.action == BRANCH_ACTION:
            toast = await self.branch_desk.on_callback(callback)
        elif callback.action == RESTART_ACTION and self.restart is not None:
            toast = await self.restart.on_callback(callback, message_id)
        elif callback.action == KEYS_ACTION and self.keys is not None:
            toast = await self.keys.on_callback(callback, message_id)
        else:
            toast = "Unknown button."
        return toast
