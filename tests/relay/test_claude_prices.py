"""Claude's list prices: a model call's USD from its usage, the way the Claude Code CLI prices it."""

from __future__ import annotations

import pytest

from relay.claude_prices import claude_cost, claude_price


def test_input_and_output_are_priced_per_million_tokens() -> None:
    # Opus 5.5 ($4 / $20): what the bundled CLI reported for the same usage against the Anthropic double.
    assert claude_cost("claude-opus-5-5", {"input_tokens": 200_000, "output_tokens": 1_000}) == pytest.approx(0.82)
    assert claude_cost("claude-sonnet-4-6", {"input_tokens": 1_000_000, "output_tokens": 0}) == pytest.approx(3.0)
    assert claude_cost("claude-haiku-4-5", {"output_tokens": 1_000_000}) == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("model", "input_usd", "output_usd"),
    [
        ("claude-sonnet-4-5-20250929", 3.0, 15.0),  # a dated snapshot prices as its model
        ("claude-opus-4-6[1m]", 5.0, 25.0),  # the 1M-context form too
        ("claude-opus-4-1-20250805", 15.0, 75.0),
        ("claude-opus-4-20250514", 15.0, 75.0),
        ("claude-sonnet-4-20250514", 3.0, 15.0),
        ("claude-haiku-4-5-20251001", 1.0, 5.0),
        ("claude-3-5-haiku-20241022", 0.8, 4.0),
        ("Claude-Opus-4-5", 5.0, 25.0),
    ],
)
def test_model_ids_are_read_with_dates_and_context_suffix(model: str, input_usd: float, output_usd: float) -> None:
    price = claude_price(model)
    assert price is not None and (price.input, price.output) == (input_usd, output_usd)


@pytest.mark.parametrize("model", ["claude-double", "gpt-5", "claude-opus-9", "", "opus"])
def test_an_unknown_model_has_no_price_rather_than_a_guess(model: str) -> None:
    assert claude_price(model) is None
    assert claude_cost(model, {"input_tokens": 1_000}) is None


def test_cache_reads_and_writes_are_priced_by_their_lifetime() -> None:
    usage = {
        "cache_read_input_tokens": 1_000_000,  # $0.30 on Sonnet 4.5
        "cache_creation_input_tokens": 3_000_000,  # 1M of them for an hour ($6), 2M for 5 minutes ($3.75 each)
        "cache_creation": {"ephemeral_1h_input_tokens": 1_000_000, "ephemeral_5m_input_tokens": 2_000_000},
    }
    assert claude_cost("claude-sonnet-4-5", usage) == pytest.approx(0.3 + 6.0 + 7.5)
    unsplit = {"cache_creation_input_tokens": 1_000_000}  # no split reported: the 5-minute price
    assert claude_cost("claude-sonnet-4-5", unsplit) == pytest.approx(3.75)


def test_a_long_haiku_5_5_prompt_pays_the_higher_rates_on_every_token() -> None:
    short = {"input_tokens": 100_000, "output_tokens": 1_000_000}
    long = {"input_tokens": 60_000, "cache_read_input_tokens": 50_000, "output_tokens": 1_000_000}
    assert claude_cost("claude-haiku-5-5", short) == pytest.approx(0.01 + 0.5)
    assert claude_cost("claude-haiku-5-5", long) == pytest.approx(0.03 + 0.0025 + 2.5)


def test_us_only_inference_web_searches_and_odd_fields() -> None:
    base = {"input_tokens": 1_000_000}
    assert claude_cost("claude-opus-4-5", {**base, "inference_geo": "us"}) == pytest.approx(5.5)
    searches = {**base, "server_tool_use": {"web_search_requests": 3}}
    assert claude_cost("claude-opus-4-5", searches) == pytest.approx(5.03)
    odd = {"input_tokens": -5, "output_tokens": "12", "cache_read_input_tokens": True, "cache_creation": "x"}
    assert claude_cost("claude-opus-4-5", odd) == 0.0
    assert claude_cost("claude-opus-4-5", None) == 0.0
