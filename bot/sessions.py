"""Claude Code sessions per lane: start, continue, queue follow-ups, end; the chat's commands on them are
bot.chat_controls, a restart's Resume is bot.restart.

A lane (bot.lanes) is a chat's main checkout or one of its branches, each branch working in its own git
worktree. Lanes run side by side, at most ``MACUPOS_MAX_PARALLEL`` at once (the rest wait in line, told
their place). A lane has at most one worker (a task running its instructions one after another) and at
most one live session (the CLI process, kept for ``session_idle_s`` after the last instruction so a
follow-up skips the start). Instructions that arrive while the worker runs are queued in BotState and go to
the same live session in order. A lane's session id is what its next instruction continues (resumed by id
after the live process ended), until ``/new``. When a live session ends its handoff is posted for review.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from telegram.error import TelegramError

from bot.approvals import Approvals
from bot.errors import BotError, ChatBusyError
from bot.lane_router import LaneRouter
from bot.lanes import LaneTag, Slots, branch_label, in_lane
from bot.login_notice import LoginNotices
from bot.memory_budget import BudgetNotice
from bot.profiles import ProfileGate
from bot.progress import Progress, escape
from bot.records import QueuedInstruction
from bot.review import Reviews
from bot.rpa_runner import RpaRunner, stage_line
from bot.services import Services
from bot.session_list import handoff_of, stand_in_line
from bot.settings import Project
from bot.speech_reply import SpokenReplies
from relay.approvals import ApprovalDecision, ApprovalHandler, ApprovalRequest
from relay.errors import LoginError, RelayError, SessionNotFoundError
from relay.events import (
    HandoffReady,
    LoginRefused,
    PermissionRequest,
    RelayEvent,
    StageEnd,
    StageStart,
    ToolStart,
)
from relay.relay_tools import build_relay_server
from relay.session import ClaudeSession
from relay.stages import stage_configs
from relay.user_message import load_images

__all__ = ["ChatSession", "SessionManager", "Task", "brief_title"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Task:
    text: str
    user_id: int
    source: str = "text"  # text | voice | attachment | resume | rpa
    queue_id: int | None = None
    images: tuple[str, ...] = ()  # paths of images (in the project's inbox) shown with the instruction
    profile: str = ""  # an unattended run's permission profile (bot.profiles); "" asks the owner
    budget_usd: float | None = None  # this run's spending cap (None: MACUPOS_RUN_BUDGET_USD)
    origin: str = ""  # "", "schedule:<id>", "trigger:<delivery>"

    @classmethod
    def of(cls, q: QueuedInstruction, user_id: int) -> Task:
        return cls(q.text, user_id, q.source, q.id, q.images, q.profile, q.budget_usd, q.origin)


@dataclass(slots=True)
class ChatSession:
    """One lane of a chat: its worker, its live session, what it runs now."""

    chat_id: int
    branch: str = ""  # "" the main checkout
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    live: ClaudeSession | None = None
    project: str = ""
    worker: asyncio.Task[None] | None = None
    idle: asyncio.Task[None] | None = None
    closing: asyncio.Task[None] | None = None
    progress: Progress | None = None
    user_id: int = 0
    source: str = ""  # the running instruction's Task.source
    instruction: str = ""
    started: float = 0.0
    stopping: bool = False
    run_id: int = 0  # the running instruction's row in bot.db
    queue_id: int | None = None  # the queue row of the instruction the worker has taken (set when taken)
    folder: Path | None = None  # where the live session works (a branch's worktree)
    thread_id: int | None = None  # the branch's forum topic
    asking: bool = False  # a tool approval waits for the owner
    answered: bool = False  # the running instruction's answer is out: the worker only does its bookkeeping
    gate: ProfileGate | None = None  # the running instruction's permission profile, when unattended
    last_status: str = ""  # how its last instruction ended

    @property
    def busy(self) -> bool:
        return self.worker is not None and not self.worker.done()

    @property
    def tag(self) -> LaneTag:
        return LaneTag(self.chat_id, self.branch, self.thread_id)


def brief_title(text: str) -> str:
    """An instruction in one line of at most 60 characters (a progress card's title, a /status line)."""
    one = " ".join(text.split())
    return one if len(one) <= 60 else one[:59] + "…"


class SessionManager:
    def __init__(
        self,
        services: Services,
        approvals: Approvals,
        reviews: Reviews,
        rpa: RpaRunner,
        *,
        spoken: SpokenReplies | None = None,
    ) -> None:
        self.services = services
        self.spoken = spoken  # the answer's voice note, after the text (bot.speech_reply)
        self.approvals = approvals
        self.reviews = reviews
        self.rpa = rpa
        self.shutting_down = False
        self.logins = LoginNotices(services.sender)
        self.budget = BudgetNotice(services)
        self.router = LaneRouter(services)
        self.slots = Slots(services.settings.max_parallel)
        # Told when a lane's instruction has ended (status, its cost): a Resolve session's end asks to merge
        # again (bot.branch_desk), a scheduled run's end is its schedule's last result (bot.schedules).
        self.after_run: list[Callable[[ChatSession, Task, str, float], Awaitable[None]]] = []
        self._chats: dict[tuple[int, str], ChatSession] = {}

    def chat(self, chat_id: int, branch: str = "") -> ChatSession:
        """A lane of the chat ("" its main checkout)."""
        c = self._chats.get((chat_id, branch))
        if c is None:
            c = self._chats[(chat_id, branch)] = ChatSession(chat_id, branch)
        return c

    @property
    def idle(self) -> bool:
        """No lane has a worker running (every instruction's bookkeeping done)."""
        return not any(c.busy for c in self._chats.values())

    def lanes(self, chat_id: int) -> list[ChatSession]:
        return [c for (chat, _), c in self._chats.items() if chat == chat_id]

    async def settled(self, c: ChatSession, timeout_s: float = 5.0) -> bool:
        """True when the lane runs nothing; a worker whose answer is already out is given ``timeout_s`` to
        finish its bookkeeping, so a command sent right after the answer is not told a session is running."""
        if c.busy and c.answered and c.worker is not None:
            await asyncio.wait({c.worker}, timeout=timeout_s)
        return not c.busy

    def forget_lane(self, chat_id: int, branch: str) -> None:
        """Drop a discarded branch's lane (not running, no live session)."""
        self._chats.pop((chat_id, branch), None)

    # -- instructions ------------------------------------------------------------------------------

    async def submit(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        source: str = "text",
        *,
        images: Sequence[str] = (),
        branch: str = "",
    ) -> None:
        """Run an instruction in a lane now, or queue it for the lane's live session when its worker is busy.

        ``images`` are paths of image files (in the project's inbox) that go to the model with it.
        """
        s = self.services
        c = self.chat(chat_id, branch)
        async with c.lock:
            if c.busy:
                await s.state.enqueue(chat_id, text, source, images, branch=branch)
                waiting = len(await s.state.queued(chat_id, branch))
                with in_lane(await self._tag(c)):
                    await s.sender.send(
                        chat_id,
                        f"📥 {branch_label(branch)}Queued ({waiting} waiting): it goes to the live session when "
                        "the current step ends.",
                        html_text=False,
                    )
                return
            if c.idle is not None:
                c.idle.cancel()  # a close already under way goes on (shielded); the next run waits for it
                c.idle = None
            c.stopping = False
            # Stored before the update counts as handled: killed before its run is recorded, the next start
            # finds it in the queue and runs it (bot.state.BotState.interrupted_runs).
            queue_id = c.queue_id = await s.state.enqueue(
                chat_id, text, source, images, status="running", branch=branch
            )
            task = Task(text, user_id, source, queue_id, tuple(images))
            c.worker = asyncio.create_task(self._drain(c, task), name=f"chat-{chat_id}-{branch}")

    async def run_queued(self, chat_id: int, user_id: int, branch: str = "") -> bool:
        """At startup: run what a previous process left waiting in a lane's queue (never started, no run cut
        in this lane), oldest first. False when nothing waits or the lane is busy (its worker takes them next)."""
        s = self.services
        c = self.chat(chat_id, branch)
        async with c.lock:
            queued = None if c.busy else await s.state.next_queued(chat_id, branch)
            if queued is None:
                return False
            await s.state.mark_queued(queued.id, "running")
            c.queue_id = queued.id
            task = Task.of(queued, user_id)
            c.stopping = False
            c.worker = asyncio.create_task(self._drain(c, task), name=f"chat-{chat_id}-{branch}")
        return True

    async def _tag(self, c: ChatSession) -> LaneTag:
        """The lane's tag, its forum topic looked up when it is a branch's."""
        if c.branch and c.thread_id is None:
            known = await self.services.state.branch(c.chat_id, c.branch)
            c.thread_id = known.thread_id if known is not None else None
        return c.tag

    async def _drain(self, c: ChatSession, task: Task) -> None:
        with in_lane(await self._tag(c)):
            await self._drain_lane(c, task)

    async def _drain_lane(self, c: ChatSession, task: Task) -> None:
        s = self.services
        current: Task | None = task
        while current is not None:
            async with self.slots.take(c.tag, lambda place: self._tell_place(c, place)):
                status, cost = await self._run_one(c, current)
            if current.queue_id is not None:
                await s.state.mark_queued(current.queue_id, "done")
            if not self.shutting_down:
                for after in self.after_run:
                    await after(c, current, status, cost)
            async with c.lock:
                queued = None if c.stopping else await s.state.next_queued(c.chat_id, c.branch)
                if queued is None:
                    c.worker = None
                    self._arm_idle(c)
                    return
                await s.state.mark_queued(queued.id, "running")
                c.queue_id = queued.id  # taken under the lock: a /stop from now on cancels this row
            current = Task.of(queued, c.user_id)

    async def _tell_place(self, c: ChatSession, place: int) -> None:
        n = self.slots.limit
        text = (
            f"⏳ {branch_label(c.branch)}Waiting for a free slot: {place} in line "
            f"({n} session{'s' if n != 1 else ''} at once, MACUPOS_MAX_PARALLEL)."
        )
        with contextlib.suppress(TelegramError):
            await self.services.sender.send(c.chat_id, text, html_text=False)

    async def _run_one(self, c: ChatSession, task: Task) -> tuple[str, float]:
        """Run one instruction in the lane: (its status, what it cost)."""
        s = self.services
        chat_id = c.chat_id
        c.user_id, c.source, c.instruction, c.started = task.user_id, task.source, task.text, time.monotonic()
        c.asking = c.answered = False
        try:
            where = await self.router.where(chat_id, c.branch)
        except (RelayError, BotError) as exc:
            with contextlib.suppress(TelegramError):
                await s.sender.send(chat_id, f"❌ {branch_label(c.branch)}{exc}", html_text=False)
            c.last_status = "failed"
            return "failed", 0.0
        project = where.project
        # An RPA run opens sessions of its own: it does not continue (or claim) the lane's session.
        session_id = "" if task.source == "rpa" else where.resume
        try:
            run_id = await s.state.start_run(
                chat_id, task.text, session_id, project.name, queue_id=task.queue_id, branch=c.branch
            )
            c.run_id = run_id
        except ChatBusyError:
            await s.sender.send(
                chat_id, "A run is still recorded as running in this chat; try /status.", html_text=False
            )
            return "failed", 0.0
        # An unattended run (a schedule, a trigger) answers its tool requests by its profile, in a session of its
        # own: nothing granted interactively ("allow for this session") carries into it.
        c.gate = ProfileGate(task.profile) if task.profile else None
        if task.profile and c.live is not None:
            await self.close_live(c)
        t = s.tuning
        title = "Research → Plan → Audit" if task.source == "rpa" else brief_title(task.text)
        title = branch_label(c.branch) + title
        progress = Progress(
            s.sender, chat_id, title, min_edit_interval_s=t.min_edit_interval_s, heartbeat_s=t.heartbeat_s
        )
        c.progress = progress
        try:
            await progress.start()
            if task.source == "rpa":
                status = await self._run_rpa(c, task, progress, where.folder)
            else:
                resume = "" if task.profile else where.resume
                status = await self._run_claude(c, task, project, where.folder, resume, run_id, progress)
        except asyncio.CancelledError:
            raise  # a shutdown or crash: the run stays "running" and the next start offers to resume it
        except LoginError as exc:
            logger.warning("run in chat %s: %s", chat_id, exc)
            name = "Claude Code" if exc.engine == "claude" else "Codex"
            with contextlib.suppress(TelegramError):
                await progress.finish("failed", f"{name} login refused")
            await self.logins.tell(chat_id, exc.engine, str(exc))
            status = "failed"
        except (RelayError, BotError) as exc:
            logger.warning("run in chat %s failed: %s", chat_id, exc)
            with contextlib.suppress(TelegramError):
                await progress.finish("failed", str(exc)[:300])
                await s.sender.send(chat_id, f"❌ {escape(branch_label(c.branch) + str(exc)[:3000])}")
            status = "failed"
        except TelegramError as exc:
            logger.warning("telegram failed during a run in chat %s: %s", chat_id, exc)
            status = "failed"
        except Exception:  # the chat's worker boundary: an unexpected error must not wedge the chat
            logger.exception("run in chat %s failed unexpectedly", chat_id)
            c.live = None
            with contextlib.suppress(TelegramError):
                await s.sender.send(chat_id, "❌ The run failed unexpectedly; details are in the bot's log.")
            status = "failed"
        finally:
            c.progress = None
            c.asking = False
        await s.tell_storage_fault(chat_id)  # once per chat: the run went on without a broken memory
        cost = progress.cost_usd or 0.0
        if self.shutting_down:
            return status, cost  # the run stays "running": the next start reports it and offers to resume
        c.last_status = status
        await s.state.finish_run(run_id, status, cost)  # type: ignore[arg-type]
        if c.gate is not None and c.gate.denied:
            denied = "; ".join(str(d) for d in c.gate.denied[:10])
            with contextlib.suppress(TelegramError):
                await s.sender.send(
                    chat_id,
                    f"🔒 {branch_label(c.branch)}Denied by the run's permission profile ({c.gate.profile}): {denied}",
                    html_text=False,
                )
        return status, cost

    async def set_session(self, c: ChatSession, session_id: str | None) -> None:
        """What the lane's next instruction continues (None: a fresh session)."""
        state = self.services.state
        if c.branch:
            await state.set_branch_session(c.chat_id, c.branch, session_id or "")
        else:
            await state.set_session(c.chat_id, session_id)

    async def _run_claude(
        self,
        c: ChatSession,
        task: Task,
        project: Project,
        folder: Path,
        resume: str,
        run_id: int,
        progress: Progress,
        continued: tuple[str, str] | None = None,
    ) -> str:
        s = self.services
        images = await asyncio.to_thread(load_images, task.images)
        session = await self._session(c, project, folder, resume or None, continued)
        await s.state.set_run_session(run_id, session.session_id)
        await self.set_session(c, session.session_id)
        progress.update(stage="running")
        try:
            result = await session.send(task.text, images=images)
        except SessionNotFoundError as exc:
            c.live = None
            handoff = await handoff_of(s.eywa, exc.session_id)
            await s.sender.send(c.chat_id, stand_in_line(exc.session_id, handoff), html_text=False)
            await self.set_session(c, None)
            grounding = (exc.session_id, handoff.markdown) if handoff is not None else None
            return await self._run_claude(c, task, project, folder, "", run_id, progress, grounding)
        except RelayError:
            c.live = None  # the relay ends a session on an error, a refused login or a timeout
            raise
        self.logins.clear(c.chat_id, "claude")
        if self.shutting_down:
            return "interrupted"
        await self.set_session(c, result.session_id)
        status = "stopped" if result.subtype == "interrupted" else ("failed" if result.is_error else "done")
        model = session.model or s.relay.claude_model or "default model"
        footer = f"claude · {model} · session {result.session_id[:8]} · {result.duration_s:.1f} s"
        progress.add_usage(result.usage.tokens, result.usage.cost_usd)
        await progress.finish(status, footer)
        c.answered = True
        if result.answer.strip() or status == "done":
            answer = f"🌿 **{c.branch}**\n\n{result.answer}" if c.branch else result.answer
            await s.sender.send_markdown(c.chat_id, answer, document_threshold=s.tuning.document_threshold)
            if self.spoken is not None:  # in the background: the text answer is already out
                self.spoken.after_answer(c.chat_id, task.source, result.answer)
        return status

    async def _run_rpa(self, c: ChatSession, task: Task, progress: Progress, folder: Path) -> str:
        async def on_event(event: RelayEvent) -> None:
            await self._on_event(c, event)

        return await self.rpa.run(
            c.chat_id, task.text, progress, approve=self._approve(c), on_event=on_event, folder=folder
        )

    def _approve(self, c: ChatSession) -> ApprovalHandler:
        """The lane's approval handler: an unattended run's profile answers at once; otherwise the owner is
        asked, the prompt carrying the lane's branch and going to its topic."""
        decide = self.approvals.handler(c.chat_id, lambda: c.user_id)

        async def in_its_lane(request: ApprovalRequest) -> ApprovalDecision:
            if c.gate is not None:
                return c.gate.decide(request)
            with in_lane(c.tag):
                return await decide(request)

        return in_its_lane

    async def _session(
        self,
        c: ChatSession,
        project: Project,
        folder: Path,
        resume: str | None,
        continued: tuple[str, str] | None = None,
    ) -> ClaudeSession:
        """The lane's live session, or a new one (resumed by id when the lane has a current session)."""
        if c.closing is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await c.closing
            c.closing = None
        if c.live is not None and c.project == project.name and c.folder == folder:
            return c.live
        if c.live is not None:
            await self.close_live(c)
        s = self.services

        async def on_event(event: RelayEvent) -> None:
            await self._on_event(c, event)

        session = await ClaudeSession.start(
            s.relay,
            project_dir=folder,
            eywa=s.eywa,
            facts_lines=await s.facts_lines(),
            resume=resume,
            approve=self._approve(c),
            on_event=on_event,
            ledger=s.ledger,
            project=project.name,
            continued=continued,
            branch=c.branch or None,
        )
        if s.codex is not None:
            session.add_mcp_server(
                "relay",
                build_relay_server(
                    s.codex,
                    cwd=folder,
                    stages=stage_configs(s.relay.codex_stages),
                    on_event=session.emit,
                    on_turn=session.on_codex_turn,
                    approve=self._approve(c),
                ),
            )
        c.live, c.project, c.folder = session, project.name, folder
        return session

    async def _on_event(self, c: ChatSession, event: RelayEvent) -> None:
        """Relay events of the lane's runs, normal and RPA: handoffs go to review, the rest to the progress."""
        with in_lane(c.tag):
            await self._on_lane_event(c, event)

    async def _on_lane_event(self, c: ChatSession, event: RelayEvent) -> None:
        progress = c.progress
        if isinstance(event, PermissionRequest):
            c.asking = True
        elif isinstance(event, ToolStart | StageEnd):
            c.asking = False
        if isinstance(event, HandoffReady):
            await self.reviews.post(c.chat_id, c.user_id, event.session_id, event.markdown)
            if event.budget_capped:
                await self.budget.tell(c.chat_id)
            return
        if isinstance(event, LoginRefused):  # a Codex call of the session: the model carries on without it
            await self.logins.tell(c.chat_id, event.engine, event.message)
            return
        if isinstance(event, StageEnd) and event.ok:
            self.logins.clear(c.chat_id, event.engine)
        if isinstance(event, StageEnd) and c.source == "rpa" and event.stage == "research" and event.thread_id:
            # The run's main Claude session: /sessions lists the run by it, even while memory is unavailable.
            await self.services.state.set_run_session(c.run_id, event.thread_id)
        if progress is None:
            return
        if isinstance(event, ToolStart):
            progress.update(tool=event.name)
        elif isinstance(event, PermissionRequest):
            progress.update(stage="waiting for your approval", tool=event.tool_name)
        elif isinstance(event, StageStart):
            progress.update(stage=f"{event.stage} ({event.engine})")
        elif isinstance(event, StageEnd):
            if c.source == "rpa":  # an RPA run shows a line per stage; a session's Codex turns only add usage
                progress.update(line=stage_line(event))
            progress.add_usage(event.usage.tokens, event.usage.cost_usd)

    # -- ending sessions ---------------------------------------------------------------------------

    def _arm_idle(self, c: ChatSession) -> None:
        if c.live is None:
            return
        delay = self.services.tuning.session_idle_s

        async def later() -> None:
            if delay > 0:
                await asyncio.sleep(delay)
            async with c.lock:
                if c.busy:
                    return
            await self.close_live(c)

        c.idle = asyncio.create_task(later(), name=f"idle-{c.chat_id}-{c.branch}")

    async def close_live(self, c: ChatSession) -> None:
        """End the live session: the relay ingests it and emits HandoffReady (posted for review)."""
        session, c.live = c.live, None
        if session is None:
            return

        async def close() -> None:
            try:
                await session.aclose()
            except RelayError as exc:
                logger.warning("closing the session of chat %s: %s", c.chat_id, exc)

        c.closing = asyncio.create_task(close(), name=f"close-{c.chat_id}-{c.branch}")
        await asyncio.shield(c.closing)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """Interrupt running turns, let workers wind down (their runs stay recorded as running, so the next
        start offers to resume them), cancel what does not within ``grace_s``, and end the live sessions."""
        self.shutting_down = True
        self.approvals.deny_all()
        chats = list(self._chats.values())
        for c in chats:
            c.stopping = True
            if c.idle is not None:
                c.idle.cancel()
            if c.busy and c.live is not None:
                await c.live.interrupt()
        workers = [c.worker for c in chats if c.worker is not None and not c.worker.done()]
        if workers:
            _, late = await asyncio.wait(workers, timeout=grace_s)
            for t in late:  # cancelling mid-write is the last resort (see the report on memory.db)
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for c in chats:
            c.worker = c.idle = None
            if c.closing is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await c.closing
            await self.close_live(c)
