"""claude-agent-sdk messages → our events, at the boundary (the SDK's types go no further than here).

Text and tool use from the assistant, tool results from the user side, and the session id the CLI
reports; the result message is read by the session itself (it needs the running cost). Any other kind
is skipped with a debug log, so a newer SDK with new message kinds does not break a run. A
:class:`SpendMeter` prices each model call of a running turn as its assistant message comes (SpendTick).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import claude_agent_sdk as sdk

from relay.claude_prices import claude_cost
from relay.events import RelayEvent, SpendTick, TextDelta, ToolEnd, ToolStart, Usage

__all__ = ["SpendMeter", "translate", "usage_of"]

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


class SpendMeter:
    """One SpendTick per model call of a turn, priced from its usage (relay.claude_prices).

    Claude Code passes a call's reply on as one assistant message per content block, each carrying the
    call's usage as known then (the input and cache tokens in full, the output as counted so far): a call
    (its message id) is counted once, and again only by what it grew.
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, float]] = {}  # message id → (tokens, USD) already ticked

    def tick(self, message: Any, session_id: str) -> SpendTick | None:
        """The spend an assistant message adds, or None (no usage, or nothing new)."""
        if not isinstance(message, sdk.AssistantMessage) or not message.usage:
            return None
        tokens = usage_of(message.usage, None).tokens
        cost = claude_cost(message.model, message.usage)
        key = message.message_id or ""  # a message without an id counts on its own
        seen_tokens, seen_cost = self._seen.get(key, (0, 0.0)) if key else (0, 0.0)
        if tokens <= seen_tokens:
            return None
        if key:
            self._seen[key] = (tokens, max(cost or 0.0, seen_cost))
        added = None if cost is None else max(0.0, cost - seen_cost)
        return SpendTick(session_id, "claude", message.model, added, tokens - seen_tokens)

    def turn_ended(self) -> None:
        """The turn's result is in (its reported cost replaces the ticks): forget its calls."""
        self._seen.clear()


def _first_line(content: Any) -> str:
    if isinstance(content, list):
        content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    text = str(content or "").strip()
    return text.splitlines()[0][:200] if text else ""
