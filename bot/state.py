"""What the bot must remember across a restart, in its own SQLite file ``$MACUPOS_HOME/bot.db``.

Exactly-once handling rests on two rules the callers follow: an update is claimed here (unique by
update id) before its offset is confirmed to Telegram, and a run or queued instruction left running by a
dead process is never re-run by itself: :meth:`BotState.interrupted_runs` marks it and hands it to the
bot, which asks the owner.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from bot.migrations import MIGRATIONS
from bot.records import (
    Callback,
    ChatState,
    HandoffReview,
    ReviewState,
    SpeechMode,
    StoredUpdate,
    UpdateStatus,
)
from bot.state_base import check_value, dumps
from bot.state_lanes import LanesState
from bot.state_runs import RunsState
from bot.state_schedules import SchedulesState
from bot.state_team import TeamState
from memory.redact import Redactor
from memory.storage import Database

__all__ = ["BotState"]


_check = check_value
_dumps = dumps


_UPDATE_COLS = "update_id, chat_id, user_id, kind, payload, status, received_at, handled_at"
_CHAT_COLS = (
    "chat_id, project, session_id, last_session_id, pending_transcript, pending_correction, last_branch, last_branch_at"
)
_CALLBACK_COLS = "token, chat_id, user_id, action, payload, expires_at, used_at"
_REVIEW_COLS = "session_id, chat_id, message_id, state, correction, updated_at"


def _update(row: Sequence[Any]) -> StoredUpdate:
    return StoredUpdate(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], row[6], row[7])


def _review(row: Sequence[Any]) -> HandoffReview:
    return HandoffReview(*row)


class BotState(RunsState, LanesState, SchedulesState, TeamState):
    """The bot's durable state. Open with :meth:`open`, close with :meth:`close`; every method is a coroutine.

    The queue and runs are :class:`bot.state_runs.RunsState`, branches and lanes :class:`bot.state_lanes.LanesState`.
    """

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        busy_timeout_ms: int = 30_000,
        clock: Callable[[], float] = time.time,
        redactor: Redactor | None = None,
    ) -> BotState:
        db = await Database.open(path, busy_timeout_ms=busy_timeout_ms, migrations=MIGRATIONS)
        # Instructions are kept whole while they may still run (a restart resumes them); once handled, the
        # copies here are redacted in the same statement that marks them so (redact_text / redact_json).
        r = redactor or Redactor(())
        await db.conn.create_function("redact_text", 1, r, deterministic=True)
        await db.conn.create_function(
            "redact_json", 1, lambda s: _dumps(r.redact_obj(json.loads(s))), deterministic=True
        )
        return cls(db, clock)

    async def close(self) -> None:
        await self._db.close()

    @property
    def path(self) -> Path:
        return self._db.path

    # -- updates ---------------------------------------------------------------------------------------

    async def claim_update(
        self, update_id: int, chat_id: int | None, user_id: int | None, kind: str, payload: Mapping[str, Any]
    ) -> bool:
        """Store an update; True only the first time its id is seen, so a redelivery is handled never again."""
        async with self._db.write() as conn:
            cur = await conn.execute(
                "INSERT OR IGNORE INTO updates(update_id, chat_id, user_id, kind, payload, received_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (update_id, chat_id, user_id, kind, _dumps(payload), self._clock()),
            )
            return cur.rowcount == 1

    async def mark_update(self, update_id: int, status: UpdateStatus) -> None:
        _check(status, UpdateStatus, "update status")
        handled = self._clock() if status in ("done", "failed", "interrupted") else None
        await self._write(
            "UPDATE updates SET status = ?, handled_at = ?,"
            " payload = CASE WHEN ? IS NULL THEN payload ELSE redact_json(payload) END WHERE update_id = ?",
            (status, handled, handled, update_id),
        )

    async def pending_updates(self) -> list[StoredUpdate]:
        """Updates a previous process stored but did not finish, oldest first.

        ``received`` ones were never started and are safe to handle now; ``handling`` ones were cut
        mid-way: their effects may have happened, so the bot reports them instead of handling them again.
        """
        rows = await self._all(
            f"SELECT {_UPDATE_COLS} FROM updates WHERE status IN ('received', 'handling') ORDER BY update_id"
        )
        return [_update(r) for r in rows]

    async def get_update(self, update_id: int) -> StoredUpdate | None:
        row = await self._one(f"SELECT {_UPDATE_COLS} FROM updates WHERE update_id = ?", (update_id,))
        return _update(row) if row else None

    async def last_update_id(self) -> int | None:
        row = await self._one("SELECT max(update_id) FROM updates")
        return int(row[0]) if row and row[0] is not None else None

    async def prune_updates(self, older_than_s: float = 7 * 86400) -> int:
        """Forget finished updates older than that. Telegram keeps updates 24 h and restarts ids at random after
        a quiet week, so an old id must not linger and swallow a new update that reuses it."""
        cutoff = self._clock() - older_than_s
        return await self._write(
            "DELETE FROM updates WHERE received_at < ? AND status NOT IN ('received', 'handling')", (cutoff,)
        )

    # -- chats -----------------------------------------------------------------------------------------

    async def chat(self, chat_id: int) -> ChatState:
        row = await self._one(f"SELECT {_CHAT_COLS} FROM chats WHERE chat_id = ?", (chat_id,))
        return ChatState(*row) if row else ChatState(chat_id)

    async def _set_chat(self, chat_id: int, assignments: str, params: Sequence[Any]) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO chats(chat_id, updated_at) VALUES (?, ?) ON CONFLICT(chat_id) DO NOTHING",
                (chat_id, self._clock()),
            )
            await conn.execute(
                f"UPDATE chats SET {assignments}, updated_at = ? WHERE chat_id = ?", (*params, self._clock(), chat_id)
            )

    async def set_project(self, chat_id: int, project: str) -> None:
        """Switch the chat's folder. The current session belongs to the old folder, so follow-ups start anew."""
        await self._set_chat(chat_id, "project = ?, session_id = ''", (project,))

    async def set_session(self, chat_id: int, session_id: str | None) -> None:
        """The session follow-ups continue; None (``/new``) clears it and keeps it as the last session."""
        if session_id:
            await self._set_chat(chat_id, "session_id = ?, last_session_id = ?", (session_id, session_id))
        else:
            await self._set_chat(chat_id, "session_id = ''", ())

    async def set_pending_transcript(self, chat_id: int, text: str) -> None:
        await self._set_chat(chat_id, "pending_transcript = ?", (text,))

    async def set_pending_correction(self, chat_id: int, session_id: str) -> None:
        await self._set_chat(chat_id, "pending_correction = ?", (session_id,))

    # -- callbacks -------------------------------------------------------------------------------------

    async def new_callback(
        self,
        chat_id: int,
        user_id: int,
        action: str,
        payload: Mapping[str, Any],
        ttl_s: float,
        *,
        group: str | None = None,
    ) -> str:
        """A button token (22 url-safe characters, well under Telegram's 64-byte callback_data).

        Buttons given the same ``group`` (e.g. Allow / Deny of one request) are retired together on a press.
        """
        token = secrets.token_urlsafe(16)
        now = self._clock()
        await self._write(
            "INSERT INTO callbacks(token, grp, chat_id, user_id, action, payload, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (token, group or token, chat_id, user_id, action, _dumps(payload), now, now + ttl_s),
        )
        return token

    async def use_callback(self, token: str, user_id: int, now: float | None = None) -> Callback | None:
        """Spend a button once: None if the token is unknown, for another user, already used or expired."""
        at = self._clock() if now is None else now
        async with self._db.write() as conn:
            async with conn.execute(
                "UPDATE callbacks SET used_at = ? "
                "WHERE token = ? AND user_id = ? AND used_at IS NULL AND expires_at > ? "
                f"RETURNING {_CALLBACK_COLS}, grp",
                (at, token, user_id, at),
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                return None
            await conn.execute("UPDATE callbacks SET used_at = ? WHERE grp = ? AND used_at IS NULL", (at, row[7]))
        return Callback(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], row[6])

    async def peek_callback(self, token: str) -> Callback | None:
        """A button that may still be pressed, without spending it (a team room lets an approver press a card
        bound to the member whose instruction made it: bot.dispatch)."""
        row = await self._one(
            f"SELECT {_CALLBACK_COLS} FROM callbacks WHERE token = ? AND used_at IS NULL AND expires_at > ?",
            (token, self._clock()),
        )
        return Callback(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], row[6]) if row else None

    async def retire_callbacks(self, group: str) -> None:
        """Kill a prompt's buttons without a press (e.g. an approval that timed out)."""
        await self._write("UPDATE callbacks SET used_at = ? WHERE grp = ? AND used_at IS NULL", (self._clock(), group))

    async def prune_callbacks(self, older_than_s: float = 86400) -> int:
        cutoff = self._clock() - older_than_s
        return await self._write("DELETE FROM callbacks WHERE expires_at < ?", (cutoff,))

    # -- handoff reviews -------------------------------------------------------------------------------

    async def review(self, session_id: str, chat_id: int, message_id: int | None) -> HandoffReview:
        """Record a handoff posted for review (or re-posted: the message id moves, the state stays)."""
        now = self._clock()
        await self._write(
            "INSERT INTO handoff_reviews(session_id, chat_id, message_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "chat_id = excluded.chat_id, message_id = excluded.message_id, updated_at = excluded.updated_at",
            (session_id, chat_id, message_id, now, now),
        )
        found = await self.get_review(session_id)
        assert found is not None  # just written
        return found

    async def set_review(self, session_id: str, state: ReviewState, correction: str = "") -> HandoffReview | None:
        _check(state, ReviewState, "review state")
        await self._write(
            "UPDATE handoff_reviews SET state = ?, correction = ?, updated_at = ? WHERE session_id = ?",
            (state, correction, self._clock(), session_id),
        )
        return await self.get_review(session_id)

    async def get_review(self, session_id: str) -> HandoffReview | None:
        row = await self._one(f"SELECT {_REVIEW_COLS} FROM handoff_reviews WHERE session_id = ?", (session_id,))
        return _review(row) if row else None

    async def review_for_message(self, chat_id: int, message_id: int) -> HandoffReview | None:
        """The handoff a reply points at, so a reply to the posted handoff becomes its correction."""
        row = await self._one(
            f"SELECT {_REVIEW_COLS} FROM handoff_reviews WHERE chat_id = ? AND message_id = ?", (chat_id, message_id)
        )
        return _review(row) if row else None

    async def pending_reviews(self, chat_id: int) -> list[HandoffReview]:
        rows = await self._all(
            f"SELECT {_REVIEW_COLS} FROM handoff_reviews WHERE chat_id = ? AND state = 'pending' ORDER BY created_at",
            (chat_id,),
        )
        return [_review(r) for r in rows]

    # -- project memory ----------------------------------------------------------------------------------

    async def set_memory_off(self, project: str, off: bool) -> None:
        """``/memory off`` (True) or ``/memory on`` for a project, by its name."""
        await self._write(
            "INSERT INTO project_memory(project, private, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(project) DO UPDATE SET private = excluded.private, updated_at = excluded.updated_at",
            (project, int(off), self._clock()),
        )

    async def memory_off_projects(self) -> set[str]:
        """The names of the projects whose memory ``/memory off`` turned off."""
        return {str(r[0]) for r in await self._all("SELECT project FROM project_memory WHERE private = 1")}

    # -- spoken answers ----------------------------------------------------------------------------------

    async def set_speech(self, chat_id: int, mode: SpeechMode) -> None:
        """``/speak on|off|voice``: which of the chat's answers also come as a voice note."""
        _check(mode, SpeechMode, "speech mode")
        await self._write(
            "INSERT INTO chat_speech(chat_id, mode, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(chat_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at",
            (chat_id, mode, self._clock()),
        )

    async def speech(self, chat_id: int) -> SpeechMode:
        """The chat's speech mode; "voice" (answers to voice notes are spoken) until ``/speak`` changes it."""
        row = await self._one("SELECT mode FROM chat_speech WHERE chat_id = ?", (chat_id,))
        return cast(SpeechMode, str(row[0])) if row else "voice"

    # -- prompts -------------------------------------------------------------------------------------------

    async def open_callbacks(self, chat_id: int, user_id: int, action: str) -> list[Callback]:
        """The buttons of ``action`` that ``user_id`` can still press in the chat, newest first (for a spoken
        answer, which presses one of them)."""
        rows = await self._all(
            f"SELECT {_CALLBACK_COLS} FROM callbacks WHERE chat_id = ? AND user_id = ? AND action = ?"
            " AND used_at IS NULL AND expires_at > ? ORDER BY created_at DESC, rowid DESC",
            (chat_id, user_id, action, self._clock()),
        )
        return [Callback(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]
