"""ClaudeSession with the real bundled Claude Code CLI against the Anthropic Messages API double."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from memory.facade import Eywa
from relay.approvals import ApprovalDecision, ApprovalRequest
from relay.codex import CodexTurn
from relay.errors import RelayTimeoutError, SessionError, SessionNotFoundError
from relay.events import (
    HandoffReady,
    PermissionRequest,
    RelayEvent,
    SessionResult,
    TextDelta,
    ToolEnd,
    ToolStart,
    Usage,
)
from relay.ledger import Ledger
from relay.session import ClaudeSession
from relay.settings import RelaySettings
from tests.doubles.anthropic import AnthropicDouble, ErrorReply, ToolUse, last_user_text
from tests.relay.conftest import processes_with
from tests.relay.test_ledger import apply_ledger_migration

ROLLOUT = (
    Path(__file__).resolve().parents[1]
    / "memory/fixtures/codex/2025/11/02/rollout-2025-11-02T09-15-00-0b7e4c2a-9d1f-4e3a-8c55-2f6a7d9e1b30.jsonl"
)


class ControlledDouble(AnthropicDouble):
    """The Messages double plus two misbehaviours: answer garbage, or stall until released."""

    def __init__(self) -> None:
        super().__init__()
        self.misbehave: list[str] = []  # per request, consumed in order: "stall" | "garbage"
        self.stalled = asyncio.Event()  # set when a request is being held
        self.release = asyncio.Event()

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        if not self.misbehave:
            return await super()._messages(request)
        mode = self.misbehave.pop(0)
        self.requests.append(await self._log(request))
        if mode == "garbage":
            return web.Response(text="<html>not an API</html>", content_type="text/html")
        self.stalled.set()
        await self.release.wait()
        return web.Response(status=503)


@pytest.fixture
async def anthropic_double() -> AsyncIterator[ControlledDouble]:
    double = ControlledDouble()
    await double.start()
    yield double
    double.release.set()
    await double.stop()


def relay_settings(env: dict[str, str], eywa: Eywa, **relay: Any) -> RelaySettings:
    table = {"setting_sources": [], "memory_mcp": "0", **relay}
    return RelaySettings.from_env(env, {"relay": table}, memory=eywa.settings)


@pytest.fixture
def settings(env: dict[str, str], eywa: Eywa) -> RelaySettings:
    return relay_settings(env, eywa)


@pytest.fixture
def orphans(env: dict[str, str]) -> Callable[[], list[int]]:
    """Live processes whose environment carries this test's CLAUDE_CONFIG_DIR."""
    return processes_with("CLAUDE_CONFIG_DIR", env["CLAUDE_CONFIG_DIR"])


Start = Callable[..., Awaitable[ClaudeSession]]


@pytest.fixture
def start(settings: RelaySettings, project: Path, eywa: Eywa) -> Start:
    """``ClaudeSession.start`` in the test's project on its memory, with the keyword options given; ``relay``
    changes settings of the ``[relay]`` table."""

    async def started(relay: dict[str, Any] | None = None, **options: Any) -> ClaudeSession:
        chosen = relay_settings(dict(settings.env), eywa, **relay) if relay else settings
        return await ClaudeSession.start(chosen, project_dir=project, eywa=eywa, **options)

    return started


class Recorder:
    def __init__(self) -> None:
        self.events: list[RelayEvent] = []

    async def __call__(self, event: RelayEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def test_first_turn_is_grounded_with_rules_facts_and_the_earlier_handoff(
    anthropic_double: ControlledDouble, settings: RelaySettings, eywa: Eywa, start: Start
) -> None:
    anthropic_double.enqueue("I moved the zeppelin exporter to streaming writes and added tests.")
    first_events = Recorder()
    async with await start(on_event=first_events) as first:
        done = await first.send("rewrite the zeppelin exporter to stream rows")
    handoffs = await eywa.list_handoffs()
    assert [h.session_id for h in handoffs] == [done.session_id]
    ready = first_events.of(HandoffReady)
    assert len(ready) == 1 and ready[0].session_id == done.session_id and ready[0].markdown

    async with await start(facts_lines=["deploys go through make release"]) as second:
        await second.send("continue the zeppelin exporter work")
    system = str(anthropic_double.bodies[-1]["system"])
    assert "Acceptance criteria first" in system  # MEMORY.md, created from the shipped default
    assert "> - deploys go through make release" in system
    assert f"handoff of session {done.session_id}" in system
    assert settings.rules_path.is_file()


async def test_follow_up_reuses_the_live_process_and_sends_the_history(
    anthropic_double: ControlledDouble, start: Start
) -> None:
    anthropic_double.enqueue("the answer is 42", "still 42")
    async with await start() as session:
        first = await session.send("what is the answer")
        pid = session.pid
        second = await session.send("and now?")
        assert session.pid == pid and pid is not None and os.getpgid(pid) == pid
    assert first.answer == "the answer is 42" and second.answer == "still 42"
    assert first.session_id == second.session_id
    history = str(anthropic_double.bodies[-1]["messages"])
    assert "what is the answer" in history and "the answer is 42" in history
    assert last_user_text(anthropic_double.bodies[-1]).endswith("and now?")


async def test_resume_after_close_sends_the_earlier_history(anthropic_double: ControlledDouble, start: Start) -> None:
    anthropic_double.enqueue("noted: the password hint is giraffe", "it was giraffe")
    async with await start() as session:
        first = await session.send("remember the hint giraffe")
    async with await start(resume=first.session_id) as again:
        second = await again.send("what was the hint?")
    assert second.session_id == first.session_id
    assert "remember the hint giraffe" in str(anthropic_double.bodies[-1]["messages"])


@pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")  # Read is allowed outright
async def test_events_are_translated_and_the_run_is_in_the_ledger(
    anthropic_double: ControlledDouble, eywa: Eywa, project: Path, start: Start
) -> None:
    (project / "notes.txt").write_text("hello notes\n", encoding="utf-8")
    anthropic_double.enqueue(ToolUse("Read", {"file_path": str(project / "notes.txt")}), "read it")
    ledger = await apply_ledger_migration(eywa)
    recorder = Recorder()
    async with await start(relay={"allowed_tools": ["Read"]}, on_event=recorder, ledger=ledger) as session:
        events = [e async for e in session.stream("read the notes")]
    names = ["SpendTick", "ToolStart", "ToolEnd", "SpendTick", "TextDelta", "SessionResult"]
    assert [type(e).__name__ for e in events] == names  # a SpendTick prices each model call as it comes
    start, end = recorder.of(ToolStart)[0], recorder.of(ToolEnd)[0]
    assert start.name == "Read" and end.tool_use_id == start.tool_use_id and not end.is_error
    result: SessionResult = recorder.of(SessionResult)[0]
    assert result.turns == 2 and result.usage.input_tokens == 20 and result.usage.output_tokens == 10
    assert result.usage.cost_usd is not None and result.usage.cost_usd > 0
    assert recorder.of(TextDelta)[0].text == "read it"
    totals = await ledger.totals("session")
    assert [(t.key, t.runs, t.input_tokens) for t in totals] == [(result.session_id, 1, 20)]
    assert isinstance(ledger, Ledger)


async def test_codex_turns_are_costed_linked_and_ingested_with_the_session(
    anthropic_double: ControlledDouble, eywa: Eywa, tmp_path: Path, start: Start
) -> None:
    rollout = tmp_path / "codex" / "sessions" / ROLLOUT.relative_to(ROLLOUT.parents[3])
    rollout.parent.mkdir(parents=True)
    shutil.copy(ROLLOUT, rollout)
    ledger = await apply_ledger_migration(eywa)
    async with await start(ledger=ledger) as session:
        result = await session.send("plan it with codex")
        turn = CodexTurn("0b7e4c2a", "a plan", "gpt-x", 1.5, Usage(40, 8, cost_usd=0.002), rollout, "completed", "plan")
        await session.on_codex_turn(turn)
    by_engine = {t.key: t for t in await ledger.totals("engine")}
    assert by_engine["codex"].cost_usd == pytest.approx(0.002) and by_engine["claude"].runs == 1
    assert await ledger.linked_rollouts(result.session_id) == [rollout]
    kinds = [h.kind.value for h in await eywa.list_handoffs(limit=10)]
    assert kinds.count("codex") == 1  # the rollout went into memory with the session


async def test_a_tool_without_approval_is_denied_and_the_model_is_told(
    anthropic_double: ControlledDouble, project: Path, start: Start
) -> None:
    anthropic_double.enqueue(ToolUse("Bash", {"command": "touch pwned", "description": "x"}), "ok, I won't")
    recorder = Recorder()
    async with await start(on_event=recorder) as session:
        result = await session.send("make a file")
    assert result.answer == "ok, I won't"
    assert not (project / "pwned").exists()
    request = recorder.of(PermissionRequest)[0]
    assert request.tool_name == "Bash" and request.input["command"] == "touch pwned"
    tool_result = anthropic_double.bodies[-1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["is_error"] is True
    assert "denied" in str(tool_result["content"])


async def test_an_approving_hook_lets_the_tool_run(
    anthropic_double: ControlledDouble, project: Path, start: Start
) -> None:
    anthropic_double.enqueue(ToolUse("Bash", {"command": "touch approved", "description": "x"}), "made it")
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.allow()

    async with await start(approve=approve) as session:
        result = await session.send("make a file")
    assert [(r.tool_name, r.summary, r.session_id) for r in asked] == [("Bash", "touch approved", result.session_id)]
    assert asked[0].request_id and (project / "approved").exists()


async def test_allow_for_session_stops_the_asking_and_a_deny_tells_the_model_why(
    anthropic_double: ControlledDouble, project: Path, start: Start
) -> None:
    anthropic_double.enqueue(
        ToolUse("Bash", {"command": "touch one", "description": "x"}),
        ToolUse("Bash", {"command": "touch two", "description": "x"}),
        ToolUse("Write", {"file_path": str(project / "three"), "content": "3"}),
        "done",
    )
    asked: list[str] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.summary)
        if request.tool_name == "Bash":
            return ApprovalDecision.allow_for_session()
        return ApprovalDecision.deny("the owner keeps writes for later")

    async with await start(approve=approve) as session:
        await session.send("make three files")
    assert asked == ["touch one", str(project / "three")]  # the second Bash call was not asked
    assert (project / "one").exists() and (project / "two").exists() and not (project / "three").exists()
    tool_result = anthropic_double.bodies[-1]["messages"][-1]["content"][0]
    assert tool_result["is_error"] is True and "the owner keeps writes for later" in str(tool_result["content"])


async def test_resuming_a_session_the_cli_does_not_have_raises_session_not_found(
    anthropic_double: ControlledDouble, start: Start
) -> None:
    unknown = str(uuid.uuid4())
    session = await start(resume=unknown)
    with pytest.raises(SessionNotFoundError) as caught:
        await session.send("carry on")
    assert caught.value.session_id == unknown and isinstance(caught.value, SessionError)
    assert anthropic_double.bodies == []  # nothing reached the model
    await session.aclose()


async def test_interrupt_ends_the_turn_and_the_session_stays_usable(
    anthropic_double: ControlledDouble, start: Start
) -> None:
    anthropic_double.misbehave = ["stall"]
    anthropic_double.enqueue("back again")
    async with await start() as session:
        running = asyncio.create_task(session.send("think for a long time"))
        await anthropic_double.stalled.wait()
        assert await session.interrupt()
        interrupted = await running
        after = await session.send("are you there?")
    assert interrupted.subtype == "interrupted" and not interrupted.is_error
    assert after.answer == "back again" and after.session_id == interrupted.session_id


@pytest.mark.parametrize(("limits", "kind"), [({"idle_timeout_s": 1.0}, "idle"), ({"deadline_s": 1.0}, "deadline")])
async def test_a_stalled_api_times_out_and_everything_is_killed(
    limits: dict[str, float],
    kind: str,
    anthropic_double: ControlledDouble,
    eywa: Eywa,
    orphans: Callable[[], list[int]],
    start: Start,
) -> None:
    anthropic_double.misbehave = ["stall"]
    recorder = Recorder()
    session = await start(relay=limits, on_event=recorder)
    with pytest.raises(RelayTimeoutError) as caught:
        await session.send("hang please")
    assert caught.value.kind == kind and caught.value.limit_s == 1.0
    assert orphans() == []
    view = await eywa.show(caught.value.session_id)  # the partial transcript was ingested
    assert view.session is not None and "hang please" in view.session.markdown
    assert recorder.of(HandoffReady)[0].session_id == caught.value.session_id
    with pytest.raises(SessionError, match="closed"):
        await session.send("again")


@pytest.mark.parametrize("failure", ["500", "garbage"])
async def test_a_failing_api_is_a_clear_error_with_the_transcript_kept(
    failure: str, anthropic_double: ControlledDouble, eywa: Eywa, orphans: Callable[[], list[int]], start: Start
) -> None:
    if failure == "500":
        anthropic_double.enqueue(ErrorReply(500, "api_error", "the double broke"))
    else:
        anthropic_double.misbehave = ["garbage", "garbage"]  # the CLI retries once without streaming
    recorder = Recorder()
    session = await start(on_event=recorder)
    with pytest.raises(SessionError) as caught:
        await session.send("do the thing")
    assert "API Error" in str(caught.value) and caught.value.session_id
    assert orphans() == []
    view = await eywa.show(caught.value.session_id)
    assert view.session is not None and "do the thing" in view.session.markdown
    assert recorder.of(HandoffReady)
    await session.aclose()  # already ended: harmless


@pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")  # memory tools are allowed
async def test_the_memory_mcp_server_is_offered_to_claude(
    anthropic_double: ControlledDouble, orphans: Callable[[], list[int]], start: Start
) -> None:
    async with await start(relay={"memory_mcp": "1"}) as session:
        await session.send("hello")
    # MCP tools are deferred by the CLI: it lists them by name in the request for the model to load.
    assert "mcp__eywa__eywa_get" in json.dumps(anthropic_double.bodies[0])
    assert orphans() == []


async def test_subagent_transcripts_are_ingested_with_the_session(
    anthropic_double: ControlledDouble, eywa: Eywa, start: Start
) -> None:
    task = {"description": "look around", "prompt": "list the files", "subagent_type": "general-purpose"}
    anthropic_double.enqueue(ToolUse("Agent", task), "the subagent found nothing", "all done")
    async with await start() as session:
        result = await session.send("delegate a look around")
    view = await eywa.show(result.session_id)
    assert view.subagents and all(s.startswith(f"{result.session_id}/agent-") for s in view.subagents)


async def test_a_cancelled_run_ends_the_session_without_orphans(
    anthropic_double: ControlledDouble, eywa: Eywa, orphans: Callable[[], list[int]], start: Start
) -> None:
    anthropic_double.misbehave = ["stall"]
    session = await start()
    running = asyncio.create_task(session.send("never mind"))
    await anthropic_double.stalled.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert orphans() == []
    assert await eywa.show(session.session_id)  # what it had written is in memory
