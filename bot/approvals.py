"""Tap-to-approve: a tool request from a session becomes a message with Allow / Deny / Allow for this session.

Only the owner who gave the instruction can press (the buttons are BotState callbacks bound to that user),
once, before they expire; an unanswered request is denied after ``approval_timeout_s``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from claude_agent_sdk import PermissionResult, PermissionResultAllow, PermissionResultDeny, ToolPermissionContext
from telegram.error import TelegramError

from bot.progress import escape
from bot.records import Callback
from bot.services import Services
from relay.claude_options import CanUseTool

__all__ = ["APPROVE_ACTION", "Approvals", "SessionGrants"]

logger = logging.getLogger(__name__)

APPROVE_ACTION = "approve"
_SHOWN_INPUT = 600


@dataclass(slots=True)
class SessionGrants:
    """Tools the owner allowed for the rest of one session."""

    tools: set[str] = field(default_factory=set)


def _describe(tool_name: str, tool_input: dict[str, Any]) -> str:
    shown = tool_input.get("command") or tool_input.get("file_path") or tool_input.get("url")
    text = str(shown) if shown else json.dumps(tool_input, ensure_ascii=False)
    return text if len(text) <= _SHOWN_INPUT else text[:_SHOWN_INPUT] + "…"


class Approvals:
    """Pending approval requests, resolved by a button press or the timeout."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._waiting: dict[str, asyncio.Future[str]] = {}

    def hook(self, chat_id: int, owner: Callable[[], int], grants: SessionGrants) -> CanUseTool:
        """A ``can_use_tool`` for one chat's session; ``owner()`` is the user whose instruction is running."""

        async def can_use_tool(
            tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
        ) -> PermissionResult:
            if tool_name in grants.tools:
                return PermissionResultAllow()
            decision = await self.ask(chat_id, owner(), tool_name, tool_input)
            if decision == "session":
                grants.tools.add(tool_name)
            if decision in ("allow", "session"):
                return PermissionResultAllow()
            why = "the owner denied it" if decision == "deny" else "no answer from the owner in time"
            return PermissionResultDeny(message=f"{tool_name} was not approved ({why}). Continue without it.")

        return can_use_tool

    async def ask(self, chat_id: int, user_id: int, tool_name: str, tool_input: dict[str, Any]) -> str:
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
        self._waiting[group] = future
        shown = escape(_describe(tool_name, tool_input))
        text = f"🔐 Claude asks to use <b>{escape(tool_name)}</b>:\n<code>{shown}</code>"
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
            message_id = message.message_id
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
            try:
                await s.sender.edit(chat_id, message_id, f"{text}\n{verdict}")
            except TelegramError as exc:
                logger.debug("could not mark the approval: %s", exc)
        return decision

    async def on_callback(self, callback: Callback) -> str:
        """A spent approval button; returns the toast text for the presser."""
        group = str(callback.payload.get("group", ""))
        choice = str(callback.payload.get("choice", "deny"))
        future = self._waiting.get(group)
        if future is None or future.done():
            return "That request is no longer waiting."
        future.set_result(choice)
        return {"allow": "Allowed", "deny": "Denied", "session": "Allowed for this session"}.get(choice, "OK")

    def deny_all(self) -> None:
        """Shutdown: whatever still waits is denied."""
        for future in self._waiting.values():
            if not future.done():
                future.set_result("deny")
