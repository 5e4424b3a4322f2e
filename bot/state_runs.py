"""The queue of instructions and the runs, per lane: ``''`` is a chat's main checkout, else a branch.

A lane has at most one running run (a unique index, so no race slips past it) and its own queue; lanes of
one chat run side by side (bot.sessions).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from typing import Any, TypedDict, Unpack

import aiosqlite

from bot.errors import ChatBusyError
from bot.records import QueuedInstruction, QueueStatus, Run, RunStatus
from bot.state_base import StateBase, check_value

__all__ = ["QueueFields", "RunsState", "insert_queued"]

_QUEUE_COLS = (
    "id, chat_id, text, source, status, created_at, attachments, branch, profile, budget_usd, origin, project, user_id"
)
_RUN_COLS = "id, chat_id, instruction, session_id, project, status, started_at, finished_at, branch, cost_usd"


def _run(row: Sequence[Any]) -> Run:
    return Run(*row)


def _queued(row: Sequence[Any]) -> QueuedInstruction:
    paths = json.loads(row[6] or "[]")
    images = tuple(str(p) for p in paths) if isinstance(paths, list) else ()
    return QueuedInstruction(row[0], row[1], row[2], row[3], row[4], row[5], images, *row[7:13])


class QueueFields(TypedDict, total=False):
    """A queue row's optional columns, as keywords of :func:`insert_queued` and ``RunsState.enqueue``."""

    status: QueueStatus  # default "queued"
    branch: str
    profile: str
    budget_usd: float | None
    origin: str
    project: str
    user_id: int | None  # who sent it (per-user spend, bot.spend_caps)


async def insert_queued(
    conn: aiosqlite.Connection,
    chat_id: int,
    text: str,
    source: str,
    now: float,
    images: Sequence[str] = (),
    **fields: Unpack[QueueFields],
) -> int:
    """The queue row of an instruction, inside a write transaction the caller holds (a schedule's fire and a
    trigger's delivery are recorded in the same transaction, so each is queued exactly once)."""
    cur = await conn.execute(
        "INSERT INTO queue(chat_id, text, source, created_at, updated_at, attachments, status, branch, profile,"
        " budget_usd, origin, project, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            chat_id,
            text,
            source,
            now,
            now,
            json.dumps(list(images)),
            fields.get("status", "queued"),
            fields.get("branch", ""),
            fields.get("profile", ""),
            fields.get("budget_usd"),
            fields.get("origin", ""),
            fields.get("project", ""),
            fields.get("user_id"),
        ),
    )
    return int(cur.lastrowid or 0)


class RunsState(StateBase):
    # -- queue -----------------------------------------------------------------------------------------

    async def enqueue(
        self, chat_id: int, text: str, source: str, images: Sequence[str] = (), **fields: Unpack[QueueFields]
    ) -> int:
        """Store an instruction in the lane's queue: ``queued`` to wait its turn, ``running`` when it starts now
        (stored first all the same, so a process killed before its run is recorded runs it at the next start)."""
        check_value(fields.get("status", "queued"), QueueStatus, "queue status")
        now = self._clock()
        async with self._db.write() as conn:
            return await insert_queued(conn, chat_id, text, source, now, images, **fields)

    async def next_queued(self, chat_id: int, branch: str = "") -> QueuedInstruction | None:
        row = await self._one(
            f"SELECT {_QUEUE_COLS} FROM queue WHERE chat_id = ? AND branch = ? AND status = 'queued'"
            " ORDER BY id LIMIT 1",
            (chat_id, branch),
        )
        return _queued(row) if row else None

    async def queued(self, chat_id: int, branch: str | None = "") -> list[QueuedInstruction]:
        """What waits in the lane (every lane of the chat when ``branch`` is None), oldest first."""
        lane = "" if branch is None else " AND branch = ?"
        params = (chat_id,) if branch is None else (chat_id, branch)
        rows = await self._all(
            f"SELECT {_QUEUE_COLS} FROM queue WHERE chat_id = ?{lane} AND status = 'queued' ORDER BY id", params
        )
        return [_queued(r) for r in rows]

    async def mark_queued(self, queue_id: int, status: QueueStatus) -> None:
        check_value(status, QueueStatus, "queue status")
        await self._write(
            "UPDATE queue SET status = ?, updated_at = ?,"
            " text = CASE WHEN ? IN ('done', 'failed', 'cancelled') THEN redact_text(text) ELSE text END"
            " WHERE id = ?",
            (status, self._clock(), status, queue_id),
        )

    # -- runs ------------------------------------------------------------------------------------------

    async def start_run(
        self,
        chat_id: int,
        instruction: str,
        session_id: str = "",
        project: str = "",
        *,
        queue_id: int | None = None,
        branch: str = "",
        user_id: int | None = None,
    ) -> int:
        """Record a session run (``queue_id``: the queue row it runs); raises ChatBusyError if the lane already
        has one running."""
        try:
            async with self._db.write() as conn:
                cur = await conn.execute(
                    "INSERT INTO runs(chat_id, instruction, session_id, project, started_at, queue_id, branch, user_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (chat_id, instruction, session_id, project, self._clock(), queue_id, branch, user_id),
                )
                return int(cur.lastrowid or 0)
        except sqlite3.IntegrityError as exc:
            raise ChatBusyError(chat_id) from exc

    async def set_run_session(self, run_id: int, session_id: str) -> None:
        """The session id is known only once the CLI has started; store it so an interrupted run can resume."""
        await self._write("UPDATE runs SET session_id = ? WHERE id = ?", (session_id, run_id))

    async def finish_run(self, run_id: int, status: RunStatus, cost_usd: float = 0.0) -> None:
        """End a run, adding ``cost_usd`` (what it spent) to its cost."""
        check_value(status, RunStatus, "run status")
        await self._write(
            "UPDATE runs SET status = ?, finished_at = ?, cost_usd = cost_usd + ?,"
            " instruction = CASE WHEN ? = 'interrupted' THEN instruction ELSE redact_text(instruction) END"
            " WHERE id = ?",
            (status, self._clock(), max(0.0, cost_usd), status, run_id),
        )

    async def running(self, chat_id: int, branch: str = "") -> Run | None:
        row = await self._one(
            f"SELECT {_RUN_COLS} FROM runs WHERE chat_id = ? AND branch = ? AND status = 'running'", (chat_id, branch)
        )
        return _run(row) if row else None

    async def get_run(self, run_id: int) -> Run | None:
        row = await self._one(f"SELECT {_RUN_COLS} FROM runs WHERE id = ?", (run_id,))
        return _run(row) if row else None

    async def interrupted_runs(self) -> list[Run]:
        """At startup: runs (and queued instructions) a previous process left running, now marked interrupted,
        and any cut run whose restart card was never sent (:meth:`mark_reported`).

        Call once before handling updates. The returned runs keep their session id, so the bot can offer to
        resume; nothing is re-run here.
        """
        now = self._clock()
        async with self._db.write() as conn:
            # A queue row taken ("running") whose run was never recorded was cut before the model was asked
            # (or while it waited for a free slot): it goes back in the queue. (A lane whose running run has no
            # queue_id ran it on a version that did not record one: that row is its run's, reported below.)
            await conn.execute(
                "UPDATE queue SET status = 'queued', updated_at = ? WHERE status = 'running'"
                " AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.queue_id = queue.id)"
                " AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.chat_id = queue.chat_id"
                " AND runs.branch = queue.branch AND runs.status = 'running' AND runs.queue_id IS NULL)",
                (now,),
            )
            # One whose run ended (answered) before the process died: done.
            await conn.execute(
                "UPDATE queue SET status = 'done', updated_at = ?, text = redact_text(text) WHERE status = 'running'"
                " AND EXISTS (SELECT 1 FROM runs WHERE runs.queue_id = queue.id AND runs.status != 'running')",
                (now,),
            )
            async with conn.execute(
                f"UPDATE runs SET status = 'interrupted', finished_at = ? WHERE status = 'running' "
                f"RETURNING {_RUN_COLS}",
                (now,),
            ) as cur:
                rows = list(await cur.fetchall())
            await conn.execute(  # the run keeps the instruction a resume needs; this copy is done with
                "UPDATE queue SET status = 'interrupted', updated_at = ?, text = redact_text(text)"
                " WHERE status = 'running'",
                (now,),
            )
            for chat_id, branch in {(int(r[1]), str(r[8])) for r in rows}:
                await conn.execute(
                    "UPDATE queue SET status = 'held', updated_at = ?"
                    " WHERE chat_id = ? AND branch = ? AND status = 'queued'",
                    (now, chat_id, branch),
                )
        # With those cut by an earlier start that died before sending their cards (mark_reported).
        unreported = await self._all(
            f"SELECT {_RUN_COLS} FROM runs WHERE status = 'interrupted' AND reported_at IS NULL ORDER BY id"
        )
        return [_run(r) for r in unreported]

    async def mark_reported(self, run_id: int) -> None:
        """The cut run's restart card was sent: a later start does not send it again."""
        await self._write("UPDATE runs SET reported_at = ? WHERE id = ?", (self._clock(), run_id))

    async def lanes_with_queued(self) -> list[tuple[int, str]]:
        """(chat, branch) of lanes with instructions waiting (at startup: none has a run; they never started)."""
        rows = await self._all("SELECT DISTINCT chat_id, branch FROM queue WHERE status = 'queued' ORDER BY 1, 2")
        return [(int(r[0]), str(r[1])) for r in rows]

    async def held(self, chat_id: int, branch: str = "") -> list[QueuedInstruction]:
        """Instructions that were waiting when a previous process died: they wait for Resume or Dismiss."""
        rows = await self._all(
            f"SELECT {_QUEUE_COLS} FROM queue WHERE chat_id = ? AND branch = ? AND status = 'held' ORDER BY id",
            (chat_id, branch),
        )
        return [_queued(r) for r in rows]

    async def release_held(self, chat_id: int, status: QueueStatus, branch: str = "") -> int:
        """Resume puts held instructions back in the queue ("queued"); Dismiss cancels them."""
        check_value(status, QueueStatus, "queue status")
        return await self._write(
            "UPDATE queue SET status = ?, updated_at = ?,"
            " text = CASE WHEN ? = 'cancelled' THEN redact_text(text) ELSE text END"
            " WHERE chat_id = ? AND branch = ? AND status = 'held'",
            (status, self._clock(), status, chat_id, branch),
        )

    async def recent_runs(self, chat_id: int, limit: int = 10) -> list[Run]:
        rows = await self._all(
            f"SELECT {_RUN_COLS} FROM runs WHERE chat_id = ? ORDER BY id DESC LIMIT ?", (chat_id, limit)
        )
        return [_run(r) for r in rows]

    async def recent_sessions(self, chat_id: int, project: str, limit: int = 8) -> list[tuple[str, float, str]]:
        """(session id, when last used, its first instruction) of the chat's main-checkout sessions in
        ``project``, newest first (a branch's sessions belong to its worktree: /branches continues them)."""
        rows = await self._all(
            "SELECT session_id, max(coalesce(finished_at, started_at)) AS at, min(id) FROM runs"
            " WHERE chat_id = ? AND project = ? AND branch = '' AND session_id != ''"
            " GROUP BY session_id ORDER BY at DESC LIMIT ?",
            (chat_id, project, limit),
        )
        out: list[tuple[str, float, str]] = []
        for session_id, at, first in rows:
            found = await self._one("SELECT instruction FROM runs WHERE id = ?", (first,))
            out.append((str(session_id), float(at), str(found[0]) if found else ""))
        return out

    # -- spend (bot.spend_caps) ---------------------------------------------------------------------------

    async def spent_since(self, since: float, *, leave_out: Collection[int] = ()) -> dict[str, float]:
        """USD per project of the runs started at or after ``since`` (epoch seconds), but those in ``leave_out``
        (the runs in flight, whose spend the caller keeps)."""
        ids = tuple(leave_out)
        others = f" AND id NOT IN ({','.join('?' * len(ids))})" if ids else ""
        rows = await self._all(
            f"SELECT project, coalesce(sum(cost_usd), 0) FROM runs WHERE started_at >= ?{others} GROUP BY project",
            (since, *ids),
        )
        return {str(r[0]): float(r[1]) for r in rows}

    async def spent_by_schedule(self, since: float) -> list[tuple[str, str, int, float, float | None]]:
        """(origin ``schedule:<id>``, the schedule's instruction, runs, USD, the largest per-run cap they ran under)
        of the scheduled runs started at or after ``since``, the costliest first."""
        rows = await self._all(
            "SELECT q.origin, coalesce(max(s.text), ''), count(*), coalesce(sum(r.cost_usd), 0), max(q.budget_usd)"
            " FROM runs r JOIN queue q ON q.id = r.queue_id"
            " LEFT JOIN schedules s ON q.origin = 'schedule:' || s.id"
            " WHERE r.started_at >= ? AND q.origin LIKE 'schedule:%' GROUP BY q.origin ORDER BY 4 DESC, 1",
            (since,),
        )
        return [(str(r[0]), str(r[1]), int(r[2]), float(r[3]), None if r[4] is None else float(r[4])) for r in rows]

    async def branch_cost(self, chat_id: int, branch: str) -> float:
        row = await self._one(
            "SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE chat_id = ? AND branch = ?", (chat_id, branch)
        )
        return float(row[0]) if row else 0.0
