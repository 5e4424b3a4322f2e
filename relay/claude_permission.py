"""The Claude Code permission callback: the SDK's ``can_use_tool`` turned into our approval seam and back.

The SDK's types are translated here and nowhere else: a tool call becomes an :class:`ApprovalRequest` for
the caller's :data:`ApprovalHandler`, its :class:`ApprovalDecision` the SDK's allow or deny. Tools the owner
allowed "for this session" are kept by the gate, which lives as long as its session.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import claude_agent_sdk as sdk
from claude_agent_sdk import PermissionResult, ToolPermissionContext

from relay.approvals import ApprovalDecision, ApprovalHandler, ApprovalRequest
from relay.events import PermissionRequest, RelayEvent
from relay.settings import RelaySettings

__all__ = ["PermissionGate"]


class PermissionGate:
    """One session's ``can_use_tool``: asks ``approve`` (denies when there is none), remembers session grants."""

    def __init__(
        self,
        settings: RelaySettings,
        approve: ApprovalHandler | None,
        emit: Callable[[RelayEvent], Awaitable[None]],
        session_id: Callable[[], str],
    ) -> None:
        self.settings = settings
        self._approve = approve
        self._emit = emit
        self._session_id = session_id
        self.granted: set[str] = set()  # tools the owner allowed for the rest of this session

    async def __call__(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        request = ApprovalRequest(
            self._session_id(), tool_name, dict(tool_input), context.tool_use_id or uuid.uuid4().hex
        )
        await self._emit(PermissionRequest(request.session_id, tool_name, dict(tool_input), request.request_id))
        if tool_name in self.settings.disallowed_tools:
            return sdk.PermissionResultDeny(message=f"{tool_name} is disallowed by the owner's configuration.")
        if tool_name in self.granted:
            return sdk.PermissionResultAllow()
        if self._approve is None:
            return sdk.PermissionResultDeny(
                message=(
                    f"{tool_name} needs the owner's approval (permission mode {self.settings.permission_mode!r}, not "
                    "in the allowed tools) and no one is here to approve it: denied. Continue without it or ask the "
                    "owner."
                )
            )
        decision = await self._approve(request)
        if decision.verdict == "allow_for_session":
            self.granted.add(tool_name)
        return _sdk_result(decision, tool_name)


def _sdk_result(decision: ApprovalDecision, tool_name: str) -> PermissionResult:
    if decision.allowed:
        return sdk.PermissionResultAllow()
    return sdk.PermissionResultDeny(message=decision.message or f"{tool_name} was not approved. Continue without it.")
