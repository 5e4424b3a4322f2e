"""The ``relay`` MCP tools: directly, and through the real Claude Code CLI (Anthropic double) calling
``mcp__relay__codex`` that runs the real Codex CLI (OpenAI double)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

from relay.codex import CodexEngine, CodexTurn
from relay.events import RelayEvent, StageEnd, StageStart
from relay.relay_tools import TOOL_NAMES, RelayTools, build_relay_server
from relay.stages import DEFAULT_STAGES, StageConfig
from tests.doubles.anthropic import AnthropicDouble, ToolUse, last_user_text
from tests.doubles.openai import HttpError, OpenAIDouble, Text, input_texts

FOOTER = re.compile(
    r"— codex · (?P<model>\S+) · thread (?P<thread>[0-9a-f-]{36}) · \d+\.\d s · (?P<cost>\$\d+\.\d{4}|cost unknown)"
)
STAGES: dict[str, StageConfig] = {**DEFAULT_STAGES, "plan": replace(DEFAULT_STAGES["plan"], model="gpt-5.5")}


class Recorder:
    def __init__(self) -> None:
        self.events: list[RelayEvent] = []
        self.turns: list[CodexTurn] = []

    async def event(self, event: RelayEvent) -> None:
        self.events.append(event)

    async def turn(self, turn: CodexTurn) -> None:
        self.turns.append(turn)


AskClaude = Callable[[str, Recorder], Awaitable[None]]


@pytest.fixture
def ask_claude(engine: CodexEngine, claude_cli_env: dict[str, str], project: Path) -> AskClaude:
    """Runs the real Claude Code CLI on a prompt, in the project, with the relay server among its tools (the
    server's events and Codex turns go to the recorder given); the run must end in success."""

    async def ask(prompt: str, record: Recorder) -> None:
        server = build_relay_server(engine, cwd=project, stages=STAGES, on_event=record.event, on_turn=record.turn)
        options = ClaudeAgentOptions(
            env=claude_cli_env,
            setting_sources=[],
            cwd=str(project),
            mcp_servers={"relay": server},
            allowed_tools=[*TOOL_NAMES, "Agent", "Task"],
            permission_mode="default",
        )
        messages = [m async for m in query(prompt=prompt, options=options)]
        assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success"

    return ask


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body.get("messages", [])
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [])


async def test_codex_tool_answers_with_footer_events_and_turn(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue("the plan", "the revised plan")
    record = Recorder()
    tools = RelayTools(engine, cwd=project, stages=STAGES, on_event=record.event, on_turn=record.turn, run_id="r1")

    reply = await tools.codex("plan it", "plan", "see auth.py")
    footer = FOOTER.search(reply.text)
    assert not reply.is_error and reply.text.startswith("the plan\n\n— codex")
    assert footer is not None and footer["model"] == "gpt-5.5" and footer["cost"] == "cost unknown"
    follow_up = await tools.codex_reply(footer["thread"], "address finding 1")

    assert not follow_up.is_error and follow_up.text.startswith("the revised plan")
    assert input_texts(openai_double.bodies[-1])[-2:] == ["the plan", "address finding 1"]
    assert [type(e).__name__ for e in record.events] == ["StageStart", "StageEnd", "StageStart", "StageEnd"]
    start, end = record.events[0], record.events[1]
    assert isinstance(start, StageStart) and (start.run_id, start.stage, start.engine) == ("r1", "plan", "codex")
    assert isinstance(end, StageEnd) and end.ok and end.thread_id == footer["thread"] and end.usage.tokens == 120
    assert [t.thread_id for t in record.turns] == [footer["thread"]] * 2
    assert record.turns[0].rollout_path is not None and record.turns[0].rollout_path.exists()


async def test_failures_become_error_results(engine: CodexEngine, openai_double: OpenAIDouble, project: Path) -> None:
    openai_double.enqueue(HttpError(500))
    record = Recorder()
    tools = RelayTools(engine, cwd=project, stages=STAGES, on_event=record.event, on_turn=record.turn)

    failed = await tools.codex("plan it", "plan")
    unknown = await tools.codex("plan it", "deploy")
    empty = await tools.codex_reply("", "more")

    assert failed.is_error and "Codex (plan) failed" in failed.text and "internalServerError" in failed.text
    assert unknown.is_error and "unknown stage 'deploy'" in unknown.text
    assert empty.is_error
    end = record.events[-1]
    assert isinstance(end, StageEnd) and not end.ok and end.thread_id
    # The failed turn is still reported, with its rollout, so the session can ingest it.
    assert [(t.status, t.thread_id) for t in record.turns] == [("failed", end.thread_id)]
    assert record.turns[0].rollout_path is not None and record.turns[0].rollout_path.exists()


async def test_claude_calls_codex_through_the_relay_server(
    openai_double: OpenAIDouble, anthropic_double: AnthropicDouble, ask_claude: AskClaude
) -> None:
    openai_double.enqueue(Text("1. patch login\n2. add a test", deltas=True))
    anthropic_double.enqueue(ToolUse("mcp__relay__codex", {"task": "Plan the login fix", "stage": "plan"}), "done")
    record = Recorder()

    await ask_claude("fix login", record)

    codex_body = openai_double.bodies[-1]
    assert input_texts(codex_body)[-1] == "Plan the login fix"
    assert codex_body["reasoning"]["effort"] == "xhigh" and codex_body["model"] == "gpt-5.5"
    results = tool_results(anthropic_double.bodies[-1])
    assert len(results) == 1 and not results[0].get("is_error")
    text = result_text(results[0])
    assert "1. patch login\n2. add a test" in text
    footer = FOOTER.search(text)
    assert footer is not None and footer["thread"] == record.turns[0].thread_id
    assert [type(e).__name__ for e in record.events] == ["StageStart", "StageEnd"]


async def test_claude_subagents_can_call_codex_too(
    openai_double: OpenAIDouble, anthropic_double: AnthropicDouble, ask_claude: AskClaude
) -> None:
    """The in-process server is served to the whole CLI, so a Task subagent reaches it (no stdio server needed)."""
    openai_double.enqueue("nested plan")
    seen: list[str] = []

    def respond(body: dict[str, Any]) -> str | ToolUse:
        subagent = "SUBAGENT" in json.dumps(body["messages"][:1])
        seen.append("sub" if subagent else "main")
        text = last_user_text(body)
        if subagent and "— codex" in text:
            return "sub done"
        if subagent:
            return ToolUse("mcp__relay__codex", {"task": "nested", "stage": "plan"})
        if seen.count("main") == 1:
            prompt = {"description": "nest", "prompt": "SUBAGENT: ask codex", "subagent_type": "general-purpose"}
            return ToolUse("Agent", {**prompt, "run_in_background": False})
        return "done"

    anthropic_double.default = respond
    record = Recorder()

    await ask_claude("delegate", record)

    assert input_texts(openai_double.bodies[-1])[-1] == "nested"
    assert len(record.turns) == 1
    subagent_bodies = [b for b in anthropic_double.bodies if "SUBAGENT" in json.dumps(b["messages"][:1])]
    assert any("nested plan" in result_text(r) for b in subagent_bodies for r in tool_results(b))
