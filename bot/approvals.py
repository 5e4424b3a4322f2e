"""Tap-to-approve: a tool request from a session becomes a message with Allow / Deny / Allow for this session.

Claude's requests show the tool and its command, file or URL; Codex's show the command it wants to run (and
why), or the files it wants to change with a preview of the diff.

Only the owner who gave the instruction can press (the buttons are BotState callbacks bound to that user),
once, before they expire; an unanswered request is denied after ``approval_timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from telegram.error import TelegramError

from bot.lanes import LANE, branch_label
from bot.progress import escape
from bot.records import Callback
from bot.roles import DECIDER
from bot.services import Services
from relay.approvals import ApprovalDecision, ApprovalHandler, ApprovalRequest

__all__ = ["APPROVE_ACTION", "Approvals", "WaitingApproval", "card_text"]

logger = logging.getLogger(__name__)

APPROVE_ACTION = "approve"
_SHOWN_INPUT = 600
_SHOWN_DIFF = 900


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _shown(request: ApprovalRequest) -> str:
    return _cut(request.summary, _SHOWN_INPUT)


def card_text(request: ApprovalRequest) -> str:
    """The approval message (HTML): who asks, for what."""
    if request.engine != "codex":
        return f"🔐 Claude asks to use <b>{escape(request.tool_name)}</b>:\n<code>{escape(_shown(request))}</code>"
    who = f"Codex ({escape(request.stage)})" if request.stage else "Codex"
    why = f"\n<i>{escape(_cut(request.reason, 200))}</i>" if request.reason else ""
    if request.tool_name == "file change":
        diff = str(request.input.get("diff") or "")
        preview = f"\n<pre>{escape(_cut(diff, _SHOWN_DIFF))}</pre>" if diff else ""
        return f"🔐 {who} asks to change files:\n<code>{escape(_shown(request))}</code>{why}{preview}"
    return f"🔐 {who} asks to run:\n<code>{escape(_shown(request))}</code>{why}"


@dataclass(slots=True)
class WaitingApproval:
    """A request waiting for the owner: its buttons' tokens by choice, and its message once posted."""

    chat_id: int
    user_id: int
    tokens: dict[str, str]
    future: asyncio.Future[str]
    message_id: int | None = None
    decided_by: str = ""  # who pressed (bot.roles.DECIDER): a team room's card says so


class Approvals:
    """Pending approval requests, resolved by a button press (or a spoken answer, which presses one) or the
    timeout."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._waiting: dict[str, WaitingApproval] = {}

    def waiting(self, chat_id: int, user_id: int) -> list[WaitingApproval]:
        """The requests in the chat that ``user_id`` may answer and that are on screen, oldest first."""
        return [
            w
            for w in self._waiting.values()
            if w.chat_id == chat_id and w.user_id == user_id and w.message_id is not None and not w.future.done()
        ]

    def handler(self, chat_id: int, owner: Callable[[], int]) -> ApprovalHandler:
        """The relay's approval handler for one chat; ``owner()`` is the user whose instruction is running.

        "Allow for this session" is kept by the relay's session, which then stops asking for that tool.
        """

        async def decide(request: ApprovalRequest) -> ApprovalDecision:
            answer = await self.ask(chat_id, owner(), request)
            if answer == "session":
                return ApprovalDecision.allow_for_session()
            if answer == "allow":
                return ApprovalDecision.allow()
            why = "the owner denied it" if answer == "deny" else "no answer from the owner in time"
            return ApprovalDecision.deny(f"{request.tool_name} was not approved ({why}). Continue without it.")

        return decide

    async def ask(self, chat_id: int, user_id: int, request: ApprovalRequest) -> str:
        """Post the request and wait: "allow", "deny", "session" or "timeout"."""
        s = self.services
        timeout = s.settings.approval_timeout_s
        group = secrets.token_urlsafe(8)
        tokens = {
            choice: await s.state.new_callback(
                chat_id, user_id, APPROVE_ACTION, {"group": group, "choice": choice}, timeout, group=group
            )
            for choice in ("allow", "deny", "session")
        }
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        waiting = self._waiting[group] = WaitingApproval(chat_id, user_id, tokens, future)
        tag = LANE.get()
        label = branch_label(tag.branch) if tag is not None and tag.chat_id == chat_id else ""
        text = escape(label) + card_text(request)
        message_id: int | None = None
        try:
            message = await s.sender.send(
                chat_id,
                text,
                buttons=[
                    [("✅ Allow", tokens["allow"]), ("⛔ Deny", tokens["deny"])],
                    [("✅ Allow for this session", tokens["session"])],
                ],
            )
            message_id = waiting.message_id = message.message_id
            try:
                decision = await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                decision = "timeout"
                await s.state.retire_callbacks(group)
        except TelegramError as exc:
            logger.warning("could not ask for approval: %s", exc)
            decision = "timeout"
        finally:
            self._waiting.pop(group, None)
        if message_id is not None:
            verdict = {
                "allow": "✅ allowed",
                "deny": "⛔ denied",
                "session": "✅ allowed for this session",
                "timeout": "⌛ denied (no answer in time)",
            }[decision]
            if waiting.decided_by and decision != "timeout" and chat_id < 0:  # a team room: say who decided
                verdict += f" by {escape(waiting.decided_by)}"
            try:
                await s.sender.edit(chat_id, message_id, f"{text}\n{verdict}")
            except TelegramError as exc:
                logger.debug("could not mark the approval: %s", exc)
        return decision

    async def on_callback(self, callback: Callback) -> str:
        """A spent approval button; returns the toast text for the presser."""
        group = str(callback.payload.get("group", ""))
        choice = str(callback.payload.get("choice", "deny"))
        waiting = self._waiting.get(group)
        if waiting is None or waiting.future.done():
            return "That request is no longer waiting."
        waiting.decided_by = DECIDER.get()
        waiting.future.set_result(choice)
        return {"allow": "Allowed", "deny": "Denied", "session": "Allowed for this session"}.get(choice, "OK")

    def deny_all(self) -> None:
        """Shutdown: whatever still waits is denied."""
        for waiting in self._waiting.values():
            if not waiting.future.done():
                waiting.future.set_result("deny")
