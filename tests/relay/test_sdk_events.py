"""SDK messages become our events at the boundary; kinds we do not know are skipped, never fatal."""

from __future__ import annotations

import claude_agent_sdk as sdk
import pytest

from relay.events import SpendTick, TextDelta, ToolEnd, ToolStart
from relay.sdk_events import SpendMeter, translate, usage_of


def test_assistant_text_and_tool_use_become_events_of_the_session_known_so_far() -> None:
    message = sdk.AssistantMessage(
        content=[sdk.TextBlock("on it"), sdk.ToolUseBlock("t1", "Bash", {"command": "ls"})],
        model="m",
        session_id="new-id",
    )
    reported, events = translate(message, "old-id")
    assert reported == "new-id"
    assert events == [TextDelta("old-id", "on it"), ToolStart("old-id", "t1", "Bash", {"command": "ls"})]


def test_a_tool_result_ends_its_tool_with_the_first_line_of_its_output() -> None:
    content = [{"type": "text", "text": "\n  total 3\nfile-a\nfile-b"}]
    message = sdk.UserMessage(content=[sdk.ToolResultBlock("t1", content, is_error=True)])
    assert translate(message, "s") == ("", [ToolEnd("s", "t1", True, "total 3")])


def test_the_init_message_reports_the_session_id_and_other_kinds_are_skipped() -> None:
    assert translate(sdk.SystemMessage("init", {"session_id": "abc"}), "s") == ("abc", [])
    assert translate(sdk.SystemMessage("compact_boundary", {}), "s") == ("", [])
    assert translate(sdk.UserMessage(content="a plain prompt echo"), "s") == ("", [])
    assert translate(object(), "s") == ("", [])


def test_usage_reads_the_cli_field_names_and_missing_ones_count_as_zero() -> None:
    usage = usage_of({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100}, 0.25)
    tokens = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
    assert tokens == (10, 5, 100, 0)
    assert usage.cost_usd == 0.25 and usage_of(None, None).input_tokens == 0


def _assistant(message_id: str, usage: dict[str, int] | None, model: str = "claude-opus-5-5") -> sdk.AssistantMessage:
    return sdk.AssistantMessage(content=[sdk.TextBlock("…")], model=model, usage=usage, message_id=message_id)


def test_the_meter_prices_each_model_call_once_though_the_cli_passes_it_on_per_block() -> None:
    meter = SpendMeter()
    usage = {"input_tokens": 200_000, "output_tokens": 0}
    first = meter.tick(_assistant("msg-1", usage), "s")
    assert first == SpendTick("s", "claude", "claude-opus-5-5", pytest.approx(0.8), 200_000)
    assert meter.tick(_assistant("msg-1", usage), "s") is None  # the call's next block: the same usage
    grown = meter.tick(_assistant("msg-1", {"input_tokens": 200_000, "output_tokens": 1_000}), "s")
    assert grown is not None and grown.tokens == 1_000 and grown.cost_usd == pytest.approx(0.02)
    second = meter.tick(_assistant("msg-2", {"input_tokens": 10}), "s")
    assert second is not None and second.tokens == 10


def test_the_meter_leaves_unknown_models_unpriced_and_skips_messages_without_usage() -> None:
    meter = SpendMeter()
    unknown = meter.tick(_assistant("m", {"input_tokens": 5, "output_tokens": 5}, model="claude-double"), "s")
    assert unknown == SpendTick("s", "claude", "claude-double", None, 10)
    assert meter.tick(_assistant("n", None), "s") is None
    assert meter.tick(sdk.UserMessage(content="hi"), "s") is None
    meter.turn_ended()  # the turn's result replaced its ticks: a repeated id counts again
    assert meter.tick(_assistant("m", {"input_tokens": 5}, model="claude-double"), "s") is not None
