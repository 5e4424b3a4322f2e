"""The SQLite database: opening, migrations, and serialised writes that several processes can share.

WAL lets readers run beside the one writer; ``BEGIN IMMEDIATE`` takes the write lock up front so two
writers never deadlock on a lock upgrade; the busy timeout plus a bounded retry keeps "database is
locked" from reaching callers while another process holds the lock for a moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import aiosqlite

from memory.errors import (
    DatabaseLockedError,
    ForeignDatabaseError,
    MemoryStoreError,
    NotADatabaseError,
    SchemaTooNewError,
)
from memory.migrations import MIGRATIONS

__all__ = ["SCHEMA_VERSION", "Database"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = len(MIGRATIONS)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_T = TypeVar("_T")


def _check_file(path: Path) -> None:
    if not path.exists():
        return
    if path.is_dir():
        raise NotADatabaseError(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if head and head != _SQLITE_MAGIC:
        raise NotADatabaseError(path)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


class Database:
    """One aiosqlite connection plus the write discipline, and a read connection for whole queries
    (:meth:`read`). Open with :meth:`open`, close with :meth:`close`."""

    def __init__(
        self, path: Path, conn: aiosqlite.Connection, busy_timeout_ms: int, migrations: Sequence[str] = MIGRATIONS
    ) -> None:
        self.path = path
        self._migrations = tuple(migrations)
        self.conn = conn
        self._busy_timeout_s = busy_timeout_ms / 1000
        # A reader waits only while another process recovers the WAL (moments): never block the caller long.
        self._read_timeout_s = min(self._busy_timeout_s, 2.0)
        self._write_lock = asyncio.Lock()
        self._read_conn: sqlite3.Connection | None = None

    @classmethod
    async def open(
        cls, path: Path, *, busy_timeout_ms: int = 30_000, migrations: Sequence[str] = MIGRATIONS
    ) -> Database:
        """Open (creating if needed) and migrate. Other packages pass their own `migrations` for their own file."""
        _check_file(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemoryStoreError(f"cannot create {path.parent}: {exc.strerror or exc}") from exc
        try:
            conn = await aiosqlite.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"cannot open {path}: {exc}") from exc
        db = cls(path, conn, busy_timeout_ms, migrations)
        try:
            await db._refuse_foreign()  # before _configure: not even the journal mode of another's file changes
            await db._configure()
            await db._migrate()
        except sqlite3.DatabaseError as exc:
            await conn.close()
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise NotADatabaseError(path) from exc
            raise MemoryStoreError(f"cannot open {path}: {exc}") from exc
        except BaseException:
            await conn.close()
            raise
        return db

    async def close(self) -> None:
        try:
            if self._read_conn is not None:
                self._read_conn.close()
                self._read_conn = None
        finally:
            await self.conn.close()

    async def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` with the read connection inside one read transaction (one snapshot), on this thread.

        Retrieval makes a dozen small statements per query. Through aiosqlite each would be a thread hop,
        and even one hop per query costs 0.1–0.5 ms here (waking a sleeping thread), more than a whole
        selective query; the reads are short and bounded (retrieval caps its words, rows and rounds), so
        they run on the caller's thread, on their own ``query_only`` connection. WAL lets it read beside
        the writer (it sees what is committed) and a reader is never kept waiting by one. ``fn`` must only
        read and should be quick.
        """
        conn = self._read_conn
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path, timeout=self._read_timeout_s, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA query_only = ON")
                # Index pages are read at random: map the file rather than copy each page through read().
                conn.execute("PRAGMA mmap_size = 268435456")
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"cannot open {self.path}: {exc}") from exc
            self._read_conn = conn
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("COMMIT")

    async def _configure(self) -> None:
        conn = self.conn
        await conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        await self._retrying("PRAGMA journal_mode = WAL")
        # NORMAL is durable in WAL mode except for the last commits on power loss, never corrupting.
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute("PRAGMA foreign_keys = ON")
        await conn.execute("PRAGMA temp_store = MEMORY")

    async def _refuse_foreign(self) -> None:
        """An SQLite file with tables but no schema version is another program's: never add ours to it."""
        if await self.schema_version() == 0:
            async with self.conn.execute("SELECT count(*) FROM sqlite_master") as cur:
                row = await cur.fetchone()
            if row and row[0]:
                raise ForeignDatabaseError(self.path)

    async def schema_version(self) -> int:
        async with self.conn.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def _migrate(self) -> None:
        target = len(self._migrations)
        found = await self.schema_version()
        if found > target:
            raise SchemaTooNewError(self.path, found, target)
        if found == target:
            return
        async with self.write() as conn:
            # Re-read under the write lock: another process may have migrated meanwhile.
            async with conn.execute("PRAGMA user_version") as cur:
                row = await cur.fetchone()
            current = int(row[0]) if row else 0
            for version in range(current, target):
                logger.info("migrating %s to schema %d", self.path, version + 1)
                for statement in _split_sql(self._migrations[version]):
                    await conn.execute(statement)
                await conn.execute(f"PRAGMA user_version = {version + 1}")

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction (BEGIN IMMEDIATE), committed on success and rolled back on error."""
        async with self._write_lock:
            # The statements run on aiosqlite's thread and finish there even when the awaiting task is
            # cancelled, so BEGIN, COMMIT and ROLLBACK are shielded: a cancel can never leave a
            # transaction open that would make every later write fail.
            if self.conn.in_transaction:
                await asyncio.shield(self.conn.rollback())
            begin = asyncio.ensure_future(self._begin_immediate())
            try:
                await asyncio.shield(begin)
            except asyncio.CancelledError:
                with contextlib.suppress(sqlite3.Error, DatabaseLockedError):
                    await begin
                if self.conn.in_transaction:
                    await asyncio.shield(self.conn.rollback())
                raise
            try:
                yield self.conn
            except BaseException:
                await asyncio.shield(self.conn.rollback())
                raise
            else:
                await asyncio.shield(self._commit())

    async def _begin_immediate(self) -> None:
        await self._retrying("BEGIN IMMEDIATE")

    async def _retrying(self, sql: str) -> None:
        # sqlite's own busy handler already waited; this loop covers the cases it does not
        # (a WAL checkpoint or recovery in another process), bounded by the same timeout.
        started = time.monotonic()
        delay = 0.01
        while True:
            try:
                await self.conn.execute(sql)
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                waited = time.monotonic() - started
                if waited >= self._busy_timeout_s:
                    raise DatabaseLockedError(self.path, waited) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.25)

    async def _commit(self) -> None:
        started = time.monotonic()
        delay = 0.01
        while True:
            try:
                await self.conn.commit()
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                waited = time.monotonic() - started
                if waited >= self._busy_timeout_s:
                    await self.conn.rollback()
                    raise DatabaseLockedError(self.path, waited) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.25)


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements; sqlite3.complete_statement keeps triggers and strings intact."""
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if not buf and line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements
