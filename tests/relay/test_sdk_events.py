"""SDK messages become our events at the boundary; kinds we do not know are skipped, never fatal."""

from __future__ import annotations

import claude_agent_sdk as sdk

from relay.events import TextDelta, ToolEnd, ToolStart
from relay.sdk_events import translate, usage_of


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
