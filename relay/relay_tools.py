"""The ``relay`` MCP server Claude sees: ``codex(task, stage, context?)`` and ``codex_reply(thread_id, message)``
(``mcp__relay__codex`` / ``mcp__relay__codex_reply``), each one Codex turn with the stage's settings.

Built in-process with ``claude_agent_sdk.create_sdk_mcp_server`` so the tools share the session's
CodexEngine and report straight to it (StageStart / StageEnd events, every CodexTurn). Claude Code serves an
SDK server to the whole CLI process, so its Task subagents see these tools too (tested in
tests/relay/test_relay_tools.py). Errors come back as ``is_error`` tool results, never as exceptions
that would end the session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool, create_sdk_mcp_server, tool

from relay.approvals import ApprovalDecision, ApprovalHandler, ApprovalRequest
from relay.codex import CodexEngine, CodexTurn
from relay.codex_approvals import CodexGrants
from relay.codex_stage import CodexStages, StageFailure
from relay.errors import LoginError
from relay.events import LoginRefused, PermissionRequest, RelayEvent, StageEnd, Usage
from relay.stages import StageConfig

__all__ = ["SERVER_NAME", "TOOL_NAMES", "RelayTools", "ToolHooks", "ToolReply", "build_relay_server", "footer"]


SERVER_NAME = "relay"
TOOL_NAMES = (f"mcp__{SERVER_NAME}__codex", f"mcp__{SERVER_NAME}__codex_reply")
# A thread this engine did not start (e.g. from an earlier process) continues read-only: the safe side.
_REPLY_FALLBACK_STAGE = "research"

EventSink = Callable[[RelayEvent], Awaitable[None]]
TurnSink = Callable[[CodexTurn], Awaitable[None]]


class ToolHooks(TypedDict, total=False):
    """What :class:`RelayTools` (and so :func:`build_relay_server`) takes besides its engine, folder and stages."""

    on_event: EventSink | None  # the stages' events
    on_turn: TurnSink | None  # every Codex turn, failed ones too
    run_id: str
    approve: ApprovalHandler | None  # what Codex asks under a stage's approval policy (None: refused)


@dataclass(frozen=True, slots=True)
class ToolReply:
    text: str
    is_error: bool = False


def footer(turn: CodexTurn) -> str:
    """``— codex · <model> · thread <id> · 3.2 s · $0.0123``: which engine answered, and what it cost."""
    cost = "cost unknown" if turn.usage.cost_usd is None else f"${turn.usage.cost_usd:.4f}"
    model = turn.model or "default model"
    status = "" if turn.status == "completed" else f" · {turn.status}"
    return f"— codex · {model} · thread {turn.thread_id} · {turn.duration_s:.1f} s · {cost}{status}"


class RelayTools:
    """The tools' behaviour, independent of how they are served."""

    def __init__(
        self, engine: CodexEngine, *, cwd: Path, stages: Mapping[str, StageConfig], **hooks: Unpack[ToolHooks]
    ) -> None:
        self.engine = engine
        self.cwd = cwd
        self.stages = stages
        self.on_event = hooks.get("on_event")
        self.on_turn = hooks.get("on_turn")
        self.run_id = run_id = hooks.get("run_id", "")
        # What Codex asks the owner under a stage's approval policy; "allow for this session" lasts as long
        # as these tools, i.e. the Claude session they serve.
        approve = hooks.get("approve")
        self.approve = CodexGrants(self._announced(approve) if approve is not None else None)
        self.codex_stages = CodexStages(engine, cwd=cwd, approve=self.approve, emit=self._emit, run_id=run_id)

    async def codex(self, task: str, stage: str, context: str = "") -> ToolReply:
        if not task.strip():
            return ToolReply("codex: `task` is empty; say what Codex should do.", is_error=True)
        if stage not in self.stages:
            known = ", ".join(self.stages)
            return ToolReply(f"codex: unknown stage {stage!r}; use one of: {known}.", is_error=True)
        return await self._turn(task, stage, context=context, thread_id=None)

    async def codex_reply(self, thread_id: str, message: str) -> ToolReply:
        if not thread_id.strip() or not message.strip():
            return ToolReply("codex_reply: both `thread_id` and `message` are required.", is_error=True)
        stage = self.engine.stage_of(thread_id) or _REPLY_FALLBACK_STAGE
        if stage not in self.stages:
            stage = _REPLY_FALLBACK_STAGE
        return await self._turn(message, stage, context="", thread_id=thread_id)

    async def _turn(self, task: str, stage: str, *, context: str, thread_id: str | None) -> ToolReply:
        config = self.stages[stage]
        ran = await self.codex_stages.run(
            task, stage=stage, config_name=stage, config=config, context=context, thread_id=thread_id
        )
        turn = ran.outcome
        if isinstance(turn, StageFailure):
            model = config.model or ""
            await self._emit(
                StageEnd(
                    run_id=self.run_id,
                    stage=stage,
                    engine="codex",
                    model=model,
                    duration_s=turn.duration_s,
                    usage=Usage(),
                    thread_id=turn.thread_id,
                    ok=False,
                )
            )
            if turn.thread_id and self.on_turn is not None:
                await self.on_turn(turn.as_turn(stage, model))  # a failed turn's rollout is still worth ingesting
            if isinstance(turn.error, LoginError):
                await self._emit(LoginRefused(turn.error.engine, str(turn.error)))
            return ToolReply(f"Codex ({stage}) failed: {turn.error}", is_error=True)
        await self._emit(
            StageEnd(
                run_id=self.run_id,
                stage=stage,
                engine="codex",
                model=turn.model,
                duration_s=turn.duration_s,
                usage=turn.usage,
                thread_id=turn.thread_id,
                ok=turn.status == "completed",
            )
        )
        if self.on_turn is not None:
            await self.on_turn(turn)
        answer = turn.answer or "(Codex gave no final message)"
        return ToolReply(f"{answer}\n\n{footer(turn)}", is_error=turn.status != "completed")

    def _announced(self, approve: ApprovalHandler) -> ApprovalHandler:
        """``approve``, saying first that the owner is asked (the caller's progress shows it is waiting)."""

        async def ask(request: ApprovalRequest) -> ApprovalDecision:
            shown = f"codex {request.tool_name}"
            await self._emit(PermissionRequest(request.session_id, shown, dict(request.input), request.request_id))
            return await approve(request)

        return ask

    async def _emit(self, event: RelayEvent) -> None:
        if self.on_event is not None:
            await self.on_event(event)


_CODEX_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What Codex should do, self-contained."},
        "stage": {
            "type": "string",
            "description": "research / plan / audit / review: read-only; execute / fix: may write the workspace.",
        },
        "context": {"type": "string", "description": "Findings, file paths or an earlier plan Codex needs."},
    },
    "required": ["task", "stage"],
}
_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thread_id": {"type": "string", "description": "The thread id from an earlier answer's footer."},
        "message": {"type": "string", "description": "The follow-up: findings to address, a question."},
    },
    "required": ["thread_id", "message"],
}
_CODEX_DESCRIPTION = (
    "Hand a task to OpenAI Codex as a subagent, with the stage's sandbox and reasoning effort (plan: the "
    "highest). Returns Codex's answer and a footer naming model, thread id, time and cost."
)
_REPLY_DESCRIPTION = "Continue an earlier Codex thread (same history) with a follow-up message."


def _content(reply: ToolReply) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": reply.text}], "is_error": reply.is_error}


def build_relay_server(
    engine: CodexEngine, *, cwd: Path, stages: Mapping[str, StageConfig], **hooks: Unpack[ToolHooks]
) -> McpSdkServerConfig:
    """The in-process ``relay`` server for ``ClaudeAgentOptions(mcp_servers={"relay": ...})``.

    ``approve`` answers what Codex asks under a stage's approval policy (none: Codex's requests are refused).
    """
    tools = RelayTools(engine, cwd=cwd, stages=stages, **hooks)
    codex_schema = {**_CODEX_SCHEMA, "properties": {**_CODEX_SCHEMA["properties"]}}
    codex_schema["properties"]["stage"] = {**codex_schema["properties"]["stage"], "enum": list(stages)}

    async def codex(args: dict[str, Any]) -> dict[str, Any]:
        return _content(await tools.codex(str(args["task"]), str(args["stage"]), str(args.get("context") or "")))

    async def codex_reply(args: dict[str, Any]) -> dict[str, Any]:
        return _content(await tools.codex_reply(str(args["thread_id"]), str(args["message"])))

    served: list[SdkMcpTool[Any]] = [
        tool("codex", _CODEX_DESCRIPTION, codex_schema)(codex),
        tool("codex_reply", _REPLY_DESCRIPTION, _REPLY_SCHEMA)(codex_reply),
    ]
    return create_sdk_mcp_server(name=SERVER_NAME, tools=served)
