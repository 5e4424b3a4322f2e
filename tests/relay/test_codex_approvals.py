"""Codex's approval requests answered by the owner: the real Codex app-server (OpenAI double) asks to run a
command or change files, and our ApprovalRequest / ApprovalDecision carry the question and the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from memory.settings import MemorySettings
from relay.approvals import ApprovalDecision, ApprovalRequest
from relay.codex import CodexEngine
from relay.codex_approvals import CodexGrants, diff_summary
from relay.errors import RelayTimeoutError
from relay.events import PermissionRequest, RelayEvent
from relay.relay_tools import RelayTools
from relay.settings import RelaySettings
from relay.stages import DEFAULT_STAGES, StageConfig, stage_configs
from tests.doubles.openai import ExecCommand, OpenAIDouble, input_texts

# A read-only sandbox that lets Codex ask to go past it, and one that asks before any unknown command.
ON_REQUEST = replace(DEFAULT_STAGES["research"], approval_policy="on-request", timeout_s=60.0)
UNTRUSTED = replace(DEFAULT_STAGES["execute"], approval_policy="untrusted", timeout_s=60.0)


def patch_adding(name: str, text: str) -> str:
    """The shell form of Codex's apply_patch, which its app-server turns into a file change."""
    return f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\nEOF\n"


class Owner:
    """An approval handler that records each request and answers with ``verdicts`` in turn."""

    def __init__(self, *verdicts: str) -> None:
        self.verdicts = list(verdicts)
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        verdict = self.verdicts.pop(0)
        if verdict == "deny":
            return ApprovalDecision.deny("the owner said no")
        return ApprovalDecision("allow_for_session" if verdict == "session" else "allow")


async def test_an_approved_command_runs_past_the_sandbox_and_the_owner_sees_it(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    target = project / "approved.txt"
    openai_double.enqueue(ExecCommand(f"touch {target}", escalate=True), "made it")
    owner = Owner("allow")

    turn = await engine.run_turn("make the file", stage="research", cwd=project, config=ON_REQUEST, approve=owner)

    assert target.exists()  # the read-only sandbox alone would have refused it
    assert turn.answer == "made it"
    [request] = owner.requests
    assert (request.engine, request.tool_name, request.stage) == ("codex", "command", "research")
    assert f"touch {target}" in request.input["command"] and f"touch {target}" in request.summary
    assert request.input["cwd"] == str(project) and request.session_id == turn.thread_id


async def test_a_denied_command_does_not_run_and_codex_hears_so(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    target = project / "denied.txt"
    openai_double.enqueue(ExecCommand(f"touch {target}"), "skipped it")
    owner = Owner("deny")

    turn = await engine.run_turn("make the file", stage="execute", cwd=project, config=UNTRUSTED, approve=owner)

    assert not target.exists()
    assert len(owner.requests) == 1
    assert "rejected by user" in input_texts(openai_double.bodies[-1])[-1]
    assert turn.status == "completed" and turn.answer == "skipped it"  # a deny does not end the turn


async def test_without_a_handler_every_request_is_refused(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    target = project / "nobody.txt"
    openai_double.enqueue(ExecCommand(f"touch {target}"), "skipped it")

    await engine.run_turn("make the file", stage="execute", cwd=project, config=UNTRUSTED)

    assert not target.exists()
    assert "rejected by user" in input_texts(openai_double.bodies[-1])[-1]


async def test_an_unanswered_request_is_refused_at_the_deadline_and_the_engine_goes_on(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    target = project / "late.txt"
    openai_double.enqueue(ExecCommand(f"touch {target}"))
    asked = asyncio.Event()
    released = asyncio.Event()

    async def silent(request: ApprovalRequest) -> ApprovalDecision:
        asked.set()
        try:
            await asyncio.Event().wait()  # the owner never answers
        finally:
            released.set()
        raise AssertionError("unreachable")

    config = replace(UNTRUSTED, timeout_s=8.0)
    with pytest.raises(RelayTimeoutError):
        await engine.run_turn("make the file", stage="execute", cwd=project, config=config, approve=silent)

    assert asked.is_set() and released.is_set()  # the wait was cancelled, not left behind
    assert not target.exists()
    openai_double.enqueue("still here")
    after = await engine.run_turn("hello", stage="research", cwd=project, config=DEFAULT_STAGES["research"])
    assert after.answer == "still here"


async def test_allow_for_this_session_is_not_asked_again_by_later_turns(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    log = project / "log.txt"
    command = f"echo ran >> {log}"
    openai_double.enqueue(ExecCommand(command), "first", ExecCommand(command), "second")
    owner = Owner("session")
    stages = {**DEFAULT_STAGES, "execute": UNTRUSTED}
    events: list[RelayEvent] = []

    async def record(event: RelayEvent) -> None:
        events.append(event)

    tools = RelayTools(engine, cwd=project, stages=stages, approve=owner, on_event=record)

    first = await tools.codex("log it", "execute")
    second = await tools.codex("log it again", "execute")  # a new Codex thread: Codex's own cache is gone

    assert not first.is_error and not second.is_error
    assert log.read_text() == "ran\nran\n"
    assert len(owner.requests) == 1
    asked = [e for e in events if isinstance(e, PermissionRequest)]  # the progress line says it waits
    assert [(e.tool_name, e.input["command"]) for e in asked] == [("codex command", owner.requests[0].input["command"])]


async def test_a_file_change_shows_its_files_and_diff_and_runs_when_allowed(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue(ExecCommand(patch_adding("notes.txt", "hello there")), "patched")
    owner = Owner("allow")

    await engine.run_turn("add notes", stage="execute", cwd=project, config=UNTRUSTED, approve=owner)

    assert (project / "notes.txt").read_text() == "hello there\n"
    [request] = owner.requests
    assert (request.engine, request.tool_name) == ("codex", "file change")
    assert request.diff_summary == "A notes.txt (+1)" and request.summary == "A notes.txt (+1)"
    assert request.input["paths"] == ["notes.txt"] and "hello there" in request.input["diff"]


async def test_a_denied_file_change_leaves_the_workspace_alone(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue(ExecCommand(patch_adding("notes.txt", "nope")), "left it")

    await engine.run_turn("add notes", stage="execute", cwd=project, config=UNTRUSTED, approve=Owner("deny"))

    assert not (project / "notes.txt").exists()


def test_the_diff_summary_counts_lines_per_file(tmp_path: Path) -> None:
    changes = [
        (str(tmp_path / "new.py"), "add", "a\nb\n"),
        (str(tmp_path / "app.py"), "update", "@@ -1,2 +1,3 @@\n-x\n+y\n+z\n keep\n"),
        ("/elsewhere/old.txt", "delete", "gone\n"),
    ]
    assert diff_summary(changes, tmp_path) == "A new.py (+2)\nM app.py (+2 −1)\nD /elsewhere/old.txt (−1)"


async def test_grants_cover_the_same_command_only() -> None:
    owner = Owner("session", "allow")
    grants = CodexGrants(owner)

    def command(text: str) -> ApprovalRequest:
        return ApprovalRequest("t", "command", {"command": text}, engine="codex")

    assert (await grants(command("pytest -q"))).verdict == "allow_for_session"
    assert (await grants(command("pytest -q"))).verdict == "allow_for_session"  # not asked
    assert (await grants(command("rm -rf build"))).verdict == "allow"
    assert [r.input["command"] for r in owner.requests] == ["pytest -q", "rm -rf build"]
    refused: Callable[[ApprovalRequest], Awaitable[ApprovalDecision]] = CodexGrants(None)
    assert not (await refused(command("ls"))).allowed


def test_the_approval_policy_is_set_per_stage_or_for_all(tmp_path: Path) -> None:
    memory = MemorySettings(home=tmp_path, claude_config_dir=tmp_path, codex_home=tmp_path)
    table = {"relay": {"codex_approval_policy": "untrusted", "stages": {"plan": {"approval_policy": "never"}}}}
    configs = stage_configs(RelaySettings.from_env({}, table, memory=memory).codex_stages)
    assert configs["execute"].approval_policy == "untrusted" and configs["plan"].approval_policy == "never"
    from_env = RelaySettings.from_env({"MACUPOS_CODEX_APPROVAL_POLICY": "on-request"}, memory=memory)
    assert stage_configs(from_env.codex_stages)["research"].asks
    assert not DEFAULT_STAGES["execute"].asks  # nothing waits for a person unless the owner says so
    with pytest.raises(ValueError, match="approval_policy"):
        stage_configs({"execute": {"approval_policy": "always"}})
    with pytest.raises(ValueError, match="codex_approval_policy"):
        RelaySettings.from_env({"MACUPOS_CODEX_APPROVAL_POLICY": "maybe"}, memory=memory)
    assert isinstance(configs["execute"], StageConfig)
