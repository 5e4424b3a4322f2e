"""One instruction in a lane, start to end: its progress card, its Claude Code turn in the lane's live session
(or an RPA run), the relay events on the way, its spending caps, and its record in bot.db.

bot.sessions decides when a lane runs what (its worker, the queue, the slots, idle ends and shutdown); this
runs each instruction it hands over. The caps (bot.spend_caps) are checked before a run starts (the day's and
the project's) and at each relay event that adds spend: a run that reaches one is interrupted (an RPA run
ended by its event sink), marked "stopped", and the owner told once what it spent and how to raise the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from telegram.error import TelegramError

from bot.approvals import Approvals
from bot.chat_lane import ChatSession, Task, brief_title
from bot.errors import BotError, ChatBusyError
from bot.lane_events import LaneEvents
from bot.lane_router import LaneRouter
from bot.lanes import branch_label, in_lane
from bot.login_notice import LoginNotices
from bot.profiles import ProfileGate
from bot.progress import Progress, escape
from bot.review import Reviews
from bot.rpa_runner import RpaRunner
from bot.services import Services
from bot.session_list import handoff_of, stand_in_line
from bot.settings import Project
from bot.spend_caps import SpendBook, refusal_text, stop_text
from bot.voice.spoken_replies import SpokenReplies
from relay.approvals import ApprovalDecision, ApprovalHandler, ApprovalRequest
from relay.errors import LoginError, RelayError, SessionNotFoundError
from relay.events import RelayEvent
from relay.relay_tools import build_relay_server
from relay.session import ClaudeSession
from relay.stages import stage_configs
from relay.user_message import load_images

__all__ = ["LaneRunner"]

logger = logging.getLogger(__name__)


class LaneRunner:
    def __init__(
        self,
        services: Services,
        approvals: Approvals,
        reviews: Reviews,
        rpa: RpaRunner,
        router: LaneRouter,
        lanes: Callable[[], Iterable[ChatSession]],
        *,
        spoken: SpokenReplies | None = None,
    ) -> None:
        self.services = services
        self.approvals = approvals
        self.reviews = reviews
        self.rpa = rpa
        self.router = router
        self.spoken = spoken  # the answer's voice note, after the text (bot.voice.spoken_replies)
        self.logins = LoginNotices(services.sender)
        self.spend = SpendBook(services.state, services.settings)
        self.events = LaneEvents(services, reviews, self.logins, self.spend, lanes)
        self.shutting_down = False

    async def run(self, c: ChatSession, task: Task) -> tuple[str, float]:
        """Run one instruction in the lane: (its status, what it cost). "refused": a spending cap kept it from
        starting (the owner is told, with the instruction)."""
        s = self.services
        chat_id = c.chat_id
        c.user_id, c.source, c.instruction, c.started = task.user_id, task.source, task.text, time.monotonic()
        c.asking = c.answered = False
        try:
            where = await self.router.where(chat_id, c.branch, task.project)
        except (RelayError, BotError) as exc:
            with contextlib.suppress(TelegramError):
                await s.sender.send(chat_id, f"❌ {branch_label(c.branch)}{exc}", html_text=False)
            c.last_status = "failed"
            return "failed", 0.0
        project = where.project
        c.detached = where.detached
        refused = await self.spend.refusal(project.name, task.user_id)
        if refused is not None:
            with contextlib.suppress(TelegramError):
                await s.sender.send(chat_id, refusal_text(refused, task.text, branch_label(c.branch)), html_text=False)
            c.last_status = "refused"
            return "refused", 0.0
        # An RPA run opens sessions of its own: it does not continue (or claim) the lane's session.
        session_id = "" if task.source == "rpa" else where.resume
        try:
            run_id = await s.state.start_run(
                chat_id,
                task.text,
                session_id,
                project.name,
                queue_id=task.queue_id,
                branch=c.branch,
                user_id=task.user_id,
            )
            c.run_id = run_id
        except ChatBusyError:
            await s.sender.send(
                chat_id, "A run is still recorded as running in this chat; try /status.", html_text=False
            )
            return "failed", 0.0
        meter = c.meter = self.spend.open(run_id, project.name, task.budget_usd, task.origin, task.user_id)
        c.halting = None
        try:
            return await self._run_recorded(c, task, project, where.folder, where.resume, run_id)
        finally:
            if c.halting is not None:  # done before the lane's next turn can start: it must not be interrupted
                with contextlib.suppress(Exception):
                    await c.halting
                c.halting = None
            c.meter = None
            self.spend.close(meter, meter.spent)

    async def _run_recorded(
        self, c: ChatSession, task: Task, project: Project, folder: Path, resume: str, run_id: int
    ) -> tuple[str, float]:
        """The recorded run: its progress card, its turn (or RPA run), then its status and cost in bot.db."""
        s = self.services
        chat_id = c.chat_id
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
                status = await self._run_rpa(c, task, progress, folder)
            else:
                resume = "" if task.profile else resume
                status = await self._run_claude(c, task, project, folder, resume, run_id, progress)
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
        meter = c.meter
        # What the turns reported (Claude Code's cost, Codex's priced usage) and the estimate of a turn cut off
        # before it reported.
        cost = meter.spent if meter is not None else (progress.cost_usd or 0.0)
        if self.shutting_down:
            return status, cost  # the run stays "running": the next start reports it and offers to resume
        breach = meter.breach if meter is not None else None
        if breach is not None:
            status = "stopped"
        c.last_status = status
        await s.state.finish_run(run_id, status, cost)  # type: ignore[arg-type]
        if breach is not None:
            with contextlib.suppress(TelegramError):
                await s.sender.send(chat_id, stop_text(breach, cost, branch_label(c.branch)), html_text=False)
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
        if c.detached:
            return  # another project's session (a schedule's, a trigger's) is not what the chat continues
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
            await self.events.on_event(c, event)

        return await self.rpa.run(
            c.chat_id, task.text, progress, approve=self._approve(c), on_event=on_event, folder=folder
        )

    def _approve(self, c: ChatSession) -> ApprovalHandler:
        """The lane's approval handler: a run stopped by a spending cap is denied (once its turn is interrupted);
        an unattended run's profile answers at once; otherwise the owner is asked, the prompt carrying the
        lane's branch and going to its topic."""
        decide = self.approvals.handler(c.chat_id, lambda: c.user_id)

        async def in_its_lane(request: ApprovalRequest) -> ApprovalDecision:
            if c.meter is not None and c.meter.breach is not None:
                if c.halting is not None:
                    await asyncio.shield(c.halting)
                return ApprovalDecision.deny(f"The run reached a spending cap: {c.meter.breach.what}. Stop here.")
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
            await self.events.on_event(c, event)

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

    # -- ending sessions ---------------------------------------------------------------------------

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
