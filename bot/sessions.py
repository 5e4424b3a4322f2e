"""Claude Code sessions per lane: start, continue, queue follow-ups, end; the chat's commands on them are
bot.chat_controls, a restart's Resume is bot.restart.

A lane (bot.lanes) is a chat's main checkout or one of its branches, each branch working in its own git
worktree. Lanes run side by side, at most ``MACUPOS_MAX_PARALLEL`` at once (the rest wait in line, told
their place). A lane has at most one worker (a task running its instructions one after another) and at
most one live session (the CLI process, kept for ``session_idle_s`` after the last instruction so a
follow-up skips the start). Instructions that arrive while the worker runs are queued in BotState and go to
the same live session in order. A lane's session id is what its next instruction continues (resumed by id
after the live process ended), until ``/new``. When a live session ends its handoff is posted for review.

Each instruction itself (its progress, its turn or RPA run, its relay events and spending caps) is run by
bot.lane_runner; the lane and its Task are bot.chat_lane's, re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from telegram.error import TelegramError

from bot.approvals import Approvals
from bot.chat_lane import ChatSession, Task, brief_title
from bot.lane_router import LaneRouter
from bot.lane_runner import LaneRunner
from bot.lanes import LaneTag, Slots, branch_label, in_lane
from bot.review import Reviews
from bot.rpa_runner import RpaRunner
from bot.services import Services
from bot.spend_caps import SpendBook
from bot.voice.spoken_replies import SpokenReplies

__all__ = ["ChatSession", "SessionManager", "Task", "brief_title"]


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
        self.approvals = approvals
        self.router = LaneRouter(services)
        self.slots = Slots(services.settings.max_parallel)
        self.runner = LaneRunner(
            services, approvals, reviews, rpa, self.router, lambda: list(self._chats.values()), spoken=spoken
        )
        # Told when a lane's instruction has ended (status, its cost): a Resolve session's end asks to merge
        # again (bot.branch_desk), a scheduled run's end is its schedule's last result (bot.schedules).
        self.after_run: list[Callable[[ChatSession, Task, str, float], Awaitable[None]]] = []
        self._chats: dict[tuple[int, str], ChatSession] = {}

    @property
    def shutting_down(self) -> bool:
        return self.runner.shutting_down

    @property
    def spend(self) -> SpendBook:
        """Today's spend against the caps (/cost: bot.spend_caps.cost_lines)."""
        return self.runner.spend

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
                await s.state.enqueue(chat_id, text, source, images, branch=branch, user_id=user_id)
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
                chat_id, text, source, images, status="running", branch=branch, user_id=user_id
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
                if self.shutting_down:
                    return  # never started: its taken queue row (no run) goes back in the queue at the next start
                status, cost = await self.runner.run(c, current)
            if current.queue_id is not None:  # "failed" when a spending cap kept it from starting (owner told)
                await s.state.mark_queued(current.queue_id, "failed" if status == "refused" else "done")
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
        await self.runner.close_live(c)

    async def set_session(self, c: ChatSession, session_id: str | None) -> None:
        """What the lane's next instruction continues (None: a fresh session)."""
        await self.runner.set_session(c, session_id)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """Interrupt running turns, let workers wind down (their runs stay recorded as running, so the next
        start offers to resume them), cancel what does not within ``grace_s``, and end the live sessions."""
        self.runner.shutting_down = True
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
        await self.router.settle()
