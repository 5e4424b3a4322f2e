"""Fuzzing the MCP server's tool arguments through a real MCP client (JSON-RPC over the SDK's in-memory
transport, initialize handshake included): every call gets a result or a deliberate tool error, never a crash,
and the server keeps answering.

The SDK turns an exception a tool did not mean into the bare text ``Error executing tool <name>`` (the crash
stays in the server's log); a deliberate ToolError or a schema refusal carries its reason after a colon. So a
bare message is a crash, and fails the test.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult

from memory.mcp_server import build_server
from memory.settings import MemorySettings
from tests.fuzzing import fuzz_settings, junk, shaped, texts
from tests.memory.conftest import ingested_home, offline_settings

_SURROGATE = re.compile("[\ud800-\udfff]")
MAIN_ID = "test-session-id"  # simonw/sample_session.jsonl
_CALL_TIMEOUT_S = 60.0


class _Server:
    """One server and one client session for the whole module, driven from a task of their own (anyio wants
    a client's task group left in the task that entered it); each example hands it one call."""

    def __init__(self, settings: MemorySettings) -> None:
        self.loop = asyncio.new_event_loop()
        self.calls: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[CallToolResult]] | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = self.loop.create_future()
        self.task = self.loop.create_task(self._serve(settings))
        self.loop.run_until_complete(asyncio.wait_for(asyncio.shield(self.ready), 60))

    async def _serve(self, settings: MemorySettings) -> None:
        async with Client(build_server(settings), mode="legacy", read_timeout_seconds=_CALL_TIMEOUT_S) as client:
            self.ready.set_result(None)
            while (item := await self.calls.get()) is not None:
                name, arguments, answer = item
                try:
                    answer.set_result(await client.call_tool(name, arguments))
                except Exception as exc:  # a protocol error: handed to the example, which fails on it
                    answer.set_exception(exc)

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        answer: asyncio.Future[CallToolResult] = self.loop.create_future()
        self.calls.put_nowait((name, arguments, answer))
        return self.loop.run_until_complete(asyncio.wait_for(answer, _CALL_TIMEOUT_S))

    def close(self) -> None:
        self.calls.put_nowait(None)
        self.loop.run_until_complete(asyncio.wait_for(self.task, 60))
        self.loop.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[_Server, Path]]:
    root = Path(tmp_path_factory.mktemp("mcp"))
    names = ("simonw/sample_session.jsonl", "daaain_new/sidechain_integrated_trimmed.jsonl")
    garbage = b"\x00\xff not json\n" + b"[" * 50_000 + b"\n"
    ingested_home(root, names, extra={"garbage.jsonl": garbage})
    src = root / "src"
    driven = _Server(offline_settings(root / "home"))
    yield driven, src
    driven.close()


# Paths the extract tool may be pointed at: never a folder that holds the machine (".", "/", "~").
_PATHS = st.one_of(
    st.sampled_from(["", "/nonexistent/x.jsonl", "relative.jsonl", "/dev/null", "/proc/self/status", "a\x00b"]),
    st.sampled_from(["~nosuchuser/x.jsonl", "~/nonexistent-macupos.jsonl"]),
    st.sampled_from(["SRC/simonw/sample_session.jsonl", "SRC/garbage.jsonl", "SRC/simonw", "SRC/" + "x" * 300]),
    texts.map(lambda s: f"/nonexistent/{s}"),
)
_NUMBERS = st.one_of(st.integers(), st.floats(), st.sampled_from([0, -1, 10**30, 1e308]))
_SCRIPTS = st.one_of(
    texts,
    st.sampled_from(
        [
            "recall user",
            "remember x user Fact predicate p object o",
            "world",
            "search editor",
            "respond [string repeat x 10]",
            "while 1 {}",
            "proc f {} {f}; f",
            "exit",
            "[",
        ]
    ),
)
_ARGS = {
    "eywa_get": {
        "query": shaped(st.one_of(texts, st.sampled_from(["hello world function", "on 3 June", "2024-06-03"]))),
        "project": shaped(texts),
        "days_back": shaped(_NUMBERS),
        "max_handoffs": shaped(_NUMBERS),
        "branch": shaped(st.one_of(texts, st.sampled_from(["main", "fix/login"]))),
    },
    "eywa_search": {
        "query": shaped(st.one_of(texts, st.sampled_from(["hello", '"unbalanced', "a OR b", "NEAR(", "*"]))),
        "limit": shaped(_NUMBERS),
    },
    "eywa_show": {"session_id": shaped(st.one_of(texts, st.sampled_from([MAIN_ID, f"{MAIN_ID}/agent-x", "%", "_"])))},
    "eywa_extract": {"session_id": shaped(st.one_of(texts, st.just(MAIN_ID))), "transcript_path": shaped(_PATHS)},
    "memory": {"script": shaped(_SCRIPTS)},
}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from([*_ARGS, "no_such_tool"]))
    fields = _ARGS.get(name, {"x": texts})
    keys = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=len(fields)))
    arguments = {k: draw(fields[k]) for k in keys}
    if draw(st.integers(0, 7)) == 0:
        arguments[draw(texts)] = draw(junk)  # an argument the schema does not know
    return name, _sendable(arguments)


def _sendable(value: Any) -> Any:
    """``value`` with lone surrogates out of its dict keys: the client's own serializer refuses those (it never
    sends them), while a string argument holding one does reach the server in-process."""
    if isinstance(value, dict):
        return {_SURROGATE.sub("\ufffd", str(k)): _sendable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sendable(v) for v in value]
    return value


def _text(result: CallToolResult) -> str:
    return "\n".join(str(getattr(c, "text", "")) for c in result.content)


@fuzz_settings()
@given(call=tool_calls())
@example(call=("eywa_get", {"query": "x", "days_back": 1e308}))
@example(call=("eywa_search", {"query": "\ud83d"}))
@example(call=("eywa_show", {"session_id": "\ud83d"}))
@example(call=("eywa_extract", {"transcript_path": "SRC/garbage.jsonl"}))
@example(call=("eywa_extract", {"transcript_path": "~nosuchuser/x.jsonl"}))  # expanduser: RuntimeError
def test_every_tool_call_gets_a_result_or_a_deliberate_error(
    server: tuple[_Server, Path], call: tuple[str, dict[str, Any]]
) -> None:
    driven, src = server
    name, arguments = call
    if isinstance(arguments.get("transcript_path"), str):
        arguments["transcript_path"] = arguments["transcript_path"].replace("SRC", str(src), 1)
    result = driven.call(name, arguments)
    text = _text(result)
    if result.is_error:
        assert text.startswith(f"Error executing tool {name}: ") or text.startswith("Unknown tool"), text
    else:
        assert text


def test_the_server_still_answers_after_the_fuzzing(server: tuple[_Server, Path]) -> None:
    # Runs after the fuzz test (file order): the same session, a well-formed call, a real answer.
    result = server[0].call("eywa_show", {"session_id": MAIN_ID})
    assert not result.is_error and MAIN_ID in _text(result)
