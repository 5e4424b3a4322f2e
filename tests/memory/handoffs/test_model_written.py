"""The LLM handoff through the real ``claude-agent-sdk`` and its bundled CLI, against the Messages API double.

Each CLI-driven test costs a second or two, so they are few; the rest runs without a CLI.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from memory.errors import ExtractionError
from memory.handoffs.deterministic import extract_fallback
from memory.handoffs.model_written import (
    HANDOFF_SCHEMA,
    SYSTEM_PROMPT,
    extract_handoff,
    extract_with_llm,
    finish_background,
)
from memory.models import Block, BlockKind, Entry, SessionKind, Transcript
from tests.doubles.anthropic import AnthropicDouble, cli_env, structured_output

MODEL = "claude-haiku-4-5"


def session() -> Transcript:
    return Transcript(
        session_id="sess-llm-1",
        kind=SessionKind.MAIN,
        source_path="/x/sess-llm-1.jsonl",
        cwd="/home/nick/code/macupos",
        model="claude-opus-4-5",
        entries=[
            Entry("user", "2025-06-01T10:00:00Z", (Block(BlockKind.TEXT, text="add retries to the extractor"),)),
            Entry(
                "assistant",
                "2025-06-01T10:12:00Z",
                (
                    Block(BlockKind.TEXT, text="Done."),
                    Block(
                        BlockKind.TOOL_USE,
                        tool_name="Edit",
                        tool_input={"file_path": "/home/nick/code/macupos/memory/llm_extract.py"},
                    ),
                ),
            ),
        ],
    )


MARKDOWN = "# Session sess-llm-1\n\n**User:** add retries to the extractor\n\n**Assistant:** Done.\n"

GOOD: dict[str, Any] = {
    "headline": "Add one retry to the handoff extractor",
    "projects": ["Macupos"],
    "keywords": ["handoff-retry", "llm_extract", "Structured Output"],
    "substance": 1,
    "what_happened": ["Added a single retry before the fallback"],
    "insights": ["**one retry** -- the second answer is usually valid"],
    "key_files": [],
    "open_threads": [],
}


async def test_valid_structured_output_gives_an_llm_handoff(
    anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str], claude_home: Path
) -> None:
    anthropic_double.enqueue(structured_output(GOOD))
    h = await extract_handoff(session(), MARKDOWN, use_llm=True, model=MODEL, env=claude_cli_env, timeout_s=60)
    assert h.source == "llm"
    assert (h.session_id, h.date, h.duration_min, h.model) == (
        "sess-llm-1",
        "2025-06-01T10:00:00+00:00",
        12.0,
        "claude-opus-4-5",
    )
    assert h.headline == GOOD["headline"]
    assert h.projects == ["macupos"]
    assert h.keywords == ["handoff-retry", "llm-extract", "structured-output"]
    assert h.what_happened == GOOD["what_happened"]
    # The model left key files empty: the deterministic ones fill in.
    assert h.key_files == ["memory/llm_extract.py"]

    (body,) = anthropic_double.bodies
    assert body["model"] == MODEL
    assert [t["name"] for t in body["tools"]] == ["StructuredOutput"]  # no other tool offered
    assert body["tools"][0]["input_schema"] == HANDOFF_SCHEMA
    system = json.dumps(body["system"])
    assert "You write handoffs" in system and SYSTEM_PROMPT.splitlines()[0] in system
    assert "add retries to the extractor" in anthropic_double.user_texts()[0]
    # Extraction runs leave no transcript behind for ingest to pick up.
    assert list(claude_home.rglob("*.jsonl")) == []


async def test_a_worktree_sessions_llm_handoff_names_the_main_folders_project_and_its_branch(
    anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str], claude_home: Path
) -> None:
    # The bot's parallel agents run in <project>/.macupos/worktrees/<branch>: that folder is no project.
    tree = "/home/nick/code/macupos/.macupos/worktrees/fix/login"
    t = session()
    t.cwd, t.git_branch = tree, "fix/login"
    t.entries[1] = Entry(
        "assistant",
        "2025-06-01T10:12:00Z",
        (Block(BlockKind.TOOL_USE, tool_name="Edit", tool_input={"file_path": f"{tree}/memory/llm_extract.py"}),),
    )
    anthropic_double.enqueue(structured_output({**GOOD, "projects": ["login", "worktrees", "eywa"]}))
    h = await extract_handoff(t, MARKDOWN, use_llm=True, model=MODEL, env=claude_cli_env, timeout_s=60)
    assert h.source == "llm" and h.projects == ["macupos", "eywa"]
    assert h.extra == {"branch": "fix/login"} and h.key_files == ["memory/llm_extract.py"]
    assert (
        "project folder: /home/nick/code/macupos (the session ran in a worktree of it)"
        in (anthropic_double.user_texts()[0])
    )


async def test_a_rejected_first_answer_is_retried_once(
    anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str], tmp_path: Path
) -> None:
    # Passes the CLI's schema check but not ours (substance 2 with no keywords), then a good answer.
    anthropic_double.enqueue(structured_output({**GOOD, "keywords": [], "substance": 2}), structured_output(GOOD))
    long_markdown = MARKDOWN + "filler " * 2000 + "THE-END"
    h = await extract_with_llm(
        session(), long_markdown, model=MODEL, env=claude_cli_env, timeout_s=60, cwd=tmp_path, max_input_chars=3000
    )
    assert h.source == "llm" and h.substance == 1
    assert len(anthropic_double.requests) == 2
    prompt = anthropic_double.user_texts()[0]
    assert "characters of the session left out" in prompt and "THE-END" in prompt
    assert len(prompt) < 5000


async def test_invalid_output_twice_falls_back_after_exactly_two_attempts(
    anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str]
) -> None:
    # Plain text instead of the tool call, then a tool call the schema refuses.
    anthropic_double.enqueue("Here is your handoff: it went well.", structured_output({"headline": 7}))
    t = session()
    h = await extract_handoff(t, MARKDOWN, use_llm=True, model=MODEL, env=claude_cli_env, timeout_s=60)
    assert h.source == "fallback"
    assert h == extract_fallback(t)
    assert len(anthropic_double.requests) == 2


async def test_extract_with_llm_raises_extraction_error_with_reasons(
    anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str]
) -> None:
    anthropic_double.enqueue("not json", "still not json")
    with pytest.raises(ExtractionError, match="attempt 2"):
        await extract_with_llm(session(), MARKDOWN, model=MODEL, env=claude_cli_env, timeout_s=60)
    assert len(anthropic_double.requests) == 2


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_unreachable_api_falls_back_within_the_timeout(claude_home: Path) -> None:
    env = cli_env(f"http://127.0.0.1:{closed_port()}", str(claude_home))
    started = time.monotonic()
    h = await extract_handoff(session(), MARKDOWN, use_llm=True, model=MODEL, env=env, timeout_s=2)
    elapsed = time.monotonic() - started
    assert h.source == "fallback"
    assert elapsed < 2 + 1
    await finish_background()  # the CLI process is gone before the test ends


async def test_use_llm_false_never_calls_the_model(anthropic_double: AnthropicDouble) -> None:
    h = await extract_handoff(session(), MARKDOWN, use_llm=False, model=MODEL, env={}, timeout_s=1)
    assert h.source == "fallback"
    assert anthropic_double.requests == []
