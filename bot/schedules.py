"""The clock that runs schedules: each due fire is queued exactly once (bot.state_schedules) and started in its
lane like any instruction, under its permission profile and spending cap.

Missed fires (the bot was down): a schedule whose fire time passed while nothing ran fires **once** at the
next start, with a note naming the fire it stands for, however many fires were missed (the newest one due
is the one that runs; older ones are not run separately). Then it moves on to its next fire after now.

Time comes from ``clock`` (epoch seconds); :meth:`Scheduler.tick` does the work for one moment, so tests
drive it with their own clock; :meth:`Scheduler.run` is the loop the bot runs, waking at the next due fire
(or when a schedule changes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.schedule_spec import ScheduleSpecError, Spec, next_fire
from bot.services import Services
from bot.sessions import ChatSession, SessionManager, Task
from bot.state_schedules import Schedule

__all__ = ["LATE_S", "Scheduler", "local_time"]

logger = logging.getLogger(__name__)

LATE_S = 60.0  # a fire queued this long after its time is reported as missed
_MAX_WAIT_S = 300.0  # the loop looks at the table at least this often (a schedule made by another process)
_MAX_MISSED = 100_000  # bound on counting the missed fires of a very frequent schedule


def local_time(epoch: float, tz: ZoneInfo) -> str:
    """``Fri 4 Dec 18:30``, as bot.schedule_spec.describe writes a day."""
    moment = datetime.fromtimestamp(epoch, tz)
    return f"{moment:%a} {moment.day} {moment:%b %H:%M}"


class Scheduler:
    def __init__(self, services: Services, sessions: SessionManager, *, clock: Callable[[], float] = time.time) -> None:
        self.services = services
        self.sessions = sessions
        self.clock = clock
        self.tz = ZoneInfo(services.settings.memory.timezone)
        self._wake = asyncio.Event()
        sessions.after_run.append(self._after_run)

    def wake(self) -> None:
        """A schedule was made or changed: look again now."""
        self._wake.set()

    def next_after(self, spec: Spec, after: float) -> float | None:
        found = next_fire(spec, datetime.fromtimestamp(after, UTC), self.tz)
        return found.timestamp() if found is not None else None

    async def tick(self, now: float | None = None) -> list[int]:
        """Queue every fire due at ``now`` and start its lane; returns the queue rows made."""
        at = self.clock() if now is None else now
        made: list[int] = []
        for s in await self.services.state.due_schedules(at):
            queue_id = await self._fire(s, at)
            if queue_id is not None:
                made.append(queue_id)
        return made

    async def _fire(self, s: Schedule, now: float) -> int | None:
        assert s.next_at is not None  # due_schedules only returns those with a fire time
        try:
            spec = Spec.parse_canonical(s.spec)
        except (ScheduleSpecError, ValueError) as exc:  # written by a newer version, or by hand
            logger.warning("schedule %s has an unreadable spec %r: %s; paused", s.id, s.spec, exc)
            await self.services.state.set_schedule_state(s.id, "paused", None)
            return None
        fire, missed = s.next_at, 0
        following = self.next_after(spec, fire)
        while following is not None and following <= now:
            if missed >= _MAX_MISSED:  # a very frequent schedule, long down: skip the rest uncounted, still once
                fire, following = self._newest_due(spec, now) or fire, self.next_after(spec, now)
                break
            fire, missed = following, missed + 1
            following = self.next_after(spec, fire)
        if s.branch:
            await self._ensure_branch(s)
        queue_id = await self.services.state.fire_schedule(s, fire, following, missed=missed)
        if queue_id is None:
            return None
        if missed or now - fire > LATE_S:  # late, or standing for fires that did not run
            count = f"more than {missed}" if missed >= _MAX_MISSED else str(missed)
            more = f" ({count} earlier fire(s) missed too, not run separately)" if missed else ""
            await self._say(
                s,
                f"⏰ Schedule #{s.id} was due {local_time(fire, self.tz)} while the bot was down{more}; "
                f"running it once now: {s.text[:200]}",
            )
        await self.sessions.run_queued(s.chat_id, s.user_id, s.branch)
        return queue_id

    def _newest_due(self, spec: Spec, now: float) -> float | None:
        """The last fire at or before ``now`` within a day of it (a day holds at most 1440: fires are a minute
        apart at the least)."""
        newest, at = None, self.next_after(spec, now - 86400.0)
        while at is not None and at <= now:
            newest, at = at, self.next_after(spec, at)
        return newest

    async def _ensure_branch(self, s: Schedule) -> None:
        """A schedule's branch, discarded since it was made, is started anew from its project's checkout (as a
        trigger's is); when it cannot be, the run says why."""
        settings = self.services.settings
        project = settings.project(s.project) or settings.default_project
        found = await self.sessions.router.ensure_branch(s.chat_id, s.branch, project)
        if isinstance(found, str):
            logger.warning("schedule %s: branch %s: %s", s.id, s.branch, found)

    async def run_now(self, s: Schedule) -> int | None:
        """The owner's "Run now": one extra fire, the schedule's own times unchanged."""
        now = self.clock()
        if s.branch:
            await self._ensure_branch(s)
        queue_id = await self.services.state.fire_schedule(s, now, s.next_at, manual=True)
        if queue_id is not None:
            await self.sessions.run_queued(s.chat_id, s.user_id, s.branch)
        return queue_id

    async def run(self, stop: asyncio.Event) -> None:
        """Fire what is due until ``stop`` is set (the bot's loop)."""
        while not stop.is_set():
            self._wake.clear()  # before looking: a wake() during the look is kept for the wait below
            try:
                await self.tick()
            except Exception:  # the clock's loop boundary: one bad schedule must not stop the others
                logger.exception("the scheduler failed; trying again")
            due = await self.services.state.next_due_at()
            wait = _MAX_WAIT_S if due is None else min(_MAX_WAIT_S, max(0.0, due - self.clock()))
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()

    async def _after_run(self, c: ChatSession, task: Task, status: str, cost: float) -> None:
        if task.origin.startswith("schedule:"):
            with contextlib.suppress(ValueError):
                await self.services.state.schedule_result(int(task.origin.split(":", 1)[1]), status, cost)

    async def _say(self, s: Schedule, text: str) -> None:
        await self.services.sender.notice(s.chat_id, text, f"about schedule {s.id}")
