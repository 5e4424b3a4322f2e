"""The database layer: migrations, clear errors for wrong files, and several writer processes at once."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.errors import NotADatabaseError, SchemaTooNewError
from memory.storage.database import SCHEMA_VERSION, Database


@contextlib.asynccontextmanager
async def opened(path: Path) -> AsyncIterator[Database]:
    db = await Database.open(path)
    try:
        yield db
    finally:
        await db.close()


async def test_new_database_gets_current_schema_in_wal_mode(tmp_path: Path) -> None:
    async with opened(tmp_path / "m.db") as db:
        assert await db.schema_version() == SCHEMA_VERSION
        async with db.conn.execute("PRAGMA journal_mode") as cur:
            row = await cur.fetchone()
        assert row is not None and row[0] == "wal"


async def test_reopening_keeps_data_and_does_not_migrate_twice(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    async with db.write() as conn:
        await conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
    await db.close()
    async with opened(tmp_path / "m.db") as db, db.conn.execute("SELECT value FROM meta WHERE key = 'k'") as cur:
        assert await cur.fetchone() == ("v",)


async def test_reads_see_committed_writes_only_and_cannot_write(tmp_path: Path) -> None:
    def value(conn: sqlite3.Connection) -> object:
        row = conn.execute("SELECT value FROM meta WHERE key = 'k'").fetchone()
        return row[0] if row else None

    async with opened(tmp_path / "m.db") as db:
        assert await db.read(value) is None
        async with db.write() as conn:
            await conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
            assert await db.read(value) is None  # not committed yet: the read connection does not see it
        assert await db.read(value) == "v"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await db.read(lambda conn: conn.execute("DELETE FROM meta"))
        assert await db.read(value) == "v"  # and the failed read left no transaction open


async def test_write_rolls_back_on_error(tmp_path: Path) -> None:
    async with opened(tmp_path / "m.db") as db:
        with pytest.raises(RuntimeError):
            async with db.write() as conn:
                await conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
                raise RuntimeError("boom")
        async with db.conn.execute("SELECT count(*) FROM meta") as cur:
            assert await cur.fetchone() == (0,)


async def test_non_sqlite_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_text("these are my notes, not a database\n" * 10)
    with pytest.raises(NotADatabaseError, match="not a Macupos memory database"):
        await Database.open(path)
    assert path.read_text().startswith("these are my notes")


async def test_database_of_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    conn.close()
    with pytest.raises(SchemaTooNewError) as info:
        await Database.open(path)
    assert info.value.found == SCHEMA_VERSION + 7
    assert "upgrade Macupos" in str(info.value)


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memory.storage.database import Database

    async def main(path, name, n):
        db = await Database.open(Path(path), busy_timeout_ms=60_000)
        errors = 0
        try:
            for i in range(n):
                async with db.write() as conn:
                    await conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (f"{name}-{i}", "x" * 64))
        finally:
            await db.close()
        print("ok", name)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)

_READER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memory.storage.database import Database

    async def main(path, stop_at):
        db = await Database.open(Path(path), busy_timeout_ms=60_000)
        reads = 0
        try:
            while True:
                async with db.conn.execute("SELECT count(*) FROM meta") as cur:
                    (n,) = await cur.fetchone()
                reads += 1
                if n >= stop_at:
                    break
        finally:
            await db.close()
        print("reads", reads)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


async def test_three_writer_processes_and_a_reader_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    await (await Database.open(path)).close()  # create and migrate first, as the bot does at start
    n = 1000
    root = Path(__file__).resolve().parents[3]

    async def spawn(*args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=root
        )

    procs = [await spawn(_WRITER, str(path), f"w{i}", str(n)) for i in range(3)]
    procs.append(await spawn(_READER, str(path), str(3 * n)))
    outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), timeout=240)
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        assert b"locked" not in err
    async with opened(path) as db:
        async with db.conn.execute("SELECT count(*) FROM meta WHERE value = ?", ("x" * 64,)) as cur:
            assert await cur.fetchone() == (3 * n,)
        async with db.conn.execute("PRAGMA integrity_check") as cur:
            assert await cur.fetchone() == ("ok",)


async def test_a_cancel_while_the_write_lock_is_taken_leaves_no_open_transaction(tmp_path: Path) -> None:
    async with opened(tmp_path / "m.db") as db:
        for _ in range(20):  # cancel at different points of BEGIN / body / COMMIT

            async def writer() -> None:
                async with db.write() as conn:
                    await conn.execute("INSERT INTO meta(key, value) VALUES (hex(randomblob(8)), 'x')")

            task = asyncio.ensure_future(writer())
            await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        async with db.write() as conn:  # would raise "cannot start a transaction within a transaction"
            await conn.execute("INSERT INTO meta(key, value) VALUES ('after', 'ok')")
        assert not db.conn.in_transaction
