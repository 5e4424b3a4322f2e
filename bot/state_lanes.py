"""A chat's branches (their worktrees, sessions and forum topics) and which lane each bot message belongs to."""

from __future__ import annotations

from bot.records import Branch
from bot.state_base import StateBase

__all__ = ["LanesState"]

_BRANCH_COLS = "chat_id, branch, project, base, path, session_id, thread_id, created_at, updated_at"


class LanesState(StateBase):
    async def add_branch(self, chat_id: int, branch: str, project: str, base: str, path: str) -> Branch:
        """Record a branch of the chat (kept as it is when already recorded)."""
        now = self._clock()
        await self._write(
            "INSERT INTO branches(chat_id, branch, project, base, path, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(chat_id, branch) DO NOTHING",
            (chat_id, branch, project, base, path, now, now),
        )
        found = await self.branch(chat_id, branch)
        assert found is not None  # just written
        return found

    async def branch(self, chat_id: int, branch: str) -> Branch | None:
        row = await self._one(
            f"SELECT {_BRANCH_COLS} FROM branches WHERE chat_id = ? AND branch = ?", (chat_id, branch)
        )
        return Branch(*row) if row else None

    async def branches(self, chat_id: int) -> list[Branch]:
        rows = await self._all(f"SELECT {_BRANCH_COLS} FROM branches WHERE chat_id = ? ORDER BY created_at", (chat_id,))
        return [Branch(*r) for r in rows]

    async def branch_of_thread(self, chat_id: int, thread_id: int) -> Branch | None:
        row = await self._one(
            f"SELECT {_BRANCH_COLS} FROM branches WHERE chat_id = ? AND thread_id = ?", (chat_id, thread_id)
        )
        return Branch(*row) if row else None

    async def set_branch_session(self, chat_id: int, branch: str, session_id: str) -> None:
        await self._write(
            "UPDATE branches SET session_id = ?, updated_at = ? WHERE chat_id = ? AND branch = ?",
            (session_id, self._clock(), chat_id, branch),
        )

    async def set_branch_thread(self, chat_id: int, branch: str, thread_id: int) -> None:
        await self._write(
            "UPDATE branches SET thread_id = ?, updated_at = ? WHERE chat_id = ? AND branch = ?",
            (thread_id, self._clock(), chat_id, branch),
        )

    async def touch_branch(self, chat_id: int, branch: str) -> None:
        await self._write(
            "UPDATE branches SET updated_at = ? WHERE chat_id = ? AND branch = ?", (self._clock(), chat_id, branch)
        )

    async def remove_branch(self, chat_id: int, branch: str) -> None:
        async with self._db.write() as conn:
            await conn.execute("DELETE FROM branches WHERE chat_id = ? AND branch = ?", (chat_id, branch))
            await conn.execute("DELETE FROM lane_messages WHERE chat_id = ? AND branch = ?", (chat_id, branch))

    # -- which lane a message belongs to -----------------------------------------------------------------

    async def remember_message(self, chat_id: int, message_id: int, branch: str) -> None:
        await self._write(
            "INSERT INTO lane_messages(chat_id, message_id, branch, at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(chat_id, message_id) DO UPDATE SET branch = excluded.branch",
            (chat_id, message_id, branch, self._clock()),
        )

    async def lane_of_message(self, chat_id: int, message_id: int) -> str | None:
        """The lane a bot message belongs to ("" the main checkout), or None when it is not a session's."""
        row = await self._one(
            "SELECT branch FROM lane_messages WHERE chat_id = ? AND message_id = ?", (chat_id, message_id)
        )
        return str(row[0]) if row else None

    async def set_last_branch(self, chat_id: int, branch: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO chats(chat_id, updated_at) VALUES (?, ?) ON CONFLICT(chat_id) DO NOTHING",
                (chat_id, self._clock()),
            )
            await conn.execute(
                "UPDATE chats SET last_branch = ?, last_branch_at = ? WHERE chat_id = ?",
                (branch, self._clock(), chat_id),
            )

    async def prune_lane_messages(self, older_than_s: float = 30 * 86400) -> int:
        return await self._write("DELETE FROM lane_messages WHERE at < ?", (self._clock() - older_than_s,))
