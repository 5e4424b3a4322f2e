"""A team room's durable state: roles the owner set, who decided what, messages due for deletion, spend per person.

Migration 9 (bot.migrations) holds the tables; bot.roles reads and writes them through :class:`TeamState`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from bot.state_base import StateBase

__all__ = ["Decision", "TeamState"]


@dataclass(frozen=True, slots=True)
class Decision:
    chat_id: int
    message_id: int | None
    action: str
    choice: str
    user_id: int
    name: str
    decided_at: float


class TeamState(StateBase):
    # -- roles -----------------------------------------------------------------------------------------

    async def set_role(self, subject: str, role: str, set_by: int) -> None:
        """The owner's /role: ``subject`` is a user id (digits) or ``@name``; role ``none`` takes a role away."""
        await self._write(
            "INSERT INTO roles(subject, role, set_by, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT(subject) DO UPDATE"
            " SET role = excluded.role, set_by = excluded.set_by, updated_at = excluded.updated_at",
            (subject, role, set_by, self._clock()),
        )

    async def roles(self) -> dict[str, str]:
        """Every role /role set (``none`` rows included: they override the configuration)."""
        return {str(r[0]): str(r[1]) for r in await self._all("SELECT subject, role FROM roles ORDER BY subject")}

    # -- decisions -------------------------------------------------------------------------------------

    async def record_decision(
        self, chat_id: int, message_id: int | None, action: str, choice: str, user_id: int, name: str
    ) -> None:
        await self._write(
            "INSERT INTO decisions(chat_id, message_id, action, choice, user_id, name, decided_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (chat_id, message_id, action, choice, user_id, name, self._clock()),
        )

    async def decisions(self, chat_id: int, limit: int = 50) -> list[Decision]:
        """The chat's recorded decisions, newest first."""
        rows = await self._all(
            "SELECT chat_id, message_id, action, choice, user_id, name, decided_at FROM decisions"
            " WHERE chat_id = ? ORDER BY id DESC LIMIT ?",
            (chat_id, limit),
        )
        return [Decision(*r) for r in rows]

    # -- timed deletions -------------------------------------------------------------------------------

    async def delete_later(self, chat_id: int, message_id: int, due_at: float) -> None:
        await self._write(
            "INSERT OR REPLACE INTO timed_deletions(chat_id, message_id, due_at) VALUES (?, ?, ?)",
            (chat_id, message_id, due_at),
        )

    async def due_deletions(self, now: float) -> list[tuple[int, int]]:
        rows = await self._all(
            "SELECT chat_id, message_id FROM timed_deletions WHERE due_at <= ? ORDER BY due_at", (now,)
        )
        return [(int(r[0]), int(r[1])) for r in rows]

    async def next_deletion(self) -> float | None:
        row = await self._one("SELECT min(due_at) FROM timed_deletions")
        return float(row[0]) if row is not None and row[0] is not None else None

    async def deleted(self, chat_id: int, message_id: int) -> None:
        await self._write("DELETE FROM timed_deletions WHERE chat_id = ? AND message_id = ?", (chat_id, message_id))

    # -- spend per person ------------------------------------------------------------------------------

    async def spent_by_user(self, since: float, *, leave_out: Collection[int] = ()) -> dict[int | None, float]:
        """USD per user who sent the instruction (None: runs from before it was recorded) of the runs started at
        or after ``since``, but those in ``leave_out`` (the runs in flight, whose spend the caller keeps)."""
        ids = tuple(leave_out)
        others = f" AND id NOT IN ({','.join('?' * len(ids))})" if ids else ""
        rows = await self._all(
            f"SELECT user_id, coalesce(sum(cost_usd), 0) FROM runs WHERE started_at >= ?{others} GROUP BY user_id",
            (since, *ids),
        )
        return {(None if r[0] is None else int(r[0])): float(r[1]) for r in rows}
