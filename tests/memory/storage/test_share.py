"""One Database per file per process: every opener shares it, on any thread's loop, and the process keeps
SQLite's lock on the file through every open and close (read from /proc/locks)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from memory.errors import NotADatabaseError
from memory.facade import Eywa
from memory.facts.api import FactsApi
from memory.settings import MemorySettings
from memory.storage.database import Database, DatabaseInUseError
from memory.storage.recover import _move_aside
from memory.storage.share import LoopLock, Registry
from tests.locks import holds_sqlite_lock


def _settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / ".no-claude", codex_home=home / ".no-codex")


def test_the_lock_probe_sees_a_stray_close_drop_sqlites_lock(tmp_path: Path) -> None:
    """What the bug was, as the kernel shows it: Python's open()/close() of the file drops SQLite's lock."""
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (a)")
        conn.execute("SELECT * FROM t").fetchall()
        assert holds_sqlite_lock(os.getpid(), path)
        path.open("rb").close()
        assert not holds_sqlite_lock(os.getpid(), path)
    finally:
        conn.close()


async def test_every_opener_in_a_process_shares_one_database_and_the_lock_stays(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    eywa = await Eywa.open(settings)
    pid = os.getpid()
    try:
        await eywa.stats()
        assert holds_sqlite_lock(pid, settings.db_path)
        facts = await FactsApi.from_settings(settings)
        assert facts.db is eywa.db  # the facts engine runs on memory's database, not a second opener
        await facts.run_script("remember ed user Fact predicate editor object Helix")
        assert holds_sqlite_lock(pid, settings.db_path)
        again = await Database.open(settings.db_path)
        assert again is eywa.db
        await again.close()  # one holder's close: the others keep the file open, and the lock
        await facts.close()
        assert holds_sqlite_lock(pid, settings.db_path)
        assert await eywa.db.read(lambda c: c.execute("SELECT count(*) FROM facts").fetchone()) == (1,)
    finally:
        await eywa.close()
    assert not Database.is_open_here(settings.db_path)
    fresh = await Database.open(settings.db_path)
    try:
        assert fresh is not eywa.db
    finally:
        await fresh.close()


async def test_a_worker_threads_loop_shares_the_database_and_its_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    db = await Database.open(path)
    async with db.write() as conn:
        await conn.execute("CREATE TABLE n (who TEXT, i INTEGER)")

    async def write(who: str, rounds: int) -> Database:
        mine = await Database.open(path)
        for i in range(rounds):
            async with mine.write() as conn:
                await conn.execute("INSERT INTO n VALUES (?, ?)", (who, i))
                await asyncio.sleep(0)  # hand the loop over inside the transaction: the lock must hold
        await mine.close()
        return mine

    try:
        worker = asyncio.to_thread(asyncio.run, write("worker", 50))
        seen, _ = await asyncio.gather(worker, write("main", 50))
        assert seen is db
        rows = await db.read(lambda c: c.execute("SELECT who, count(*) FROM n GROUP BY who ORDER BY who").fetchall())
        assert rows == [("main", 50), ("worker", 50)]
        assert holds_sqlite_lock(os.getpid(), path)
    finally:
        await db.close()


async def test_a_loop_lock_waiter_cancelled_before_or_after_the_hand_over_never_keeps_it() -> None:
    lock = LoopLock()
    await lock.acquire()
    waiting = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    lock.release()
    assert not lock.locked()

    await lock.acquire()
    handed = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    lock.release()  # ownership passes to `handed`, whose wake-up is still queued…
    handed.cancel()  # …when it is cancelled: it must pass the lock on
    with pytest.raises(asyncio.CancelledError):
        await handed
    await asyncio.sleep(0)
    assert not lock.locked()
    async with lock:
        assert lock.locked()
    assert not lock.locked()


async def test_a_file_that_is_no_database_is_told_by_sqlite_and_left_untouched(tmp_path: Path) -> None:
    for text in ("abc", "these are my notes, not a database\n" * 200):
        path = tmp_path / "notes.db"
        path.write_text(text)
        with pytest.raises(NotADatabaseError):
            await Database.open(path)
        assert path.read_text() == text
        assert not Database.is_open_here(path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]
    (tmp_path / "folder.db").mkdir()
    with pytest.raises(NotADatabaseError):
        await Database.open(tmp_path / "folder.db")


async def test_a_database_open_in_the_process_is_not_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    db = await Database.open(path)
    try:
        with pytest.raises(DatabaseInUseError, match="open in this process"):
            _move_aside(path)
        assert path.exists()
    finally:
        await db.close()
    moved = _move_aside(path)
    assert moved.exists() and not path.exists()


async def test_a_caller_cancelled_while_a_file_opens_leaves_the_other_openers_and_the_count_sound(
    tmp_path: Path,
) -> None:
    registry: Registry[object] = Registry()
    path, gate, made, closed = tmp_path / "m.db", asyncio.Event(), object(), []

    async def opener() -> object:
        await gate.wait()
        return made

    async def closer() -> None:
        closed.append(True)

    def same(db: object) -> None:
        return None

    first = asyncio.ensure_future(registry.acquire(path, opener, same))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(registry.acquire(path, opener, same))
    third = asyncio.ensure_future(registry.acquire(path, opener, same))
    await asyncio.sleep(0)
    second.cancel()  # a request's deadline, while the file is being opened for another
    gate.set()
    assert await first is made and await third is made
    with pytest.raises(asyncio.CancelledError):
        await second
    await registry.release(path, made, closer)
    assert registry.is_open(path) and closed == []  # the third still holds it
    await registry.release(path, made, closer)
    assert not registry.is_open(path) and closed == [True]
