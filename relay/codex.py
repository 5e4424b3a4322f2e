"""Codex as a subagent: one ``codex app-server`` (through the ``openai-codex`` SDK) running turns with
per-stage settings, under a deadline, with its thread id, usage, cost and rollout file recorded.

The owner's own Codex setup is used as is: the environment is passed through (``CODEX_HOME``, the API key
variable of their ``model_provider``) and neither the provider nor ``CODEX_HOME`` is ever overridden; only
the stage's sandbox, effort, model and approval policy are set per thread and turn. The policy is "never"
(nothing waits for a person) unless the owner set another for the stage: then Codex's requests to run a
command or change files go to the turn's :data:`~relay.approvals.ApprovalHandler` through
:class:`~relay.codex_approvals.ApprovalBridge`, and are refused when the turn has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from openai_codex import (
    ApprovalMode,
    AsyncCodex,
    AsyncThread,
    AsyncTurnHandle,
    CodexConfig,
    Sandbox,
    TransportClosedError,
)
from openai_codex import CodexError as SdkCodexError
from openai_codex.types import ReasoningEffort

from relay.approvals import ApprovalHandler
from relay.codex_approvals import ApprovalBridge, hook_approvals, open_asking_thread
from relay.codex_prices import codex_cost
from relay.codex_stream import collect
from relay.errors import CodexError, RelayTimeoutError
from relay.events import Usage
from relay.login import codex_login_error
from relay.process import kill_marked
from relay.stages import HIGHEST, STAGE_BRIEFS, StageConfig

__all__ = ["ENGINE_MARKER_VAR", "CodexEngine", "CodexTurn", "codex_cost", "find_rollout"]

log = logging.getLogger(__name__)

# Set in the app-server's environment (and so its children's): lets aclose() find every process this
# engine started, even ones re-parented after the app-server died.
ENGINE_MARKER_VAR = "MACUPOS_CODEX_ENGINE"
# When the catalog does not know the thread's model, "highest" falls back to an effort every current
# OpenAI reasoning model accepts.
_FALLBACK_HIGHEST = "high"
_INTERRUPT_GRACE_S = 3.0
# What an app-server may take to answer its start-up handshake (it normally takes well under a second).
START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class CodexTurn:
    """One finished Codex turn. ``status``: completed | interrupted | failed."""

    thread_id: str
    answer: str
    model: str
    duration_s: float
    usage: Usage
    rollout_path: Path | None
    status: str
    stage: str = ""
    effort: str | None = None


def find_rollout(codex_home: Path, thread_id: str) -> Path | None:
    """``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread_id>.jsonl``, newest first if several."""
    matches = sorted((codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return matches[-1] if matches else None


class CodexEngine:
    """Owns one Codex app-server process for a session; turns on many threads may share it."""

    def __init__(self, env: Mapping[str, str], codex_bin: Path | None) -> None:
        self._marker = uuid.uuid4().hex
        self._env = {**env, ENGINE_MARKER_VAR: self._marker}
        self._codex_bin = codex_bin
        self._codex: AsyncCodex | None = None
        self._start_lock = asyncio.Lock()
        self._running: dict[str, AsyncTurnHandle] = {}
        self._thread_stage: dict[str, str] = {}
        self._efforts: dict[str, list[str]] | None = None  # model → supported efforts, lowest first
        self._bridge = ApprovalBridge()
        self._hooked = False  # whether the app-server's approval requests reach the bridge
        self.turns: list[CodexTurn] = []

    @classmethod
    async def start(
        cls, *, env: Mapping[str, str], codex_bin: Path | None = None, timeout_s: float = START_TIMEOUT_S
    ) -> CodexEngine:
        """Start the app-server now so a broken Codex setup fails before the first turn needs it.

        The app-server reads ``config.toml`` only when a thread starts: a malformed one is checked here, so
        a run fails before Claude is paid for research rather than at the plan stage. One that does not
        answer within ``timeout_s`` is killed and reported (CodexError).
        """
        engine = cls(env, codex_bin)
        await asyncio.to_thread(engine._check_config)
        try:
            async with asyncio.timeout(timeout_s):
                await engine._ensure()
        except TimeoutError:
            cli = codex_bin or "the bundled codex"
            raise CodexError(
                f"Codex app-server did not answer within {timeout_s:g} s ({cli}); it was stopped"
            ) from None
        return engine

    def _check_config(self) -> None:
        path = self.codex_home / "config.toml"
        try:
            with path.open("rb") as fh:
                tomllib.load(fh)
        except FileNotFoundError:
            return  # Codex's defaults
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise CodexError(f"Codex cannot start: {path} is not a readable TOML file ({exc})") from exc

    @property
    def codex_home(self) -> Path:
        home = self._env.get("CODEX_HOME") or os.path.join(self._env.get("HOME") or os.path.expanduser("~"), ".codex")
        return Path(home)

    def stage_of(self, thread_id: str) -> str | None:
        """The stage a thread was started for by this engine (None for a thread it has not run)."""
        return self._thread_stage.get(thread_id)

    async def _ensure(self) -> AsyncCodex:
        async with self._start_lock:
            if self._codex is None:
                config = CodexConfig(
                    codex_bin=str(self._codex_bin) if self._codex_bin else None,
                    env=dict(self._env),
                    client_name="macupos_relay",
                    client_title="Macupos relay",
                )
                codex = AsyncCodex(config)
                self._hooked = hook_approvals(codex, self._bridge)
                try:
                    await codex.__aenter__()
                except (SdkCodexError, OSError) as exc:
                    await self._kill_strays()
                    raise CodexError(f"Codex app-server did not start: {exc}") from exc
                except BaseException:  # a deadline or a cancel mid-handshake: the half-started server must go too
                    kill_marked(ENGINE_MARKER_VAR, self._marker)
                    raise
                self._codex = codex
            return self._codex

    async def aclose(self) -> None:
        """Stop the app-server and anything it started; idempotent."""
        codex, self._codex = self._codex, None
        self._running.clear()
        if codex is not None:
            with contextlib.suppress(SdkCodexError, OSError):
                await codex.close()
        await self._kill_strays()

    async def __aenter__(self) -> CodexEngine:
        await self._ensure()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def interrupt(self, thread_id: str) -> bool:
        """Interrupt the running turn on ``thread_id``; its ``run_turn`` returns with status "interrupted"."""
        handle = self._running.get(thread_id)
        if handle is None:
            return False
        try:
            await handle.interrupt()
        except SdkCodexError as exc:
            log.warning("interrupting Codex thread %s failed: %s", thread_id, exc)
            return False
        return True

    async def run_turn(
        self,
        task: str,
        *,
        stage: str,
        cwd: Path,
        context: str = "",
        thread_id: str | None = None,
        config: StageConfig,
        approve: ApprovalHandler | None = None,
    ) -> CodexTurn:
        """Run one turn: a new thread with the stage's settings, or ``thread_id`` resumed.

        Under a stage approval policy other than "never", ``approve`` answers what Codex asks to do (none:
        every request is refused). Raises RelayTimeoutError after ``config.timeout_s`` (the turn is interrupted
        first; a request still waiting is refused) and CodexError when Codex or its model API fails.
        """
        started = time.monotonic()
        handle: AsyncTurnHandle | None = None
        current = thread_id or ""
        try:
            async with asyncio.timeout(config.timeout_s):
                codex = await self._ensure()
                if config.asks and not self._hooked:
                    raise CodexError(
                        f"stage {stage} asks for approvals, but this openai-codex SDK hands its approval requests "
                        'to no one; set its approval_policy to "never"',
                        stage=stage,
                    )
                thread = await self._open_thread(codex, stage, cwd, thread_id, config)
                current = thread.id
                if config.asks and approve is not None:
                    self._bridge.ask_for(current, approve, stage=stage, cwd=cwd, wait_s=config.timeout_s)
                model, rollout = await self._describe(thread)
                effort = await self._effort(codex, config, model)
                reasoning = _reasoning_effort(effort, stage)
                handle = await thread.turn(
                    _prompt(task, context),
                    effort=reasoning,
                    model=config.model,
                    sandbox=Sandbox(config.sandbox),
                )
                self._running[current] = handle
                collected = await collect(handle, self._bridge)
        except asyncio.CancelledError:
            # The caller gave up (Claude abandoned the tool call, the session was interrupted): stop the turn
            # too, or the thread stays busy and a later codex_reply would join the abandoned turn. A request
            # still waiting for the owner is refused first: until it is answered the SDK reads nothing else.
            self._bridge.release(current)
            if handle is not None:
                await asyncio.shield(self._stop_turn(handle))
            raise
        except TimeoutError:
            self._bridge.release(current)
            if handle is not None:
                await self._stop_turn(handle)
            raise RelayTimeoutError(
                f"Codex {stage} turn passed its {config.timeout_s:g} s deadline (thread {current or 'not started'})",
                kind="deadline",
                limit_s=config.timeout_s,
                session_id=current,
            ) from None
        except SdkCodexError as exc:
            if isinstance(exc, TransportClosedError):
                await self.aclose()  # the app-server is gone: the next turn starts a fresh one
            raise CodexError(
                f"Codex {stage} turn failed (thread {current or 'not started'}): {exc}", thread_id=current, stage=stage
            ) from exc
        finally:
            self._bridge.release(current)
            if current and self._running.get(current) is handle:
                self._running.pop(current, None)
        if collected.status == "failed" and collected.unauthorized:
            raise codex_login_error(collected.error, thread_id=current)
        if collected.status == "failed":
            raise CodexError(
                f"Codex {stage} turn failed (thread {current}): {collected.error or 'no reason given'}",
                thread_id=current,
                stage=stage,
            )
        self._thread_stage.setdefault(current, stage)
        if rollout is None or not rollout.exists():
            rollout = await asyncio.to_thread(find_rollout, self.codex_home, current)
        usage = Usage(
            input_tokens=collected.input_tokens - collected.cached_tokens,
            output_tokens=collected.output_tokens,
            cache_read_tokens=collected.cached_tokens,
            cost_usd=codex_cost(model, collected.input_tokens, collected.cached_tokens, collected.output_tokens),
        )
        turn = CodexTurn(
            thread_id=current,
            answer=collected.answer,
            model=model,
            duration_s=time.monotonic() - started,
            usage=usage,
            rollout_path=rollout,
            status=collected.status,
            stage=stage,
            effort=effort,
        )
        self.turns.append(turn)
        return turn

    # -- internals -------------------------------------------------------------------------------

    async def _open_thread(
        self, codex: AsyncCodex, stage: str, cwd: Path, thread_id: str | None, config: StageConfig
    ) -> AsyncThread:
        if config.asks:
            return await open_asking_thread(codex, cwd, thread_id, config, _developer_instructions(stage))
        # ApprovalMode.deny_all is approval policy "never": nothing ever waits for a human.
        if thread_id:
            return await codex.thread_resume(
                thread_id,
                approval_mode=ApprovalMode.deny_all,
                cwd=str(cwd),
                sandbox=Sandbox(config.sandbox),
                model=config.model,
            )
        return await codex.thread_start(
            approval_mode=ApprovalMode.deny_all,
            cwd=str(cwd),
            sandbox=Sandbox(config.sandbox),
            model=config.model,
            developer_instructions=_developer_instructions(stage),
        )

    @staticmethod
    async def _describe(thread: AsyncThread) -> tuple[str, Path | None]:
        read = await thread.read()
        path = read.thread.path
        return read.thread.model or "", Path(path) if path else None

    async def _effort(self, codex: AsyncCodex, config: StageConfig, model: str) -> str | None:
        if config.effort != HIGHEST:
            return config.effort
        if self._efforts is None:
            listing = await codex.models(include_hidden=True)
            self._efforts = {
                entry.id: [option.reasoning_effort.value for option in entry.supported_reasoning_efforts or []]
                for entry in listing.data
            }
        supported = self._efforts.get(model) or []
        return supported[-1] if supported else _FALLBACK_HIGHEST

    async def _stop_turn(self, handle: AsyncTurnHandle) -> None:
        """Interrupt a turn past its deadline; if the app-server does not answer, kill it (restarted lazily)."""
        try:
            async with asyncio.timeout(_INTERRUPT_GRACE_S):
                await handle.interrupt()
                return
        except (TimeoutError, SdkCodexError) as exc:
            log.warning("Codex did not take the interrupt (%s); restarting its app-server", exc)
        await self._kill_strays()  # first: a graceful close would give a server that hangs seconds more
        await self.aclose()

    async def _kill_strays(self) -> None:
        """SIGKILL every process still carrying this engine's marker (Linux /proc; a no-op elsewhere)."""
        await asyncio.to_thread(kill_marked, ENGINE_MARKER_VAR, self._marker)


def _reasoning_effort(effort: str | None, stage: str) -> ReasoningEffort | None:
    if not effort:
        return None
    try:
        return ReasoningEffort(effort)
    except ValueError:
        known = ", ".join(value.value for value in ReasoningEffort)
        raise CodexError(
            f"unknown reasoning effort {effort!r} for stage {stage} (known: {known})", stage=stage
        ) from None


def _prompt(task: str, context: str) -> str:
    if not context.strip():
        return task
    return f"{task}\n\n<context>\n{context}\n</context>"


def _developer_instructions(stage: str) -> str:
    brief = STAGE_BRIEFS.get(stage, "answer the task.")
    return (
        f"You are the Codex subagent of a Claude Code session, running its {stage} stage: {brief} "
        "Your final message is returned verbatim to that session, so make it self-contained."
    )
