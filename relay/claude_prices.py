"""What a Claude model call costs: Anthropic's list prices per model, and one call's USD from its token usage.

Claude Code reports a turn's cost only when the turn ends (``ResultMessage.total_cost_usd``); this prices each
model call as it comes (an assistant message's ``usage``), so a spending cap can stop a run in the middle of a
turn. The figures are Anthropic's list prices (platform.claude.com, "Model pricing"), the same the bundled
Claude Code CLI prices with (its model catalog): the turn's reported cost replaces these estimates. Unknown
models get cost None rather than a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ClaudePrice", "claude_cost", "claude_price"]


@dataclass(frozen=True, slots=True)
class ClaudePrice:
    """USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    long: ClaudePrice | None = None  # the rates of a prompt over ``long_above`` tokens (Haiku 5.5)
    long_above: int = 0


def _tier(input: float, output: float, cache_read: float | None = None) -> ClaudePrice:
    # Cache writes cost 1.25× (5 minutes) and 2× (1 hour) the input price; a hit 0.1× unless the model says less.
    return ClaudePrice(input, output, input * 1.25, input * 2, input / 10 if cache_read is None else cache_read)


_HAIKU_55_LONG = _tier(0.5, 2.5)
_PRICES: Mapping[str, ClaudePrice] = {
    "claude-fable-5": _tier(10, 50),
    "claude-fable-5-1": _tier(10, 50, 0.25),
    "claude-fable-5-2": _tier(8, 40, 0.2),
    "claude-mythos-5": _tier(10, 50),
    "claude-mythos-5-1": _tier(10, 50, 0.25),
    "claude-mythos-5-2": _tier(8, 40, 0.2),
    "claude-opus-5-5": _tier(4, 20, 0.2),
    "claude-opus-5": _tier(5, 25),
    "claude-opus-4-8": _tier(5, 25),
    "claude-opus-4-7": _tier(5, 25),
    "claude-opus-4-6": _tier(5, 25),
    "claude-opus-4-5": _tier(5, 25),
    "claude-opus-4-1": _tier(15, 75),
    "claude-opus-4-0": _tier(15, 75),
    "claude-opus-4": _tier(15, 75),
    "claude-sonnet-5-5": _tier(2, 10, 0.1),
    "claude-sonnet-5": _tier(2, 10),
    "claude-sonnet-4-6": _tier(3, 15),
    "claude-sonnet-4-5": _tier(3, 15),
    "claude-sonnet-4-0": _tier(3, 15),
    "claude-sonnet-4": _tier(3, 15),
    "claude-3-7-sonnet": _tier(3, 15),
    "claude-3-5-sonnet": _tier(3, 15),
    "claude-haiku-5-5": ClaudePrice(0.1, 0.5, 0.125, 0.2, 0.01, _HAIKU_55_LONG, 100_000),
    "claude-haiku-4-5": _tier(1, 5),
    "claude-3-5-haiku": ClaudePrice(0.8, 4, 1, 1.6, 0.08),
    "claude-3-haiku": ClaudePrice(0.25, 1.25, 0.3, 0.5, 0.03),
}
_WEB_SEARCH_USD = 0.01  # per request of the server-side web search tool
_US_ONLY = 1.1  # inference kept in the US (usage.inference_geo "us") costs 10 % more
# A dated snapshot (claude-sonnet-4-5-20250929) and the 1M-context form (claude-opus-4-6[1m]) price as the model.
_SUFFIX = re.compile(r"(-\d{8})?(\[1m\])?$")


def claude_price(model: str) -> ClaudePrice | None:
    """The list prices of a Claude model id (with or without its date); None for a model the table does not know."""
    return _PRICES.get(_SUFFIX.sub("", model.strip().lower(), count=1))


def claude_cost(model: str, usage: Mapping[str, Any] | None) -> float | None:
    """USD for one model call from its ``usage`` (the Messages API's field names); None for an unknown model."""
    price = claude_price(model)
    if price is None:
        return None
    u = usage or {}
    fresh = _count(u.get("input_tokens"))
    output = _count(u.get("output_tokens"))
    read = _count(u.get("cache_read_input_tokens"))
    written = _count(u.get("cache_creation_input_tokens"))
    split = u.get("cache_creation")
    one_hour = min(written, _count(split.get("ephemeral_1h_input_tokens"))) if isinstance(split, Mapping) else 0
    if price.long is not None and fresh + read + written > price.long_above:
        price = price.long
    usd = (
        fresh * price.input
        + output * price.output
        + read * price.cache_read
        + (written - one_hour) * price.cache_write_5m
        + one_hour * price.cache_write_1h
    ) / 1_000_000
    if u.get("inference_geo") == "us":
        usd *= _US_ONLY
    tools = u.get("server_tool_use")
    searches = _count(tools.get("web_search_requests")) if isinstance(tools, Mapping) else 0
    return usd + searches * _WEB_SEARCH_USD


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
