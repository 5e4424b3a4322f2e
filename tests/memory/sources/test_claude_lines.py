"""The parts of one Claude Code line: content blocks, meta lines, system text, the subagent a line names."""

from __future__ import annotations

from memory.models import BlockKind
from memory.sources.claude_lines import agent_of, blocks_of, is_meta, system_text
from memory.sources.jsonl import TextClipper, identity


def clip(limit: int = 50) -> TextClipper:
    return TextClipper(identity, limit)


def test_every_block_kind_becomes_a_block_and_unknown_kinds_are_skipped() -> None:
    content = [
        "a bare string is text",
        {"type": "thinking", "thinking": "hmm"},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "out"}], "is_error": True},
        {"type": "image", "source": {"media_type": "image/png"}},
        {"type": "document", "source": {}},
        {"type": "server_tool_use_from_the_future"},
        42,
    ]
    blocks = blocks_of(content, clip(), None)
    assert [b.kind for b in blocks] == [
        BlockKind.TEXT,
        BlockKind.THINKING,
        BlockKind.TOOL_USE,
        BlockKind.TOOL_RESULT,
        BlockKind.IMAGE,
        BlockKind.TEXT,
    ]
    assert blocks[2].tool_name == "Bash" and blocks[2].tool_input == {"command": "ls"}
    assert blocks[3].text == "out" and blocks[3].is_error and blocks[3].tool_id == "t1"
    assert blocks[4].text == "image/png" and blocks[5].text == "[document]"


def test_an_empty_tool_result_takes_its_text_from_tool_use_result() -> None:
    (block,) = blocks_of([{"type": "tool_result", "tool_use_id": "t", "content": ""}], clip(), "kept here")
    assert block.text == "kept here"


def test_long_tool_output_is_clipped_and_the_cut_counted_while_prose_keeps_more() -> None:
    (result,) = blocks_of([{"type": "tool_result", "content": "x" * 80}], clip(50), None)
    assert (len(result.text), result.truncated_chars) == (50, 30)
    (prose,) = blocks_of("y" * 80, clip(50), None)
    assert (prose.text, prose.truncated_chars) == ("y" * 80, 0)


def test_command_echo_lines_are_meta_but_a_user_question_is_not() -> None:
    echo = blocks_of("<command-name>/clear</command-name>", clip(), None)
    asked = blocks_of("why does <command-name> appear here?", clip(), None)
    assert is_meta({}, echo) and not is_meta({}, asked)
    assert is_meta({"isMeta": True}, asked)


def test_system_text_says_what_its_subtype_carries() -> None:
    assert system_text({"content": "Conversation compacted"}) == "Conversation compacted"
    assert system_text({"subtype": "turn_duration", "durationMs": 1234.5}) == "1234"
    assert system_text({"subtype": "api_error", "error": {"message": "overloaded"}}) == "overloaded"
    assert system_text({"subtype": "api_error", "retryAttempt": 2, "maxRetries": 10}) == "retry 2 of 10"
    assert system_text({"subtype": "unknown"}) == ""


def test_the_subagent_a_line_names_comes_from_either_place() -> None:
    assert agent_of({"agentId": "a1"}) == "a1"
    assert agent_of({"toolUseResult": {"agentId": "a2"}}) == "a2"
    assert agent_of({"toolUseResult": "plain text"}) == ""
