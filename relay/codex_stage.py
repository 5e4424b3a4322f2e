"""One Codex stage turn, as both Codex stage runners take it: Claude's ``codex`` / ``codex_reply`` tools
(relay.relay_tools) and an RPA run's Codex stages (relay.rpa).

:meth:`CodexStages.run` says the stage has started (StageStart), runs the turn with the stage's settings and
the caller's approvals, and on a :class:`~relay.errors.RelayError` names the thread the turn failed on and
finds that thread's rollout (still worth ingesting). It does not end the stage: the tools answer Claude and
the RPA run writes the stage's artifact first, each with its own StageEnd.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from relay.approvals import ApprovalHandler
from relay.codex import CodexEngine, CodexTurn, find_rollout
from relay.errors import CodexError, RelayError
from relay.events import RelayEvent, StageStart, Usage
from relay.stages import StageConfig

__all__ = ["CodexStages", "StageFailure", "StageTurn"]

Emit = Callable[[RelayEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StageFailure:
    """A stage's turn that failed."""

    error: RelayError
    thread_id: str  # the thread it failed on; "" when it never got one
    rollout: Path | None  # that thread's rollout file, when Codex wrote one
    duration_s: float  # from the turn's start to the failure
    unfinished: CodexTurn | None = None  # a turn that ended other than "completed" (``completed_only``)

    def as_turn(self, stage: str, model: str) -> CodexTurn:
        """The failed turn with no answer and no usage, for a caller that collects every turn's rollout."""
        return CodexTurn(self.thread_id, "", model, self.duration_s, Usage(), self.rollout, "failed", stage)


@dataclass(frozen=True, slots=True)
class StageTurn:
    """What :meth:`CodexStages.run` ran: the turn, or its failure."""

    started: float  # time.monotonic() as the turn began (after StageStart), for the stage's duration
    outcome: CodexTurn | StageFailure


class CodexStages:
    """Codex stage turns in one folder, for one run id, with one approval handler and one event sink."""

    def __init__(self, engine: CodexEngine, *, cwd: Path, approve: ApprovalHandler, emit: Emit, run_id: str) -> None:
        self.engine = engine
        self.cwd = cwd
        self.approve = approve
        self.emit = emit
        self.run_id = run_id

    async def run(
        self,
        task: str,
        *,
        stage: str,
        config_name: str,
        config: StageConfig,
        context: str = "",
        thread_id: str | None = None,
        round_: int = 1,
        completed_only: bool = False,
    ) -> StageTurn:
        """One turn of ``stage`` under the settings and brief of ``config_name`` (an RPA "revise" runs as
        "plan"); ``thread_id`` continues that thread. ``completed_only``: a turn that ended otherwise (e.g.
        interrupted) is a failure too, a CodexError naming its status. Other errors propagate."""
        await self.emit(StageStart(self.run_id, stage, "codex", config.model or "", round_))
        started = time.monotonic()
        unfinished: CodexTurn | None = None
        try:
            turn = await self.engine.run_turn(
                task,
                stage=config_name,
                cwd=self.cwd,
                context=context,
                thread_id=thread_id,
                config=config,
                approve=self.approve,
            )
            if completed_only and turn.status != "completed":
                unfinished = turn
                raise CodexError(f"Codex {stage} turn ended {turn.status}", thread_id=turn.thread_id, stage=stage)
        except RelayError as exc:
            # CodexError names the thread, a timeout or a refused login its session id; else the one resumed.
            failed = getattr(exc, "thread_id", "") or getattr(exc, "session_id", "") or thread_id or ""
            elapsed = time.monotonic() - started
            rollout = await asyncio.to_thread(find_rollout, self.engine.codex_home, failed) if failed else None
            return StageTurn(started, StageFailure(exc, failed, rollout, elapsed, unfinished))
        return StageTurn(started, turn)
