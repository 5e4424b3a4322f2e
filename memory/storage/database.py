"""The SQLite database: opening, migrations, and serialised writes that several processes can share.

WAL lets readers run beside the one writer; ``BEGIN IMMEDIATE`` takes the write lock up front so two
writers never deadlock on a lock upgrade; the busy timeout plus a bounded retry keeps "database is
locked" from reaching callers while another process holds the lock for a moment.

Every statement, on either connection, turns a storage fault (damaged pages, a full disk, a read-only
file, an I/O error) into a typed :class:`~memory.errors.StorageError` naming this file and the way out,
so no caller ever sees a bare ``sqlite3.DatabaseError`` for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from memory.errors import (
    MEMORY_RECOVER_WAY_OUT,
    DatabaseLockedError,
    ForeignDatabaseError,
    MemoryStoreError,
    NotADatabaseError,
    SchemaTooNewError,
    StorageError,
    StorageIOError,
)
from memory.storage.faults import is_busy, is_readonly, os_fault, sqlite_fault
from memory.storage.migrations import MIGRATIONS, split_sql
from memory.storage.share import DatabaseInUseError, LoopLock, Registry

__all__ = ["SCHEMA_VERSION", "Database", "DatabaseInUseError"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = len(MIGRATIONS)
_T = TypeVar("_T")
_OPEN: Registry[Database] = Registry()  # every Database open in this process, by real path


def _corrupt_way_out(path: Path, migrations: Sequence[str]) -> str:
    """Only the memory database can be rebuilt from its mirror; another package's file is moved aside."""
    if tuple(migrations) == MIGRATIONS:
        return MEMORY_RECOVER_WAY_OUT
    return f"stop Macupos, move {path} aside (a fresh one is made on the next start), then start it again"


def _check_path(path: Path, way_out: str) -> None:
    """A folder where the file should be is no database. Only stat: what is *in* the file is SQLite's to
    read (``SQLITE_NOTADB``); any other descriptor of it would drop this process's locks when closed."""
    try:
        is_dir = path.is_dir()
    except OSError as exc:
        raise _os_fault(path, exc) from exc
    if is_dir:
        raise NotADatabaseError(path, None if way_out == MEMORY_RECOVER_WAY_OUT else way_out)


def _os_fault(path: Path, exc: OSError) -> StorageError:
    """An OS error on the database file; one no errno names (EACCES…) is an I/O error of that file."""
    return os_fault(exc, path) or StorageIOError(path, exc.strerror or str(exc))


class _Connection(aiosqlite.Connection):
    """aiosqlite's connection, with every call's storage fault turned into a typed StorageError.

    ``_execute`` is the one funnel every statement, fetch, commit and rollback of aiosqlite (its cursors
    too) goes through; overriding it types the faults of code that uses ``Database.conn`` directly.
    """

    def __init__(
        self, connector: Callable[[], sqlite3.Connection], fault: Callable[[sqlite3.Error], StorageError | None]
    ) -> None:
        super().__init__(connector, 64)  # 64: aiosqlite.connect's iteration chunk
        self.fault = fault

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await super()._execute(fn, *args, **kwargs)  # type: ignore[no-untyped-call]
        except sqlite3.Error as exc:
            fault = self.fault(exc)
            if fault is None:
                raise
            raise fault from exc


class Database:
    """One aiosqlite connection plus the write discipline, and read connections for whole queries
    (:meth:`read`). Open with :meth:`open`, close with :meth:`close`: every :meth:`open` of a file in this
    process returns the same object (memory.storage.share says why), so each opener closes it once."""

    def __init__(
        self, path: Path, conn: aiosqlite.Connection, busy_timeout_ms: int, migrations: Sequence[str] = MIGRATIONS
    ) -> None:
        self.path = path
        self._migrations = tuple(migrations)
        self._corrupt_way_out = _corrupt_way_out(path, migrations)
        self.conn = conn
        self._busy_timeout_s = busy_timeout_ms / 1000
        # A reader waits only while another process recovers the WAL (moments): never block the caller long.
        self._read_timeout_s = min(self._busy_timeout_s, 2.0)
        self._write_lock = LoopLock()  # shared by every thread's loop that holds this database
        self._read_conns: dict[int, sqlite3.Connection] = {}  # by thread: read() runs on the caller's
        self._side_conns: list[sqlite3.Connection] = []  # handed to a synchronous store (the facts engine)
        self._sync_conn: sqlite3.Connection | None = None  # write_sync's, used by one worker thread at a time
        self.last_fault: StorageError | None = None

    @classmethod
    async def open(
        cls, path: Path, *, busy_timeout_ms: int = 30_000, migrations: Sequence[str] = MIGRATIONS
    ) -> Database:
        """Open (creating if needed) and migrate, or hand out the one already open in this process. Other
        packages pass their own `migrations` for their own file.

        A storage fault raises its :class:`~memory.errors.StorageError`; so does any later statement.
        """

        def same(db: Database) -> None:
            if not isinstance(db, cls) or db._migrations != tuple(migrations):
                raise MemoryStoreError(f"{path} is already open in this process as another kind of database")

        return await _OPEN.acquire(path, lambda: cls._open_new(path, busy_timeout_ms, migrations), same)

    @staticmethod
    def is_open_here(path: Path) -> bool:
        """Whether this process holds ``path`` open (then no file call may move, copy or delete it)."""
        return _OPEN.is_open(path)

    @staticmethod
    def check_closed(path: Path, doing: str) -> None:
        """Raise :class:`DatabaseInUseError` when this process holds ``path`` open."""
        _OPEN.check_closed(path, doing)

    @classmethod
    async def _open_new(cls, path: Path, busy_timeout_ms: int, migrations: Sequence[str]) -> Database:
        _check_path(path, _corrupt_way_out(path, migrations))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_fault(path.parent, exc) from exc

        def connector() -> sqlite3.Connection:
            return sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)

        conn = _Connection(connector, lambda exc: sqlite_fault(path, exc))
        try:
            await conn
        except sqlite3.Error as exc:
            raise sqlite_fault(path, exc) or StorageIOError(path, str(exc)) from exc
        db = cls(path, conn, busy_timeout_ms, migrations)
        conn.fault = db.fault_of
        try:
            # The first statement reads the header: a file that is no database is SQLITE_NOTADB, typed by
            # fault_of. Before _configure: not even the journal mode of another's file changes.
            await db._refuse_foreign()
            await db._configure()
            await db._migrate()
        except BaseException:
            with contextlib.suppress(sqlite3.Error, StorageError):
                await db._close_all()
            raise
        return db

    def fault_of(self, exc: sqlite3.Error) -> StorageError | None:
        """The typed storage fault ``exc`` is for this file, or None when it is none; the last one is kept
        in :attr:`last_fault` (a long-running process tells its user once, then carries on without it)."""
        fault = sqlite_fault(self.path, exc, corrupt_way_out=self._corrupt_way_out)
        if fault is not None:
            self.last_fault = fault
        return fault

    async def close(self) -> None:
        """Drop this holder's share; the last holder's close closes every connection."""
        await _OPEN.release(self.path, self, self._close_all)

    async def _close_all(self) -> None:
        try:
            for extra in (*self._read_conns.values(), *self._side_conns, self._sync_conn):
                if extra is not None:
                    extra.close()
            self._read_conns.clear()
            self._side_conns.clear()
            self._sync_conn = None
        finally:
            await self.conn.close()

    def side_connection(self) -> sqlite3.Connection:
        """A plain sqlite3 connection to this file for a synchronous store that keeps its own transactions
        (the facts engine, on its one worker thread). This database owns it: it is closed by
        :meth:`release_side_connection` or, at the latest, with the database."""
        conn = self._plain_connection(self._busy_timeout_s)
        self._side_conns.append(conn)
        return conn

    def release_side_connection(self, conn: sqlite3.Connection) -> None:
        if conn in self._side_conns:
            self._side_conns.remove(conn)
            conn.close()

    async def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` with a read connection inside one read transaction (one snapshot), on this thread.

        Retrieval makes a dozen small statements per query. Through aiosqlite each would be a thread hop,
        and even one hop per query costs 0.1–0.5 ms here (waking a sleeping thread), more than a whole
        selective query; the reads are short and bounded (retrieval caps its words, rows and rounds), so
        they run on the caller's thread, on a ``query_only`` connection of that thread's own. WAL lets it
        read beside the writer (it sees what is committed) and a reader is never kept waiting by one.
        ``fn`` must only read and should be quick.
        """
        try:
            thread = threading.get_ident()
            conn = self._read_conns.get(thread)
            if conn is None:
                # Index pages are read at random: map the file rather than copy each page through read().
                conn = self._plain_connection(self._read_timeout_s, "query_only = ON", "mmap_size = 268435456")
                self._read_conns[thread] = conn
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            # A write on this query_only connection is the caller's mistake, not a read-only file.
            if is_readonly(exc):
                raise
            fault = self.fault_of(exc)
            if fault is None:
                raise
            raise fault from exc

    async def _configure(self) -> None:
        conn = self.conn
        await conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        await self._retrying(lambda: self.conn.execute("PRAGMA journal_mode = WAL"))
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
                for statement in split_sql(self._migrations[version]):
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
                with contextlib.suppress(sqlite3.Error, StorageError):
                    await begin
                if self.conn.in_transaction:
                    await asyncio.shield(self.conn.rollback())
                raise
            try:
                yield self.conn
            except BaseException:
                await self._rollback_quietly()
                raise
            else:
                await asyncio.shield(self._commit())

    async def _rollback_quietly(self) -> None:
        """Roll back after an error; a rollback that fails too (a vanished disk) must not hide the first error."""
        try:
            await asyncio.shield(self.conn.rollback())
        except (sqlite3.Error, StorageError) as exc:
            logger.warning("rollback on %s failed: %s", self.path, exc)

    async def write_sync(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` in one write transaction (BEGIN IMMEDIATE … COMMIT, rolled back if it raises) on a plain
        sqlite3 connection, in a worker thread.

        For bulk writers (``memory import``): through aiosqlite every statement is a thread hop, which costs
        more than a small statement; here a whole batch is one. The write lock serialises it with
        :meth:`write`. A cancelled caller still waits for the thread to commit or roll back.
        """
        async with self._write_lock:
            work = asyncio.ensure_future(asyncio.to_thread(self._write_in_thread, fn))
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                while not work.done():  # the connection is not let go while its thread still writes
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait({work})
                raise

    def _plain_connection(self, timeout_s: float, *pragmas: str) -> sqlite3.Connection:
        """A sqlite3 connection beside aiosqlite's (autocommit: each caller opens its own transactions)."""
        conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        try:
            for pragma in pragmas:
                conn.execute(f"PRAGMA {pragma}")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _write_in_thread(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            conn = self._sync_conn
            if conn is None:
                # The first three as _configure sets them on the main connection. A batch touches the same
                # index pages again and again: evicted mid-transaction, a page is written to the WAL once
                # more each time (with the default 2 MB cache, a 10,000-file import wrote 850 MB for a 56 MB
                # database; docs/benchmarks.md).
                pragmas = ("synchronous = NORMAL", "foreign_keys = ON", "temp_store = MEMORY", "cache_size = -65536")
                conn = self._plain_connection(self._busy_timeout_s, *pragmas)
                self._sync_conn = conn
            self._retrying_sync(conn, "BEGIN IMMEDIATE")
            try:
                out = fn(conn)
                self._retrying_sync(conn, "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as exc:  # must not hide the first error
                        logger.warning("rollback on %s failed: %s", self.path, exc)
                raise
            return out
        except sqlite3.Error as exc:
            fault = self.fault_of(exc)
            if fault is None:
                raise
            raise fault from exc

    def _retrying_sync(self, conn: sqlite3.Connection, sql: str) -> None:
        # As _retrying, on a worker thread: sqlite's busy handler waited already; this covers the rest.
        started, delay = time.monotonic(), 0.01
        while True:
            try:
                conn.execute(sql)
                return
            except sqlite3.OperationalError as exc:
                if self._gave_up(exc, started):
                    raise DatabaseLockedError(self.path, time.monotonic() - started) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def _begin_immediate(self) -> None:
        await self._retrying(lambda: self.conn.execute("BEGIN IMMEDIATE"))

    async def _commit(self) -> None:
        await self._retrying(self.conn.commit, give_up=self.conn.rollback)

    async def _retrying(
        self, op: Callable[[], Awaitable[object]], *, give_up: Callable[[], Awaitable[object]] | None = None
    ) -> None:
        """``op``, again while the database is busy. sqlite's own busy handler already waited; this covers
        the cases it does not (a WAL checkpoint or recovery in another process), bounded by the same timeout.
        Past it, ``give_up`` runs and DatabaseLockedError is raised."""
        started, delay = time.monotonic(), 0.01
        while True:
            try:
                await op()
                return
            except sqlite3.OperationalError as exc:
                if self._gave_up(exc, started):
                    if give_up is not None:
                        await give_up()
                    raise DatabaseLockedError(self.path, time.monotonic() - started) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _gave_up(self, exc: sqlite3.OperationalError, started: float) -> bool:
        """Whether to stop waiting on ``exc``: True past the busy timeout; ``exc`` is raised again when it is
        not the database being busy."""
        if not is_busy(exc):
            raise exc
        return time.monotonic() - started >= self._busy_timeout_s
