"""Handoff review, kept in memory itself: which handoffs wait for the owner's look, and the three answers.

A handoff is born ``review = 'pending'`` (a re-extraction keeps the state it had); an imported file, a
correction included, is ``'kept'``: the owner wrote or read it. The chat's buttons (bot/review.py) and the
web pages (service/web) both answer here, so a handoff kept in one is no longer waiting in the other:

- keep: ``review = 'kept'``;
- forget: :meth:`Eywa.forget` (the session, its subagents and their handoffs leave memory for good);
- correct: the correction is appended to the handoff's insights as "Correction from the owner (DATE, by
  WHO): …", ``source: correction``, and the handoff re-imported (so retrieval and the mirror see it), which
  keeps it.

Each answer takes ``by``, who decided (the page's login, the chat's "@alice"; "" when unknown), stored with
the decision: ``handoffs.reviewed_by`` / ``reviewed_at`` for keep and correct (a later keep of a handoff
already decided by someone changes nothing), ``forgotten.forgotten_by`` for forget. They live in the
database alone, never in the handoff file (frontmatter, mirror, export): the file is what the session said,
the review the owner's answer to it. A service's memory (memory.remote) has no field for it: its keep does
nothing here, its correction names who in the note alone, its forget records nobody.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from memory.errors import HandoffFormatError, MemoryStoreError, SessionNotFoundError
from memory.facade import Eywa
from memory.factory import Memory
from memory.handoffs.format import from_markdown, to_markdown
from memory.storage.rows import HANDOFF_COLS, HandoffRow, handoff_from_row

__all__ = [
    "PENDING",
    "Forgotten",
    "QueueState",
    "ReviewError",
    "correct",
    "correction_note",
    "count_pending",
    "forget",
    "forgotten",
    "keep",
    "pending",
    "queue_state",
]

PENDING = "pending"
KEPT = "kept"
MAX_CORRECTION = 4000  # characters: a correction is a note, not a second handoff
MAX_BY = 100  # characters of who decided (a Telegram name, a key id)


class ReviewError(MemoryStoreError):
    """A review answer that cannot be carried out (no such handoff, an unreadable one, an empty correction)."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"{session_id}: {reason}")
        self.session_id = session_id
        self.reason = reason


def _who(by: str) -> str:
    return " ".join(by.split())[:MAX_BY]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


async def keep(memory: Memory, session_id: str, *, by: str = "") -> bool:
    """Mark the handoff kept ``by`` whom; False when memory has no handoff of that id (forgotten meanwhile,
    say), or when memory is a service's (its review state is the server's own, kept on its pages). A handoff
    already kept or corrected by someone keeps its decider."""
    if not isinstance(memory, Eywa):
        return False
    fresh = "review = 'pending' OR reviewed_by = ''"  # the SET expressions read the row as it was
    sql = (
        f"UPDATE handoffs SET review = ?, reviewed_by = CASE WHEN {fresh} THEN ? ELSE reviewed_by END,"
        f" reviewed_at = CASE WHEN {fresh} THEN ? ELSE reviewed_at END WHERE session_id = ?"
    )
    async with memory.db.write() as conn:
        cur = await conn.execute(sql, (KEPT, _who(by), _now(), session_id))
        return bool(cur.rowcount)


async def forget(memory: Memory, session_id: str, *, by: str = "") -> list[str]:
    """:meth:`Memory.forget`, recording ``by`` whom where memory can (this process's own)."""
    if isinstance(memory, Eywa):
        return await memory.forget(session_id, by=_who(by))
    return await memory.forget(session_id)


@dataclass(frozen=True, slots=True)
class Forgotten:
    session_id: str
    at: str  # ISO 8601 UTC
    by: str  # '' when unknown


async def forgotten(eywa: Eywa, session_id: str) -> Forgotten | None:
    """When and by whom the session was forgotten; None when it was not."""
    sql = "SELECT at, forgotten_by FROM forgotten WHERE session_id = ?"
    row = await eywa.db.read(lambda conn: conn.execute(sql, (session_id,)).fetchone())
    return Forgotten(session_id, str(row[0]), str(row[1])) if row else None


def correction_note(text: str, when: datetime | None = None, by: str = "") -> str:
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%d")
    who = _who(by)
    return f"Correction from the owner ({stamp}{f', by {who}' if who else ''}): {' '.join(text.split())}"


async def correct(memory: Memory, session_id: str, text: str, *, scratch: Path, by: str = "") -> str:
    """Store ``text`` as the owner's correction of the handoff, made ``by`` whom; returns the note stored.

    ``scratch`` is a folder for the one-file import (the memory's own tmp, the bot's, a tenant's spool)."""
    words = " ".join(text.split())
    if not words:
        raise ReviewError(session_id, "the correction is empty")
    if len(words) > MAX_CORRECTION:
        raise ReviewError(session_id, f"the correction is longer than {MAX_CORRECTION} characters")
    row = (await memory.show(session_id)).handoff  # SessionNotFoundError when memory has neither
    if row is None:
        raise SessionNotFoundError(session_id)
    try:
        handoff = from_markdown(row.markdown)
    except HandoffFormatError as exc:
        raise ReviewError(session_id, f"the stored handoff is unreadable: {exc.reason}") from exc
    note = correction_note(words, by=by)
    corrected = replace(handoff, insights=[*handoff.insights, note], source="correction")
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        path = Path(folder) / "correction.md"
        await asyncio.to_thread(path.write_text, to_markdown(corrected), encoding="utf-8")
        report = await memory.import_dir(Path(folder))
    if report.imported != 1:
        why = report.rejected[0][1].replace(str(path), "the correction") if report.rejected else "not imported"
        raise ReviewError(session_id, f"the correction could not be stored: {why}")
    if isinstance(memory, Eywa):  # the import made it kept, by nobody known: this correction is the decision
        async with memory.db.write() as conn:
            await conn.execute(
                "UPDATE handoffs SET reviewed_by = ?, reviewed_at = ? WHERE session_id = ?",
                (_who(by), _now(), session_id),
            )
    return note


def _where(project: str | None) -> tuple[str, list[str]]:
    where = "review = 'pending' AND parent_id = ''"
    args: list[str] = []
    if project:
        where += " AND EXISTS (SELECT 1 FROM json_each(handoffs.projects) WHERE lower(value) = lower(?))"
        args.append(project)
    return where, args


async def pending(eywa: Eywa, *, limit: int = 20, offset: int = 0, project: str | None = None) -> list[HandoffRow]:
    """The handoffs waiting for review, newest first; subagents' and linked Codex rollouts' aside (they are
    read with their parent)."""
    where, args = _where(project)
    sql = f"SELECT {HANDOFF_COLS} FROM handoffs WHERE {where} ORDER BY ts DESC, session_id LIMIT ? OFFSET ?"
    rows = await eywa.db.read(lambda conn: conn.execute(sql, (*args, limit, offset)).fetchall())
    return [handoff_from_row(r) for r in rows]


async def count_pending(eywa: Eywa, *, project: str | None = None) -> int:
    where, args = _where(project)
    sql = f"SELECT count(*) FROM handoffs WHERE {where}"
    row = await eywa.db.read(lambda conn: conn.execute(sql, args).fetchone())
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True)
class QueueState:
    pending: int
    newest_ts: float  # of the newest handoff waiting (0 when none)
    newer: int  # waiting handoffs newer than ``after``


async def queue_state(eywa: Eywa, *, project: str | None = None, after: float = 0.0) -> QueueState:
    """The queue as ``pending`` counts it, in one read: how many wait, the newest's time, and how many are
    newer than ``after`` (what a live page has not shown yet)."""
    where, args = _where(project)
    sql = f"SELECT count(*), coalesce(max(ts), 0), coalesce(sum(ts > ?), 0) FROM handoffs WHERE {where}"
    row = await eywa.db.read(lambda conn: conn.execute(sql, (after, *args)).fetchone())
    return QueueState(int(row[0]), float(row[1]), int(row[2])) if row else QueueState(0, 0.0, 0)
