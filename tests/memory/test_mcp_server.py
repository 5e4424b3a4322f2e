"""The MCP server through a real MCP client session against `python -m memory.mcp_server` on stdio."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory.facade import Eywa
from memory.settings import MemorySettings
from tests.cli_env import cli_env

from .conftest import TRANSCRIPTS

REPO = Path(__file__).resolve().parents[2]
FIXTURES = TRANSCRIPTS

MAIN_ID = "test-session-id"  # simonw/sample_session.jsonl: a hello-world function, then a goodbye one
SIDECHAIN_PARENT = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"  # daaain_new: a subagent researching data-border-color


def _env(home: Path) -> dict[str, str]:
    return cli_env(home, CLAUDE_CONFIG_DIR=str(home / "claude"), CODEX_HOME=str(home / "codex"))


@pytest.fixture
async def home(tmp_path: Path) -> Path:
    """A memory home holding two copied fixture transcripts, ingested without an LLM."""
    home = tmp_path / "home"
    src = tmp_path / "transcripts"
    src.mkdir()
    copies = [
        Path(shutil.copy(FIXTURES / "simonw" / "sample_session.jsonl", src / "sample_session.jsonl")),
        Path(shutil.copy(FIXTURES / "daaain_new" / "sidechain_integrated_trimmed.jsonl", src / "sidechain.jsonl")),
    ]
    settings = MemorySettings(
        home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False
    )
    eywa = await Eywa.open(settings)
    try:
        await eywa.ingest(copies, use_llm=False)
    finally:
        await eywa.close()
    return home


@asynccontextmanager
async def _client(home: Path, *args: str) -> AsyncIterator[ClientSession]:
    """A real MCP client session over stdio; the server's stderr goes to a log file beside the home.

    A context manager rather than a fixture: anyio's task group must be left in the task that entered it.
    """
    params = StdioServerParameters(
        command=sys.executable, args=list(args or ("-m", "memory.mcp_server")), env=_env(home), cwd=str(REPO)
    )
    with (home.parent / "server-stderr.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return "\n".join(str(getattr(c, "text", "")) for c in content)


async def test_lists_the_tools_with_their_input_schemas(home: Path) -> None:
    async with _client(home) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}

        assert set(tools) == {"eywa_get", "eywa_search", "eywa_show", "eywa_extract", "memory"}
        get = tools["eywa_get"].input_schema
        assert set(get["properties"]) == {"query", "project", "days_back", "max_handoffs", "branch"}
        assert get.get("required", []) == []
        assert tools["eywa_search"].input_schema["required"] == ["query"]
        assert set(tools["eywa_search"].input_schema["properties"]) == {"query", "limit"}
        assert tools["eywa_show"].input_schema["required"] == ["session_id"]
        assert set(tools["eywa_extract"].input_schema["properties"]) == {"session_id", "transcript_path"}
        assert all(t.description for t in tools.values())


async def test_get_returns_grounding_marked_as_quoted_data(home: Path) -> None:
    async with _client(home) as session:
        result = await session.call_tool("eywa_get", {"query": "hello world function", "days_back": 100_000})

        assert not result.is_error
        text = _text(result)
        assert "hello" in text.lower()
        assert "instruction" in text.lower()  # the header says recalled memory is data, not instructions


async def test_search_reaches_subagent_content_with_its_parent(home: Path) -> None:
    async with _client(home) as session:
        result = await session.call_tool("eywa_search", {"query": "data-border-color", "limit": 5})

        assert not result.is_error
        text = _text(result)
        assert "data-border-color" in text
        assert f"subagent of {SIDECHAIN_PARENT}" in text


async def test_show_returns_handoff_and_transcript(home: Path) -> None:
    async with _client(home) as session:
        result = await session.call_tool("eywa_show", {"session_id": MAIN_ID})

        assert not result.is_error
        text = _text(result)
        assert "## Handoff" in text and "## Transcript" in text
        assert "goodbye function" in text
        # Both are quoted inside nonce markers: a past session's own "## Handoff" line cannot pose as ours.
        nonce = text.split("\n[[RECALLED ", 1)[1].split(" ", 1)[0]
        lines = text.splitlines()
        assert sum(line.startswith(f"[[RECALLED {nonce} |") for line in lines) == 2
        assert lines.count(f"[[END RECALLED {nonce}]]") == 2
        inside = text.split(f"[[RECALLED {nonce} | source: transcript", 1)[1].split(f"[[END RECALLED {nonce}]]")[0]
        assert all(line.startswith(">") for line in inside.splitlines()[1:] if line)


async def test_show_of_an_unknown_session_is_a_clear_tool_error(home: Path) -> None:
    async with _client(home) as session:
        result = await session.call_tool("eywa_show", {"session_id": "no-such-session"})

        assert result.is_error
        assert "no-such-session" in _text(result)


async def test_extract_by_session_and_by_transcript_path(home: Path, tmp_path: Path) -> None:
    async with _client(home) as session:
        by_id = await session.call_tool("eywa_extract", {"session_id": MAIN_ID})
        assert not by_id.is_error
        assert "Extracted 1 handoff" in _text(by_id)

        copy = Path(shutil.copy(FIXTURES / "daaain_old" / "session_b.jsonl", tmp_path / "session_b.jsonl"))
        by_path = await session.call_tool("eywa_extract", {"transcript_path": str(copy)})
        assert not by_path.is_error, _text(by_path)
        assert "session_b" in _text(by_path)


async def test_extract_errors_are_tool_errors(home: Path, tmp_path: Path) -> None:
    async with _client(home) as session:
        missing = await session.call_tool("eywa_extract", {"transcript_path": str(tmp_path / "missing.jsonl")})
        assert missing.is_error and "missing.jsonl" in _text(missing)

        neither = await session.call_tool("eywa_extract", {})
        assert neither.is_error and "exactly one" in _text(neither)

        unknown = await session.call_tool("eywa_extract", {"session_id": "nope-123"})
        assert unknown.is_error and "nope-123" in _text(unknown)

        long_name = await session.call_tool("eywa_extract", {"transcript_path": "/tmp/" + "a" * 300 + ".jsonl"})
        assert long_name.is_error and "File name too long" in _text(long_name) and len(_text(long_name)) < 600

        folder = await session.call_tool("eywa_extract", {"transcript_path": str(tmp_path)})
        assert folder.is_error and "a folder, not a transcript file" in _text(folder)

        junk = tmp_path / "junk.jsonl"
        junk.write_bytes(b"\xff\xfe garbage\nnot json either\n")
        not_transcript = await session.call_tool("eywa_extract", {"transcript_path": str(junk)})
        assert not_transcript.is_error and "not a transcript (2 unreadable line(s)" in _text(not_transcript)
    assert "Traceback" not in (home.parent / "server-stderr.log").read_text()


async def test_bad_days_back_is_a_tool_error_and_long_queries_are_not_echoed_whole(home: Path) -> None:
    async with _client(home) as session:
        for days in (-5, 0):
            bad = await session.call_tool("eywa_get", {"query": "hello", "days_back": days})
            assert bad.is_error and "days_back must be a positive number" in _text(bad)
        long = await session.call_tool("eywa_search", {"query": "zzqx " * 20_000})
        assert not long.is_error and len(_text(long)) < 300


async def test_search_finds_common_and_short_words(home: Path) -> None:
    # Detail recall searches every word: "hello.py" and "hello" are in the sample session.
    async with _client(home) as session:
        for query in ("hello.py", "hello", "Hello, World!"):
            result = await session.call_tool("eywa_search", {"query": query, "limit": 3})
            assert not result.is_error and MAIN_ID in _text(result), query


async def test_a_broken_database_gives_tool_errors_not_a_dead_server(tmp_path: Path) -> None:
    home = tmp_path / "broken"
    home.mkdir()
    (home / "memory.db").write_bytes(b"garbage, not sqlite\n" * 50)
    async with _client(home) as session:
        result = await session.call_tool("eywa_get", {"query": "anything"})
        assert len((await session.list_tools()).tools) == 5  # still serving after the error

    assert result.is_error
    assert "not a Macupos memory database" in _text(result)


async def test_served_through_the_macupos_cli(home: Path) -> None:
    async with _client(home, "-m", "macupos", "memory", "mcp") as session:
        assert len((await session.list_tools()).tools) == 5
        result = await session.call_tool("eywa_show", {"session_id": MAIN_ID})

    assert not result.is_error and "hello" in _text(result).lower()


async def test_get_without_a_query_returns_the_most_recent_handoffs(home: Path) -> None:
    async with _client(home) as session:
        result = await session.call_tool("eywa_get", {"days_back": 100_000, "max_handoffs": 1})

    assert not result.is_error, _text(result)
    assert "1 past session" in _text(result)
