"""claude-agent-sdk messages → our events, at the boundary (the SDK's types go no further than here).

Text and tool use from the assistant, tool results from the user side, and the session id the CLI
reports; the result message is read by the session itself (it needs the running cost). Any other kind
is skipped with a debug log, so a newer SDK with new message kinds does not break a run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import claude_agent_sdk as sdk

from relay.events import RelayEvent, TextDelta, ToolEnd, ToolStart, Usage

__all__ = ["translate", "usage_of"]

logger = logging.getLogger(__name__)


def translate(message: Any, session_id: str) -> tuple[str, list[RelayEvent]]:
    """(the session id the message reports, or ""; its events, attributed to ``session_id``)."""
    if isinstance(message, sdk.SystemMessage):
        if message.subtype == "init":
            return str(message.data.get("session_id") or ""), []
        logger.debug("skipped system message %s", message.subtype)
        return "", []
    events: list[RelayEvent] = []
    if isinstance(message, sdk.AssistantMessage):
        for block in message.content:
            if isinstance(block, sdk.TextBlock):
                events.append(TextDelta(session_id, block.text))
            elif isinstance(block, sdk.ToolUseBlock):
                events.append(ToolStart(session_id, block.id, block.name, dict(block.input)))
        return message.session_id or "", events
    if isinstance(message, sdk.UserMessage):
        if isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, sdk.ToolResultBlock):
                    line = _first_line(block.content)
                    events.append(ToolEnd(session_id, block.tool_use_id, bool(block.is_error), line))
        return "", events
    logger.debug("skipped SDK message %s", type(message).__name__)
    return "", []


def usage_of(raw: Mapping[str, Any] | None, cost: float | None) -> Usage:
    """A result message's token usage (the CLI's field names) and the cost of this run."""
    u = raw or {}
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0),
        cost_usd=cost,
    )


def _first_line(content: Any) -> str:
    if isinstance(content, list):
        content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    text = str(content or "").strip()
    return text.splitlines()[0][:200] if text else ""
