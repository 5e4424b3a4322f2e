"""Research → Plan → Audit, driven by the relay itself: ``run_rpa(task, …) -> RunReport``.

research (Claude, read-only tools) → plan (Codex, plan stage: highest effort, read-only) → audit (Claude,
JSON verdict) → revise on the plan's thread until approved or ``max_rounds`` audits → execute (Codex
workspace-write, or Claude) → review by the other engine (JSON verdict) → at most one fix round by the
executing engine → report. Claude's research, audits and (when Codex executes) review are follow-ups on
one live read-only session, so the audit knows what the research traced and only one CLI starts.

Every stage writes ``$MACUPOS_HOME/runs/<run-id>/NN-<stage>.md``, emits StageStart / StageEnd and puts a
ledger row with the run id. At the end the Claude sessions are closed (which ingests them into memory
with the run's Codex rollouts) and each rollout is linked to the run's first Claude session as one of its
subagent sessions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from memory import Memory, MemoryStoreError
from relay.approvals import ApprovalHandler
from relay.artifacts import ArtifactHeader, artifact_name, new_run_id, store_artifact
from relay.codex import CodexEngine, CodexTurn
from relay.codex_approvals import CodexGrants
from relay.codex_stage import CodexStages, StageFailure
from relay.errors import ArtifactError, LoginError, RelayError
from relay.events import StageEnd, StageStart, Usage
from relay.ledger import Ledger
from relay.rpa_report import RunReport, StageOutcome, phone_summary
from relay.rpa_text import (
    Verdict,
    audit_prompt,
    execute_prompt,
    fix_prompt,
    parse_verdict,
    plan_prompt,
    research_prompt,
    review_prompt,
    revise_prompt,
)
from relay.session import ClaudeSession, EventSink
from relay.session_memory import rollout_session_id
from relay.settings import RelaySettings
from relay.stages import StageConfig, stage_configs

__all__ = ["READ_ONLY_TOOLS", "RPA_STAGES", "run_rpa"]

logger = logging.getLogger(__name__)

RPA_STAGES: tuple[str, ...] = ("research", "plan", "audit", "execute", "review")
READ_ONLY_TOOLS: tuple[str, ...] = ("Read", "Grep", "Glob", "LS")
# Denied outright in the read-only session: deny rules beat any allow rule in the owner's settings.
_WRITE_TOOLS: tuple[str, ...] = ("Edit", "Write", "MultiEdit", "NotebookEdit", "Bash")
Executor = Literal["codex", "claude"]


def _check_stages(stages: Sequence[str], max_rounds: int) -> frozenset[str]:
    wanted = frozenset(stages)
    unknown = sorted(wanted - set(RPA_STAGES))
    if unknown:
        raise ValueError(f"unknown RPA stage(s) {unknown} (known: {', '.join(RPA_STAGES)})")
    if not wanted:
        raise ValueError("an RPA run needs at least one stage")
    if "audit" in wanted and "plan" not in wanted:
        raise ValueError("the audit stage needs the plan stage")
    if "review" in wanted and "execute" not in wanted:
        raise ValueError("the review stage needs the execute stage")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be at least 1, not {max_rounds}")
    return wanted


class _Run:
    """The state of one run; every stage goes through :meth:`_claude` or :meth:`_codex`."""

    def __init__(
        self,
        task: str,
        *,
        settings: RelaySettings,
        project_dir: Path,
        eywa: Memory,
        codex: CodexEngine,
        configs: Mapping[str, StageConfig],
        on_event: EventSink | None,
        ledger: Ledger | None,
        run_id: str,
        approve: ApprovalHandler | None = None,
    ) -> None:
        self.task = task
        self.codex_approve = CodexGrants(approve)  # Codex's requests under a stage's approval policy
        self.settings = settings
        self.project_dir = project_dir
        self.eywa = eywa
        self.codex = codex
        self.configs = configs
        self.on_event = on_event
        self.ledger = ledger
        self.run_id = run_id
        self.run_dir = settings.runs_dir / run_id
        self.outcomes: list[StageOutcome] = []
        self.sessions: list[ClaudeSession] = []  # in start order; the first is the rollouts' parent
        self.used: set[int] = set()  # ids of the sessions that ran at least one stage
        self.rollouts: list[Path] = []
        self.approved = False
        self.rounds = 0
        self.codex_stages = CodexStages(
            codex, cwd=project_dir, approve=self.codex_approve, emit=self.emit, run_id=run_id
        )

    async def emit(self, event: Any) -> None:
        if self.on_event is not None:
            await self.on_event(event)

    # -- stages ---------------------------------------------------------------------------------

    async def _claude(self, session: ClaudeSession, stage: str, round_: int, prompt: str) -> StageOutcome:
        model = session.model or self.settings.claude_model or ""
        await self.emit(StageStart(self.run_id, stage, "claude", model, round_))
        started = time.monotonic()
        session.stage = stage  # the ledger row of this turn carries it
        self.used.add(id(session))
        try:
            result = await session.send(prompt)
        except RelayError as exc:
            await self._record_failure(stage, round_, "claude", model, started, session.session_id, exc)
            raise
        verdict = parse_verdict(result.answer) if stage in ("audit", "review") else None
        return await self._record(
            stage, round_, "claude", session.model or model, started, result.usage, session.session_id,
            result.answer, verdict, ok=not result.is_error,
        )  # fmt: skip

    async def _codex(
        self, stage: str, round_: int, config_name: str, task: str, *, context: str = "", thread_id: str | None = None
    ) -> StageOutcome:
        config = self.configs[config_name]
        ran = await self.codex_stages.run(
            task, stage=stage, config_name=config_name, config=config, context=context, thread_id=thread_id,
            round_=round_, completed_only=True,
        )  # fmt: skip
        started, turn = ran.started, ran.outcome
        if isinstance(turn, StageFailure):
            if turn.unfinished is not None:
                self._keep_rollout(turn.unfinished.rollout_path)
            self._keep_rollout(turn.rollout)
            await self._record_failure(stage, round_, "codex", config.model or "", started, turn.thread_id, turn.error)
            raise turn.error
        self._keep_rollout(turn.rollout_path)
        await self._ledger_codex(turn, stage)
        verdict = parse_verdict(turn.answer) if stage in ("audit", "review") else None
        return await self._record(
            stage, round_, "codex", turn.model, started, turn.usage, turn.thread_id, turn.answer, verdict
        )

    def _parent(self) -> ClaudeSession | None:
        """The session the run's Codex turns belong to: the first one that ran a stage."""
        return next((s for s in self.sessions if id(s) in self.used), None)

    def _keep_rollout(self, path: Path | None) -> None:
        if path is not None and path not in self.rollouts:
            self.rollouts.append(path)

    async def _ledger_codex(self, turn: CodexTurn, stage: str) -> None:
        if self.ledger is None:
            return
        parent = self._parent()
        await self.ledger.record(
            engine="codex",
            usage=turn.usage,
            model=turn.model,
            session_id=parent.session_id if parent is not None else "",
            thread_id=turn.thread_id,
            run_id=self.run_id,
            stage=stage,
            duration_s=turn.duration_s,
            rollout_path=turn.rollout_path or "",
        )

    async def _record(
        self,
        stage: str,
        round_: int,
        engine: str,
        model: str,
        started: float,
        usage: Usage,
        thread_id: str,
        answer: str,
        verdict: Verdict | None,
        *,
        ok: bool = True,
    ) -> StageOutcome:
        duration = time.monotonic() - started
        index = len(self.outcomes) + 1
        numbered = stage in ("audit", "revise")
        header = ArtifactHeader(
            self.run_id, stage, round_, engine, model, duration, usage.tokens, usage.cost_usd, thread_id, ok
        )
        body = f"# {stage.capitalize()}" + (f" (round {round_})" if numbered else "") + f"\n\n{answer.strip()}\n"
        if verdict is not None:
            listed = "\n".join(f"{n}. {f}" for n, f in enumerate(verdict.findings, 1)) or "(no findings)"
            body += f"\n## Verdict: {verdict.verdict}\n\n{listed}\n"
        name = artifact_name(index, stage, round_ if numbered else None)
        path = await store_artifact(self.run_dir, name, header, body)
        outcome = StageOutcome(
            index, stage, round_, engine, model, duration, usage, path, thread_id, ok,
            verdict.verdict if verdict else None, verdict.findings if verdict else (), answer,
        )  # fmt: skip
        self.outcomes.append(outcome)
        await self.emit(StageEnd(self.run_id, stage, engine, model, duration, usage, str(path), thread_id, ok, round_))
        return outcome

    async def _record_failure(
        self, stage: str, round_: int, engine: str, model: str, started: float, thread_id: str, exc: RelayError
    ) -> None:
        await self._record(
            stage, round_, engine, model, started, Usage(), thread_id, f"**Failed:** {exc}", None, ok=False
        )

    # -- flow -----------------------------------------------------------------------------------

    async def go(
        self,
        wanted: frozenset[str],
        max_rounds: int,
        executor: Executor,
        main: ClaudeSession,
        open_session: Callable[..., Awaitable[ClaudeSession]],
    ) -> None:
        research = ""
        if "research" in wanted:
            research = (await self._claude(main, "research", 1, research_prompt(self.task, self.run_dir))).answer
        plan_text, plan_thread = "", None
        if "plan" in wanted:
            task, context = plan_prompt(self.task, research)
            planned = await self._codex("plan", 1, "plan", task, context=context)
            plan_text, plan_thread = planned.answer, planned.thread_id
        self.approved = True
        if "audit" in wanted:
            self.approved = False
            for round_ in range(1, max_rounds + 1):
                self.rounds = round_
                prompt = audit_prompt(self.task, plan_text, round_, max_rounds, self.run_dir)
                audit = await self._claude(main, "audit", round_, prompt)
                if audit.verdict == "approve":
                    self.approved = True
                    break
                if round_ == max_rounds:
                    break  # a revision nobody audits would be executed blind: stop here
                message = revise_prompt(audit.findings, audit.answer)
                revised = await self._codex("revise", round_, "plan", message, thread_id=plan_thread)
                plan_text = revised.answer
        if not self.approved or "execute" not in wanted:
            return
        if executor == "codex":
            task, context = execute_prompt(self.task, plan_text)
            done = await self._codex("execute", 1, "execute", task, context=context)
            if "review" not in wanted:
                return
            review = await self._claude(
                main, "review", 1, review_prompt(self.task, plan_text, done.answer, "Codex", self.run_dir)
            )
            if review.findings or review.verdict != "approve":
                message = fix_prompt(review.findings, review.answer, "Claude")
                await self._codex("fix", 1, "fix", message, thread_id=done.thread_id)
            return
        writer: ClaudeSession = await open_session(execute=True)
        task, context = execute_prompt(self.task, plan_text)
        done = await self._claude(writer, "execute", 1, f"{task}\n\n{context}")
        if "review" not in wanted:
            return
        review = await self._codex(
            "review", 1, "review", review_prompt(self.task, plan_text, done.answer, "Claude", self.run_dir)
        )
        if review.findings or review.verdict != "approve":
            await self._claude(writer, "fix", 1, fix_prompt(review.findings, review.answer, "Codex"))

    async def close(self) -> None:
        """Close the sessions (ingesting them with the rollouts), then link each rollout as a subagent."""
        parent = self._parent()
        if parent is not None:
            for path in self.rollouts:
                parent.add_linked_rollout(path)
        for session in self.sessions:
            await session.aclose()
        existing = [p for p in self.rollouts if p.is_file()]
        # Ingested here too: a session that ended early (its stage failed) ingested before the rollouts were
        # added. Files already ingested with their session are unchanged and cost a hash each.
        if existing:
            try:
                await self.eywa.ingest(existing)
            except MemoryStoreError as exc:
                logger.warning("could not ingest the Codex rollouts of run %s: %s", self.run_id, exc)
        if parent is None:
            return
        for path in existing:
            rollout_id = await asyncio.to_thread(rollout_session_id, path)
            try:
                await self.eywa.link(rollout_id, parent_id=parent.session_id)
            except MemoryStoreError as exc:
                logger.warning("could not link %s to session %s: %s", rollout_id, parent.session_id, exc)

    def report(self, started: float, error: str) -> RunReport:
        priced = [o.usage.cost_usd for o in self.outcomes if o.usage.cost_usd is not None]
        cost = sum(priced) if priced else None
        tokens = sum(o.usage.tokens for o in self.outcomes)
        duration = time.monotonic() - started
        text = phone_summary(self.outcomes, self.approved, self.rounds, error, cost, tokens, duration, self.run_dir)
        return RunReport(
            self.run_id, self.approved, self.rounds, list(self.outcomes), text, cost, tokens, duration,
            self.run_dir, error,
        )  # fmt: skip


async def run_rpa(
    task: str,
    *,
    settings: RelaySettings,
    project_dir: Path,
    eywa: Memory,
    codex: CodexEngine,
    stages: Sequence[str] = RPA_STAGES,
    max_rounds: int = 3,
    on_event: EventSink | None = None,
    ledger: Ledger | None = None,
    facts_lines: Sequence[str] = (),
    executor: Executor = "codex",
    approve: ApprovalHandler | None = None,
    run_id: str | None = None,
) -> RunReport:
    """Run the stages in their fixed order (``stages`` picks which) and report.

    A failing stage (Claude or Codex error, timeout) stops the run: its artifact says why and the report
    carries ``error``; a refused login (LoginError) is raised after the report is stored, as retrying cannot
    help. ValueError for unknown stages or a stage without the one it depends on. The caller
    owns ``codex`` (and its app-server); the Claude sessions are the run's own and always closed. ``approve``
    answers the tool calls of Claude's execute session that need the owner's consent, and what Codex asks
    under a stage's approval policy.
    """
    wanted = _check_stages(stages, max_rounds)
    if executor not in ("codex", "claude"):
        raise ValueError(f"executor must be 'codex' or 'claude', not {executor!r}")
    configs = stage_configs(settings.codex_stages)
    run = _Run(
        task,
        settings=settings,
        project_dir=project_dir.resolve(),
        eywa=eywa,
        codex=codex,
        configs=configs,
        on_event=on_event,
        ledger=ledger,
        run_id=run_id or new_run_id(),
        approve=approve,
    )
    read_only = replace(
        settings,
        permission_mode="default",
        allowed_tools=READ_ONLY_TOOLS,
        disallowed_tools=tuple(dict.fromkeys((*settings.disallowed_tools, *_WRITE_TOOLS))),
    )
    # Claude executes with file edits allowed in the project, like Codex's workspace-write; shell commands
    # still go to the approval hook and the owner's deny rules stay.
    writer = replace(settings, permission_mode="acceptEdits")

    async def open_session(*, execute: bool) -> ClaudeSession:
        session = await ClaudeSession.start(
            writer if execute else read_only,
            project_dir=run.project_dir,
            eywa=eywa,
            facts_lines=facts_lines,
            approve=approve if execute else None,
            on_event=on_event,
            ledger=ledger,
            run_id=run.run_id,
            stage="execute" if execute else "research",
        )
        run.sessions.append(session)
        return session

    # Before any model is paid for: a run whose record cannot be kept is refused up front.
    try:
        await asyncio.to_thread(run.run_dir.mkdir, parents=True, exist_ok=True)
    except OSError as exc:
        raise ArtifactError(run.run_dir, exc.strerror or str(exc)) from exc
    started = time.monotonic()
    error = ""
    refused: LoginError | None = None
    try:
        main = await open_session(execute=False)
        await run.go(wanted, max_rounds, executor, main, open_session)
    except RelayError as exc:
        error = str(exc)
        refused = exc if isinstance(exc, LoginError) else None
        logger.warning("RPA run %s stopped: %s", run.run_id, exc)
    finally:
        await run.close()
    report = run.report(started, error)
    body = report.summary + "\n\n" + "\n".join(f"- {o.artifact.name}" for o in report.stages)
    header = ArtifactHeader(
        run.run_id, "report", 1, "relay", "", report.duration_s, report.tokens, report.cost_usd, "", not error
    )
    name = artifact_name(len(report.stages) + 1, "report")
    try:
        await store_artifact(run.run_dir, name, header, body)
    except ArtifactError as exc:  # the report itself is returned: the caller still shows it
        logger.warning("%s", exc)
    if refused is not None:
        raise refused  # a refused login stops every run alike: the caller names it and its fix (report kept)
    return report
