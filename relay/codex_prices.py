"""What a Codex turn costs: OpenAI's list prices per model, and the turn's USD from its token counts."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["codex_cost"]

# USD per million tokens: (input, cached input, output), with the models billed at each. Reasoning tokens are
# billed as output and are already inside output_tokens. Unknown models get cost None rather than a guess.
_TIERS: tuple[tuple[tuple[float, float, float], tuple[str, ...]], ...] = (
    ((1.25, 0.125, 10.0), ("gpt-5", "gpt-5-codex", "gpt-5.1", "gpt-5.1-codex", "gpt-5.1-codex-max")),
    ((0.25, 0.025, 2.0), ("gpt-5.1-codex-mini", "gpt-5-mini")),
    ((0.05, 0.005, 0.4), ("gpt-5-nano",)),
    ((1.75, 0.175, 14.0), ("gpt-5.2", "gpt-5.2-codex")),
    ((2.0, 0.5, 8.0), ("gpt-4.1", "o3")),
    ((1.1, 0.275, 4.4), ("o4-mini",)),
)
_PRICES: Mapping[str, tuple[float, float, float]] = {model: prices for prices, models in _TIERS for model in models}


def codex_cost(model: str, input_tokens: int, cached_tokens: int, output_tokens: int) -> float | None:
    """USD for one turn from the price table; None for a model it does not know."""
    prices = _PRICES.get(model)
    if prices is None:
        return None
    fresh, cached, output = prices
    return ((input_tokens - cached_tokens) * fresh + cached_tokens * cached + output_tokens * output) / 1_000_000
