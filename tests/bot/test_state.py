"""BotState: the bot's durable state in a real SQLite file, across close and reopen (a restart)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.errors import ChatBusyError
from bot.migrations import MIGRATIONS
from bot.records import ChatState
from bot.state import BotState
from memory.errors import SchemaTooNewError


class Clock:
    """A settable clock, so expiry is tested without sleeping."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def state(tmp_path: Path, clock: Clock) -> AsyncIterator[BotState]:
    st = await BotState.open(tmp_path / "bot.db", clock=clock)
    try:
        yield st
    finally:
        await st.close()


async def test_open_creates_the_schema_in_wal_mode(tmp_path: Path) -> None:
    st = await BotState.open(tmp_path / "data" / "bot.db")
    await st.close()
    conn = sqlite3.connect(tmp_path / "data" / "bot.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    assert {"updates", "chats", "queue", "runs", "callbacks", "handoff_reviews"} <= tables


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(SchemaTooNewError):
        await BotState.open(path)


async def test_an_update_is_claimed_once_even_when_delivered_three_times(state: BotState) -> None:
    payload = {"update_id": 7, "message": {"text": "hi"}}
    claims = [await state.claim_update(7, 100, 42, "message", payload) for _ in range(3)]
    assert claims == [True, False, False]
    stored = await state.get_update(7)
    assert stored is not None
    assert (stored.chat_id, stored.user_id, stored.kind, stored.status) == (100, 42, "message", "received")
    assert stored.payload == payload


async def test_concurrent_claims_of_one_update_let_exactly_one_through(state: BotState) -> None:
    results = await asyncio.gather(*(state.claim_update(9, 1, 1, "message", {}) for _ in range(20)))
    assert sum(results) == 1


async def test_claims_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    first = await BotState.open(path)
    assert await first.claim_update(1, 100, 42, "message", {"n": 1})
    assert await first.claim_update(2, 100, 42, "message", {"n": 2})
    await first.mark_update(1, "handling")
    await first.close()  # the process dies here: 1 was cut mid-way, 2 never started

    second = await BotState.open(path)
    try:
        assert not await second.claim_update(1, 100, 42, "message", {"n": 1})  # Telegram redelivers
        pending = await second.pending_updates()
        assert [(u.update_id, u.status) for u in pending] == [(1, "handling"), (2, "received")]
        assert await second.last_update_id() == 2
        await second.mark_update(2, "done")
        await second.mark_update(1, "interrupted")
        assert await second.pending_updates() == []
        done = await second.get_update(2)
        assert done is not None and done.handled_at is not None
    finally:
        await second.close()


async def test_unknown_status_is_refused(state: BotState) -> None:
    with pytest.raises(ValueError, match="unknown update status"):
        await state.mark_update(1, "exploded")  # type: ignore[arg-type]


async def test_prune_forgets_only_old_finished_updates(state: BotState, clock: Clock) -> None:
    await state.claim_update(1, 1, 1, "message", {})
    await state.claim_update(2, 1, 1, "message", {})
    await state.mark_update(1, "done")
    clock.now += 8 * 86400
    await state.claim_update(3, 1, 1, "message", {})
    await state.mark_update(3, "done")
    assert await state.prune_updates(7 * 86400) == 1
    assert await state.get_update(1) is None
    assert await state.get_update(2) is not None  # never handled: kept
    assert await state.get_update(3) is not None  # recent


async def test_chat_defaults_then_project_and_session(state: BotState) -> None:
    assert await state.chat(5) == ChatState(5)
    await state.set_session(5, "s-1")
    chat = await state.chat(5)
    assert (chat.session_id, chat.last_session_id) == ("s-1", "s-1")
    await state.set_session(5, None)  # /new
    chat = await state.chat(5)
    assert (chat.session_id, chat.last_session_id) == ("", "s-1")
    await state.set_session(5, "s-2")
    await state.set_project(5, "web")  # a session belongs to its folder
    chat = await state.chat(5)
    assert (chat.project, chat.session_id, chat.last_session_id) == ("web", "", "s-2")
    await state.set_pending_transcript(5, "run the tests")
    await state.set_pending_correction(5, "s-2")
    chat = await state.chat(5)
    assert (chat.pending_transcript, chat.pending_correction) == ("run the tests", "s-2")
    assert await state.chat(6) == ChatState(6)


async def test_queue_is_fifo_per_chat(state: BotState) -> None:
    a = await state.enqueue(1, "first", "text")
    b = await state.enqueue(1, "second", "voice")
    await state.enqueue(2, "other chat", "text")
    nxt = await state.next_queued(1)
    assert nxt is not None and (nxt.id, nxt.text, nxt.source) == (a, "first", "text")
    await state.mark_queued(a, "running")
    nxt = await state.next_queued(1)
    assert nxt is not None and nxt.id == b
    assert [q.text for q in await state.queued(1)] == ["second"]
    await state.mark_queued(b, "cancelled")
    assert await state.next_queued(1) is None


async def test_one_running_session_per_chat(state: BotState) -> None:
    run = await state.start_run(1, "fix it", project="eywa")
    with pytest.raises(ChatBusyError):
        await state.start_run(1, "and this")
    other = await state.start_run(2, "elsewhere")
    await state.set_run_session(run, "sess-1")
    current = await state.running(1)
    assert current is not None and (current.id, current.session_id, current.project) == (run, "sess-1", "eywa")
    await state.finish_run(run, "done")
    assert await state.running(1) is None
    finished = await state.get_run(run)
    assert finished is not None and finished.status == "done" and finished.finished_at is not None
    assert await state.start_run(1, "next") > other


async def test_a_restart_mid_run_reports_it_and_reruns_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    first = await BotState.open(path)
    queued = await first.enqueue(1, "run the tests", "voice")
    await first.mark_queued(queued, "running")
    run = await first.start_run(1, "run the tests", "sess-9", "eywa")
    waiting = await first.enqueue(1, "then push", "text")
    await first.close()  # killed mid-session

    second = await BotState.open(path)
    try:
        interrupted = await second.interrupted_runs()
        assert [(r.id, r.instruction, r.session_id, r.status) for r in interrupted] == [
            (run, "run the tests", "sess-9", "interrupted")
        ]
        assert await second.running(1) is None
        # The cut instruction is not handed out again; the one that never started is held for Resume.
        assert await second.next_queued(1) is None
        assert [q.id for q in await second.held(1)] == [waiting]
        await second.release_held(1, "queued")
        nxt = await second.next_queued(1)
        assert nxt is not None and nxt.id == waiting
        # Until its card was sent (a start killed before it), the next start reports it again; then never.
        assert [r.id for r in await second.interrupted_runs()] == [run]
        await second.mark_reported(run)
        assert await second.interrupted_runs() == []
        resumed = await second.start_run(1, "resume", "sess-9")  # the owner said yes
        assert resumed != run
        await second.finish_run(run, "resumed")
        assert [r.status for r in await second.recent_runs(1)] == ["running", "resumed"]
    finally:
        await second.close()


async def test_a_callback_acts_once_for_its_user_before_expiry(state: BotState, clock: Clock) -> None:
    token = await state.new_callback(1, 42, "approve", {"request": "r1"}, ttl_s=60)
    assert len(token.encode()) <= 64
    assert await state.use_callback(token, 99) is None  # another user's tap
    used = await state.use_callback(token, 42)
    assert used is not None
    assert (used.chat_id, used.user_id, used.action, used.payload) == (1, 42, "approve", {"request": "r1"})
    assert used.used_at == clock.now
    assert await state.use_callback(token, 42) is None  # twice
    assert await state.use_callback("no-such-token", 42) is None


async def test_an_expired_callback_does_nothing(state: BotState, clock: Clock) -> None:
    token = await state.new_callback(1, 42, "approve", {}, ttl_s=60)
    assert await state.use_callback(token, 42, now=clock.now + 60) is None
    assert await state.use_callback(token, 42, now=clock.now + 59) is not None


async def test_pressing_one_button_retires_its_siblings(state: BotState) -> None:
    allow = await state.new_callback(1, 42, "allow", {}, 60, group="req-1")
    deny = await state.new_callback(1, 42, "deny", {}, 60, group="req-1")
    other = await state.new_callback(1, 42, "allow", {}, 60, group="req-2")
    assert await state.use_callback(allow, 42) is not None
    assert await state.use_callback(deny, 42) is None
    assert await state.use_callback(other, 42) is not None
    timed_out = await state.new_callback(1, 42, "allow", {}, 60, group="req-3")
    await state.retire_callbacks("req-3")
    assert await state.use_callback(timed_out, 42) is None


async def test_concurrent_taps_spend_a_button_once(state: BotState) -> None:
    token = await state.new_callback(1, 42, "allow", {}, 60)
    results = await asyncio.gather(*(state.use_callback(token, 42) for _ in range(10)))
    assert sum(r is not None for r in results) == 1


async def test_prune_callbacks(state: BotState, clock: Clock) -> None:
    await state.new_callback(1, 42, "allow", {}, 10)
    clock.now += 2 * 86400
    keep = await state.new_callback(1, 42, "allow", {}, 10)
    assert await state.prune_callbacks(86400) == 1
    assert await state.use_callback(keep, 42) is not None


async def test_handoff_review_lifecycle(state: BotState) -> None:
    review = await state.review("sess-1", 1, 501)
    assert (review.state, review.message_id, review.correction) == ("pending", 501, "")
    assert await state.review_for_message(1, 501) == review
    assert [r.session_id for r in await state.pending_reviews(1)] == ["sess-1"]
    corrected = await state.set_review("sess-1", "corrected", "the fix was in db.py, not api.py")
    assert corrected is not None and corrected.state == "corrected"
    assert corrected.correction == "the fix was in db.py, not api.py"
    assert await state.pending_reviews(1) == []
    reposted = await state.review("sess-1", 1, 777)  # posted again: new message, same verdict
    assert (reposted.message_id, reposted.state) == (777, "corrected")
    assert await state.review_for_message(1, 501) is None
    assert await state.set_review("unknown", "kept") is None
    with pytest.raises(ValueError, match="review state"):
        await state.set_review("sess-1", "lost")  # type: ignore[arg-type]


async def test_instructions_waiting_when_the_process_died_are_held_until_resume(state: BotState) -> None:
    await state.start_run(1, "fix it", project="eywa")
    await state.enqueue(1, "then push", "text")
    await state.enqueue(2, "another chat, nothing running", "text")
    [run] = await state.interrupted_runs()
    assert run.chat_id == 1
    assert [q.text for q in await state.held(1)] == ["then push"]
    assert await state.next_queued(1) is None  # a new instruction will not drain it unasked
    assert (await state.next_queued(2)) is not None  # a chat with no interrupted run is untouched
    assert await state.release_held(1, "queued") == 1
    nxt = await state.next_queued(1)
    assert nxt is not None and nxt.text == "then push"


async def test_a_secret_in_an_instruction_is_kept_only_while_it_may_still_run(tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm" * 4
    path = tmp_path / "bot.db"
    first = await BotState.open(path)
    queued = await first.enqueue(1, f"deploy with {key}", "text")
    await first.mark_queued(queued, "running")
    run = await first.start_run(1, f"deploy with {key}", "sess-1", "eywa")
    await first.close()  # killed mid-run

    second = await BotState.open(path)
    try:
        [cut] = await second.interrupted_runs()
        assert key in cut.instruction  # Resume needs it whole
        with sqlite3.connect(path) as conn:
            assert key not in conn.execute("SELECT text FROM queue WHERE id = ?", (queued,)).fetchone()[0]
        await second.finish_run(run, "dismissed")
        with sqlite3.connect(path) as conn:
            stored = conn.execute("SELECT instruction FROM runs WHERE id = ?", (run,)).fetchone()[0]
        assert key not in stored and "[REDACTED:" in stored
    finally:
        await second.close()


async def test_a_restart_tells_a_taken_queue_row_by_whether_its_run_was_recorded(
    state: BotState, tmp_path: Path
) -> None:
    never = await state.enqueue(1, "taken, killed before its run was recorded", "text")
    await state.mark_queued(never, "running")
    await state.enqueue(1, "waiting behind it", "text")
    ended = await state.enqueue(2, "ran and answered, killed before the queue row was closed", "text")
    await state.mark_queued(ended, "running")
    await state.finish_run(await state.start_run(2, "ran and answered", queue_id=ended), "done")
    cut = await state.enqueue(3, "cut mid-run", "text")
    await state.mark_queued(cut, "running")
    await state.start_run(3, "cut mid-run", queue_id=cut)
    await state.enqueue(3, "waiting behind the cut run", "text")

    [run] = await state.interrupted_runs()

    assert run.chat_id == 3
    assert [q.text for q in await state.queued(1)] == ["taken, killed before its run was recorded", "waiting behind it"]
    assert await state.queued(2) == [] and await state.next_queued(2) is None
    assert [q.text for q in await state.held(3)] == ["waiting behind the cut run"]
    assert await state.lanes_with_queued() == [(1, "")]  # what the bot runs at startup, oldest first
    statuses = [q.status for q in await state.queued(1)] + [q.status for q in await state.held(3)]
    assert statuses == ["queued", "queued", "held"]
    with sqlite3.connect(tmp_path / "bot.db") as conn:
        closed = dict(conn.execute("SELECT id, status FROM queue WHERE id IN (?, ?)", (ended, cut)).fetchall())
    assert closed == {ended: "done", cut: "interrupted"}


async def test_a_fire_read_before_a_pause_or_delete_queues_nothing(tmp_path: Path) -> None:
    state = await BotState.open(tmp_path / "bot.db")
    try:
        made = await state.add_schedule(
            1, 1, "every 1h since 2026-12-04T10:00:00+00:00", "x", "p", "", "tests", None, 10.0
        )
        due = (await state.due_schedules(20.0))[0]  # the scheduler read it due...
        await state.set_schedule_state(made.id, "paused", made.next_at)  # ...and the owner paused it meanwhile
        assert await state.fire_schedule(due, 10.0, 3610.0) is None
        assert (await state.schedule(made.id)).state == "paused"  # type: ignore[union-attr]
        assert await state.fire_schedule(due, 20.0, due.next_at, manual=True) is not None  # Run now still runs
        await state.set_schedule_state(made.id, "deleted", None)
        assert await state.fire_schedule(due, 30.0, due.next_at, manual=True) is None
        assert [q.text for q in await state.queued(1)] == ["x"]
    finally:
        await state.close()
