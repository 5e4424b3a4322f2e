"""`ClaudeSession`: one Claude Code session over `ClaudeSDKClient` in streaming-input mode, supervised.

The CLI process starts at the first instruction (the grounding depends on it) and then takes follow-ups
without restarting. Every run is bounded by an overall deadline and an idle timeout; on timeout the CLI's
whole process group (it is started in its own session) and every process carrying the session's tag are
killed. Every end of the session — close, error, timeout — ingests the transcript, its subagent files and
the Codex rollouts it caused into memory and emits :class:`HandoffReady`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import claude_agent_sdk as sdk
from claude_agent_sdk import ClaudeSDKClient

from memory import Memory
from relay.approvals import ApprovalHandler
from relay.claude_options import TAG_ENV, claude_options
from relay.claude_permission import PermissionGate
from relay.errors import LoginError, RelayError, RelayTimeoutError, SessionError
from relay.events import (
    HandoffReady,
    RelayEvent,
    SessionResult,
    TextDelta,
)
from relay.grounding import build_grounding, ensure_rules_file
from relay.ledger import Ledger
from relay.login import claude_login_error
from relay.process import kill_marked, marked_pids
from relay.sdk_events import SpendMeter, translate
from relay.session_memory import ingest_session, session_files
from relay.session_result import CostCount, record_codex_turn, record_result, run_failure, session_result
from relay.settings import RelaySettings
from relay.user_message import ImageInput, user_messages

__all__ = ["ClaudeSession", "EventSink", "tagged_pids"]

logger = logging.getLogger(__name__)

EventSink = Callable[[RelayEvent], Awaitable[None]]

_STDERR_LINES = 40
_INTERRUPT_GRACE_S = 2.0


def tagged_pids(tag: str) -> list[int]:
    """Live processes started by the session tagged ``tag``."""
    return marked_pids(TAG_ENV, tag)


async def _kill_all(pgid: int | None, tag: str) -> None:
    # A thread: the kill scans /proc and waits (bounded) for its victims to be gone, which the loop must not.
    await asyncio.to_thread(kill_marked, TAG_ENV, tag, pgid=pgid)


class ClaudeSession:
    """Create with :meth:`start`; drive with :meth:`send` or :meth:`stream`; always :meth:`aclose`."""

    def __init__(
        self,
        settings: RelaySettings,
        *,
        project_dir: Path,
        eywa: Memory,
        facts_lines: Sequence[str],
        resume: str | None,
        mcp_servers: Mapping[str, Any],
        approve: ApprovalHandler | None,
        on_event: EventSink | None,
        ledger: Ledger | None,
        run_id: str,
        stage: str,
        project: str | None,
        continued: tuple[str, str] | None = None,
        branch: str | None = None,
    ) -> None:
        self.settings = settings
        self.branch = branch  # a worktree's branch: grounding prefers that branch's handoffs
        self.project_dir = project_dir
        self.eywa = eywa
        self.facts_lines = tuple(facts_lines)
        self.resume = resume
        self.mcp_servers: dict[str, Any] = dict(mcp_servers)
        self.ledger = ledger
        self.run_id = run_id
        self.stage = stage
        self.project = project if project is not None else project_dir.name
        self.continued = continued  # (session id, handoff) of a session this fresh one stands in for
        self.tag = uuid.uuid4().hex
        # A new session gets its id from us, so even a run killed before the CLI reports it can be ingested.
        self.session_id = resume or str(uuid.uuid4())
        self.grounding = ""  # the system-prompt appendix the CLI was started with
        self.model = ""  # the model of the latest result, as the CLI reported it
        self._permission = PermissionGate(settings, approve, self.emit, lambda: self.session_id)
        self._on_event = on_event
        self._client: ClaudeSDKClient | None = None
        self._pid: int | None = None
        self._session_ids: list[str] = [self.session_id]
        self._rollouts: list[Path] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._lock = asyncio.Lock()
        self._running = False
        self._interrupted = False
        self._closed = False
        self._costs = CostCount()
        self._meter = SpendMeter()  # the running turn's model calls, priced as they come (SpendTick)
        self._login: LoginError | None = None  # the API refused the login during this run
        self._ended: HandoffReady | None = None

    @classmethod
    async def start(
        cls,
        settings: RelaySettings,
        *,
        project_dir: Path,
        eywa: Memory,
        facts_lines: Sequence[str] = (),
        resume: str | None = None,
        mcp_servers: Mapping[str, Any] | None = None,
        approve: ApprovalHandler | None = None,
        on_event: EventSink | None = None,
        ledger: Ledger | None = None,
        run_id: str = "",
        stage: str = "",
        project: str | None = None,
        continued: tuple[str, str] | None = None,
        branch: str | None = None,
    ) -> ClaudeSession:
        """Prepare a session in ``project_dir``. The CLI starts with the first instruction, grounded on it.

        ``approve`` answers the tool calls that need the owner's consent; without it they are denied. Resuming
        a session the CLI does not have raises :class:`SessionNotFoundError` at the first instruction; a fresh
        session given ``continued`` (session id, handoff markdown) is grounded on that handoff first.
        A login the API refuses raises :class:`LoginError`.
        """
        if not project_dir.is_dir():
            raise SessionError(f"project folder {project_dir} does not exist")
        await asyncio.to_thread(ensure_rules_file, settings.rules_path)
        return cls(
            settings,
            project_dir=project_dir.resolve(),
            eywa=eywa,
            facts_lines=facts_lines,
            resume=resume,
            mcp_servers=mcp_servers or {},
            approve=approve,
            on_event=on_event,
            ledger=ledger,
            run_id=run_id,
            stage=stage,
            project=project,
            continued=continued,
            branch=branch,
        )

    # -- wiring ---------------------------------------------------------------------------------

    def add_mcp_server(self, name: str, config: Any) -> None:
        """Add a server (e.g. the relay server, built with ``on_turn=session.on_codex_turn``) before the first run."""
        if self._client is not None:
            raise SessionError("MCP servers must be added before the first instruction", session_id=self.session_id)
        self.mcp_servers[name] = config

    def add_linked_rollout(self, path: Path) -> None:
        """A Codex rollout this session caused: ingested with it at the end, as one of its subagents."""
        if path not in self._rollouts:
            self._rollouts.append(path)

    async def on_codex_turn(self, turn: Any) -> None:
        """A relay-tools ``on_turn`` sink: link the turn's rollout and put its cost in the ledger."""
        rollout = getattr(turn, "rollout_path", None)
        if rollout is not None:
            self.add_linked_rollout(Path(rollout))
        if self.ledger is not None:
            await record_codex_turn(self.ledger, turn, session_id=self.session_id, run_id=self.run_id, stage=self.stage)

    async def emit(self, event: RelayEvent) -> None:
        if self._on_event is not None:
            await self._on_event(event)

    @property
    def pid(self) -> int | None:
        """The CLI's process id (also its process group id) while it runs."""
        return self._pid

    # -- running --------------------------------------------------------------------------------

    async def send(self, instruction: str, *, images: Sequence[ImageInput] = ()) -> SessionResult:
        """Run one instruction (and its images) to its result (a follow-up reuses the live CLI process)."""
        result: SessionResult | None = None
        async for event in self.stream(instruction, images=images):
            if isinstance(event, SessionResult):
                result = event
        if result is None:
            raise SessionError("the run ended without a result", session_id=self.session_id)
        return result

    async def stream(self, instruction: str, *, images: Sequence[ImageInput] = ()) -> AsyncIterator[RelayEvent]:
        """Run one instruction, yielding our events; the last one of a finished run is a SessionResult.

        ``images`` go with the instruction as image blocks of the same user message.
        """
        async with self._lock:
            if self._closed:
                raise SessionError("the session is closed", session_id=self.session_id)
            client = await self._connect(instruction)
            self._running, self._interrupted, self._login = True, False, None
            try:
                await client.query(user_messages(instruction, images) if images else instruction)
                async for event in self._supervised(client):
                    await self.emit(event)
                    yield event
            except sdk.ClaudeSDKError as exc:
                await self._end(kill=True)
                raise self._failure(f"Claude Code failed: {exc}", exc) from exc
            except BaseException:
                # Cancelled, abandoned mid-run, or an error the SDK did not type: the CLI may still be
                # producing this turn, so the session cannot continue. Interrupt it so it writes its
                # transcript, end it (ingest, sweep) and re-raise.
                await self._end(kill=False, interrupt=True)
                raise
            finally:
                self._running = False

    async def interrupt(self) -> bool:
        """Stop the running turn; the session stays usable. False when nothing was running."""
        if not self._running or self._client is None:
            return False
        self._interrupted = True
        try:
            async with asyncio.timeout(_INTERRUPT_GRACE_S * 5):
                await self._client.interrupt()
        # The SDK raises a bare Exception when its control request times out; a failed interrupt must
        # not take the caller (a /stop, a shutdown closing every session) down with it.
        except Exception as exc:  # noqa: BLE001
            logger.warning("interrupt failed: %s", exc)
            return False
        return True

    async def aclose(self) -> HandoffReady | None:
        """End the session: stop the CLI, ingest what it wrote, emit HandoffReady. Safe to call twice."""
        if self._closed:
            return self._ended
        return await self._end(kill=False)

    async def __aenter__(self) -> ClaudeSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- internals ------------------------------------------------------------------------------

    async def _connect(self, instruction: str) -> ClaudeSDKClient:
        if self._client is not None:
            return self._client
        s = self.settings
        self.grounding = await build_grounding(
            rules_path=s.rules_path,
            facts_lines=self.facts_lines,
            eywa=self.eywa,
            instruction=instruction,
            project=self.project,
            continued=self.continued,
            project_dir=self.project_dir,
            branch=self.branch,
        )
        if self.resume and self.ledger is not None:
            # Claude Code restores a resumed session's running cost total: what the ledger already holds for
            # it is not this run's spend (without this, every resumed run was charged its whole history).
            self._costs = CostCount(await self.ledger.session_spent(self.resume))
        options = await claude_options(
            s,
            project_dir=self.project_dir,
            grounding=self.grounding,
            tag=self.tag,
            resume=self.resume,
            session_id=self.session_id,
            mcp_servers=self.mcp_servers,
            can_use_tool=self._permission,
            stderr=self._stderr.append,
        )
        client = ClaudeSDKClient(options)
        limit = self.settings.idle_timeout_s
        connecting = asyncio.ensure_future(client.connect())
        try:
            await asyncio.wait_for(asyncio.shield(connecting), limit)
        # The SDK raises a bare Exception when the CLI's initialize handshake times out.
        except BaseException as exc:
            # The CLI goes first: the SDK's own clean-up would give a silent one 5 s to exit by itself.
            await _kill_all(None, self.tag)
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            if not isinstance(exc, Exception):
                raise  # cancelled
            why = f"no answer to its start-up handshake in {limit:g} s" if isinstance(exc, TimeoutError) else exc
            raise self._failure(f"Claude Code did not start: {why}", exc) from exc
        transport = getattr(client, "_transport", None)  # the SDK exposes no PID; this is best effort
        process = getattr(transport, "_process", None)
        self._pid = getattr(process, "pid", None)
        self._client = client
        return client

    async def _supervised(self, client: ClaudeSDKClient) -> AsyncIterator[RelayEvent]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.deadline_s
        idle = self.settings.idle_timeout_s
        messages = client.receive_response()
        try:
            async for event in self._pump(messages, deadline, idle):
                yield event
        finally:
            closer = getattr(messages, "aclose", None)
            if closer is not None:
                await closer()

    async def _pump(self, messages: AsyncIterator[Any], deadline: float, idle: float) -> AsyncIterator[RelayEvent]:
        loop = asyncio.get_running_loop()
        texts: list[str] = []
        while True:
            left = deadline - loop.time()
            try:
                async with asyncio.timeout(max(0.0, min(idle, left))):
                    message = await anext(messages)
            except StopAsyncIteration:
                await self._end(kill=True)
                raise self._failure("Claude Code stopped without a result") from None
            except TimeoutError:
                kind, limit = ("deadline", self.settings.deadline_s) if left <= idle else ("idle", idle)
                await self._end(kill=True)
                what = "passed its deadline" if kind == "deadline" else "went idle"
                raise RelayTimeoutError(
                    f"the Claude Code run {what} ({limit:g} s); its processes were killed",
                    kind=kind,
                    limit_s=limit,
                    session_id=self.session_id,
                ) from None
            except sdk.ClaudeSDKError as exc:
                await self._end(kill=True)
                raise self._failure(f"Claude Code failed: {exc}", exc) from exc
            if isinstance(message, sdk.ResultMessage):
                result = self._result(message, texts)
                yield result
                await self._record(result, message)
                if message.is_error and not self._interrupted and message.subtype != "error_max_turns":
                    await self._end(kill=False)
                    raise self._failure(f"Claude Code run failed: {result.answer or message.subtype}")
                return
            for event in self._translate(message):
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                yield event

    def _translate(self, message: Any) -> list[RelayEvent]:
        reported, events = translate(message, self.session_id)
        if isinstance(message, sdk.AssistantMessage) and message.error is not None:
            text = " ".join(b.text for b in message.content if isinstance(b, sdk.TextBlock))
            self._login = claude_login_error(message.error, text, session_id=self.session_id) or self._login
        self._note_session(reported)
        tick = self._meter.tick(message, self.session_id)
        return events if tick is None else [tick, *events]

    def _note_session(self, session_id: str) -> None:
        if session_id:
            self.session_id = session_id
            if session_id not in self._session_ids:
                self._session_ids.append(session_id)

    def _result(self, message: sdk.ResultMessage, texts: list[str]) -> SessionResult:
        self._note_session(message.session_id)
        self._meter.turn_ended()
        self.model = next(iter(message.model_usage or {}), "") or self.model
        return session_result(message, texts, self.session_id, self._costs, self._interrupted)

    async def _record(self, result: SessionResult, message: sdk.ResultMessage) -> None:
        if self.ledger is not None:
            model = self.settings.claude_model
            await record_result(self.ledger, result, message, model=model, run_id=self.run_id, stage=self.stage)

    def _failure(self, message: str, exc: BaseException | None = None) -> RelayError:
        tail = "\n".join(self._stderr)
        return run_failure(
            message,
            exc,
            login=self._login,
            resume=self.resume,
            stderr_tail=tail,
            session_id=self.session_id,
            redact=self.eywa.redactor,
        )

    async def _end(self, *, kill: bool, interrupt: bool = False) -> HandoffReady | None:
        """Stop the CLI (killing it when asked), sweep strays, ingest, emit HandoffReady. Runs once."""
        if self._closed:
            return self._ended
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            if interrupt:
                try:
                    async with asyncio.timeout(_INTERRUPT_GRACE_S):
                        await client.interrupt()
                except (sdk.ClaudeSDKError, TimeoutError):
                    kill = True  # it would not stop politely
            if kill:
                await _kill_all(self._pid, self.tag)
            try:
                await client.disconnect()
            except sdk.ClaudeSDKError as exc:
                logger.debug("disconnect after end: %s", exc)
        await _kill_all(self._pid, self.tag)  # whatever outlived the CLI (MCP servers, shells) is an orphan now
        config_dir = self.settings.claude_config_dir
        files = await asyncio.to_thread(session_files, config_dir, list(self._session_ids), list(self._rollouts))
        self._ended = await ingest_session(self.eywa, files, self.session_id, project_dir=self.project_dir)
        if self._ended is not None:
            await self.emit(self._ended)
        return self._ended
