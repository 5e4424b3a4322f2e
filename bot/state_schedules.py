"""Schedules, their fires and signed triggers' deliveries in bot.db: each fire or delivery is queued exactly once.

A fire is one transaction: its row (primary key: schedule and fire time), the queue row of its instruction
and the schedule's next fire time. A process killed before it commits fires nothing (the next start finds
the fire due); killed after, the queue row is there and runs once (bot.restart). A trigger's delivery id is
recorded in the transaction that queues its instruction, so a redelivery queues nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.state_base import StateBase
from bot.state_runs import insert_queued

__all__ = ["Schedule", "ScheduleState", "SchedulesState"]

ScheduleState = Literal["active", "paused", "done", "deleted"]
_COLS = (
    "id, chat_id, user_id, spec, text, project, branch, profile, budget_usd, state, next_at, last_at, last_result,"
    " last_cost, created_at"
)


@dataclass(frozen=True, slots=True)
class Schedule:
    id: int
    chat_id: int
    user_id: int
    spec: str  # canonical bot.schedule_spec.Spec text
    text: str
    project: str
    branch: str
    profile: str
    budget_usd: float | None
    state: ScheduleState
    next_at: float | None
    last_at: float | None
    last_result: str
    last_cost: float
    created_at: float

    @property
    def origin(self) -> str:
        return f"schedule:{self.id}"


def _schedule(row: Sequence[Any]) -> Schedule:
    return Schedule(*row)


class SchedulesState(StateBase):
    async def add_schedule(
        self,
        chat_id: int,
        user_id: int,
        spec: str,
        text: str,
        project: str,
        branch: str,
        profile: str,
        budget_usd: float | None,
        next_at: float | None,
    ) -> Schedule:
        now = self._clock()
        async with self._db.write() as conn:
            cur = await conn.execute(
                "INSERT INTO schedules(chat_id, user_id, spec, text, project, branch, profile, budget_usd, next_at,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (chat_id, user_id, spec, text, project, branch, profile, budget_usd, next_at, now, now),
            )
            new_id = int(cur.lastrowid or 0)
        found = await self.schedule(new_id)
        assert found is not None  # just written
        return found

    async def schedule(self, schedule_id: int) -> Schedule | None:
        row = await self._one(f"SELECT {_COLS} FROM schedules WHERE id = ?", (schedule_id,))
        return _schedule(row) if row else None

    async def schedules(self, chat_id: int) -> list[Schedule]:
        """The chat's schedules that are not deleted, oldest first."""
        rows = await self._all(
            f"SELECT {_COLS} FROM schedules WHERE chat_id = ? AND state != 'deleted' ORDER BY id", (chat_id,)
        )
        return [_schedule(r) for r in rows]

    async def due_schedules(self, now: float) -> list[Schedule]:
        rows = await self._all(
            f"SELECT {_COLS} FROM schedules WHERE state = 'active' AND next_at <= ? ORDER BY next_at, id", (now,)
        )
        return [_schedule(r) for r in rows]

    async def next_due_at(self) -> float | None:
        row = await self._one("SELECT min(next_at) FROM schedules WHERE state = 'active'")
        return float(row[0]) if row and row[0] is not None else None

    async def set_schedule_state(self, schedule_id: int, state: ScheduleState, next_at: float | None) -> None:
        await self._write(
            "UPDATE schedules SET state = ?, next_at = ?, updated_at = ? WHERE id = ?",
            (state, next_at, self._clock(), schedule_id),
        )

    async def fire_schedule(
        self,
        s: Schedule,
        fire_at: float,
        next_at: float | None,
        *,
        missed: int = 0,
        text: str | None = None,
        manual: bool = False,
    ) -> int | None:
        """Queue one fire of ``s`` (at ``fire_at``) and move it to ``next_at`` (None: none left, it is done).

        Returns the queue row, or None when this fire was queued already (a second process, a retry), or the
        schedule was paused, deleted or moved on since ``s`` was read. ``manual`` is the owner's "Run now" (pass
        ``next_at=s.next_at``): it fires a paused or done schedule too, never a deleted one.
        """
        now = self._clock()
        async with self._db.write() as conn:
            async with conn.execute(
                "SELECT 1 FROM schedule_fires WHERE schedule_id = ? AND fire_at = ?", (s.id, fire_at)
            ) as cur:
                if await cur.fetchone() is not None:
                    return None
            # The schedule as it is now, not as the caller read it: a Pause or Delete tapped meanwhile wins, and a
            # clock fire goes ahead only while its fire time is still the one the caller saw.
            async with conn.execute("SELECT state, next_at FROM schedules WHERE id = ?", (s.id,)) as cur:
                row = await cur.fetchone()
            if row is None or row[0] == "deleted" or (not manual and (row[0] != "active" or row[1] != s.next_at)):
                return None
            current: ScheduleState = row[0]
            queue_id = await insert_queued(
                conn,
                s.chat_id,
                text if text is not None else s.text,
                "schedule",
                now,
                branch=s.branch,
                profile=s.profile,
                budget_usd=s.budget_usd,
                origin=s.origin,
                project="" if s.branch else s.project,
                user_id=s.user_id,  # the schedule's maker: its spend is theirs
            )
            await conn.execute(
                "INSERT INTO schedule_fires(schedule_id, fire_at, queue_id, missed, created_at) VALUES (?, ?, ?, ?, ?)",
                (s.id, fire_at, queue_id, missed, now),
            )
            state = current if next_at is not None or current != "active" else "done"
            await conn.execute(
                "UPDATE schedules SET next_at = ?, state = ?, last_at = ?, last_result = '', last_cost = 0,"
                " updated_at = ? WHERE id = ?",  # this fire's result comes with its run (schedule_result)
                (next_at, state, fire_at, now, s.id),
            )
        return queue_id

    async def schedule_result(self, schedule_id: int, result: str, cost_usd: float) -> None:
        await self._write(
            "UPDATE schedules SET last_result = ?, last_cost = ?, updated_at = ? WHERE id = ?",
            (result, cost_usd, self._clock(), schedule_id),
        )

    async def schedule_fires(self, schedule_id: int) -> list[tuple[float, int, int]]:
        """(fire time, queue row, missed fires folded in) of a schedule, oldest first."""
        rows = await self._all(
            "SELECT fire_at, queue_id, missed FROM schedule_fires WHERE schedule_id = ? ORDER BY fire_at",
            (schedule_id,),
        )
        return [(float(r[0]), int(r[1]), int(r[2])) for r in rows]

    # -- signed triggers ---------------------------------------------------------------------------------

    async def delivery_seen(self, delivery_id: str) -> bool:
        row = await self._one("SELECT 1 FROM trigger_deliveries WHERE delivery_id = ?", (delivery_id,))
        return row is not None

    async def accept_delivery(
        self,
        delivery_id: str | None,
        origin: str,
        chat_id: int,
        text: str,
        *,
        branch: str,
        profile: str,
        budget_usd: float | None,
        project: str = "",
    ) -> int | None:
        """Queue a trigger's instruction (in ``project`` by name, when not the chat's); None when its delivery id
        was seen before (nothing is queued)."""
        now = self._clock()
        async with self._db.write() as conn:
            if delivery_id is not None:
                async with conn.execute(
                    "SELECT 1 FROM trigger_deliveries WHERE delivery_id = ?", (delivery_id,)
                ) as cur:
                    if await cur.fetchone() is not None:
                        return None
            queue_id = await insert_queued(
                conn,
                chat_id,
                text,
                "trigger",
                now,
                branch=branch,
                profile=profile,
                budget_usd=budget_usd,
                origin=f"trigger:{delivery_id or ''}",
                project=project,
            )
            if delivery_id is not None:
                await conn.execute(
                    "INSERT INTO trigger_deliveries(delivery_id, origin, queue_id, received_at) VALUES (?, ?, ?, ?)",
                    (delivery_id, origin, queue_id, now),
                )
        return queue_id

    async def prune_deliveries(self, older_than_s: float = 30 * 86400) -> int:
        return await self._write(
            "DELETE FROM trigger_deliveries WHERE received_at < ?", (self._clock() - older_than_s,)
        )
