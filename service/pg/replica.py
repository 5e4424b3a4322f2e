"""One tenant's memory as a local copy of its rows in PostgreSQL, kept in step through the tenant's change
sequence (docs/decisions.md, "Memory service on PostgreSQL").

The copy is an ordinary memory database (the embedded engine's file), so reads run the one retrieval code.
Every write runs in a *write section* (:meth:`Replica.gate`): the tenant's row in ``macupos.tenants`` is
locked (one writer per tenant in the whole fleet) and its sequence bumped; the copy catches up to the rows
other processes wrote; the write runs locally as in the embedded engine, its triggers noting each group of
rows it changed (memory/replica/rows.py); those groups are copied to PostgreSQL stamped with the new sequence,
and the transaction commits. Only then is the local change log cleared. A write whose section fails (the
database went away, the request was cancelled, the process was killed) leaves groups in the log that
PostgreSQL does not have: the next read or write puts PostgreSQL's rows back in their place first, so the
copy never keeps what the database did not commit.

Reads call :meth:`Replica.refresh`: one indexed statement finds the tenant's sequence, and a copy behind it
applies the groups changed since its cursor (and the groups that went) in one local transaction.

The facts event log lives in ``macupos.facts_events``: this copy's own events (its facts origin) go up with
the write that made them, other origins' come down into ``facts/events/<origin>.jsonl`` beside the copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from memory import replica as replicate
from memory.facts import load_origin
from memory.replica import MIRRORS, Key, Mirror, Row
from memory.storage import SCHEMA_VERSION, Database
from service.errors import ServiceUnavailable
from service.pg import events
from service.pg.link import PgLink, TenantTx, from_pg_text
from service.pg.rows import build_copy, decode_rows, read_queries, remove_db, run_batched, write_statements

__all__ = ["REBUILD_GAP", "Replica", "ReplicaStale"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
REBUILD_GAP = 2_000  # a copy this many writes behind when opened is built afresh rather than caught up
# The replicas whose write section the running task is in: a write inside one (Eywa.forget inside the
# upload route's section) joins it.
_INSIDE: ContextVar[frozenset[int]] = ContextVar("macupos_pg_sections", default=frozenset())


class ReplicaStale(ServiceUnavailable):
    """The tenant's rows in the database are no longer the ones this copy follows (replaced, or a database
    restored from an older backup): the copy is built afresh when the tenant is next opened."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the tenant's memory is being reloaded ({why}); try again", headers={"Retry-After": "1"})


# --- rows between the two stores --------------------------------------------------------------------------


@dataclass(slots=True)
class _Pulled:
    changes: dict[str, tuple[set[Key], list[Row]]]
    events: list[tuple[str, str]]  # (origin, line)


@dataclass(slots=True)
class _Collected:
    changes: dict[str, tuple[set[Key], list[Row]]]
    events: list[events.EventLine]
    offset: int


class Replica:
    """The local copy of ``tenant``'s memory in ``folder`` (memory.db, facts/, handoffs/)."""

    def __init__(
        self, link: PgLink, tenant: str, folder: Path, *, lock_wait_s: float, open_wait_s: float = 20.0
    ) -> None:
        self.link = link
        self.open_wait_s = open_wait_s  # a request waits this long for a copy being built, then comes back
        self.tenant = tenant
        self.folder = folder
        self.path = folder / "memory.db"
        self.facts_dir = folder / "facts"
        self.lock_wait_s = lock_wait_s
        self.lock = asyncio.Lock()  # this process's write sections and catch-ups of the copy, one at a time
        self._moved = asyncio.Condition()
        self.opened = False
        self.cursor = 0  # the tenant's sequence this copy holds
        self.events_cursor = 0
        self.events_offset = 0  # bytes of this copy's own event file that the database has
        self.generation = ""
        self.origin = ""
        self.dirty = False  # the copy may hold rows the database does not (a write section failed)
        self._conn: sqlite3.Connection | None = None
        self._opening: asyncio.Future[None] | None = None

    # -- the local file, on worker threads ------------------------------------------------------------

    def _sqlite(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA synchronous = NORMAL")
        return self._conn

    async def _local(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` on a worker thread; a cancelled caller still waits for it to end, so the
        connection is never used by two threads at once."""
        work = asyncio.ensure_future(asyncio.to_thread(fn, self._sqlite(), *args))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            while not work.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({work})
            raise

    @staticmethod
    def _in_write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return out

    def _read_state(self) -> dict[str, str] | None:
        if not self.path.exists():
            return None
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if int(version) != SCHEMA_VERSION:
                return None
            return replicate.get_state(conn)
        except sqlite3.Error:
            return None  # not a replica (or not readable): built afresh
        finally:
            conn.close()

    # -- open, close ----------------------------------------------------------------------------------

    async def open(self) -> None:
        """Make the copy ready: reuse the one on disk (putting back what a killed write left, catching up) or
        build it from the database. The work goes on when the caller gives up waiting (a request past its
        deadline): building a big tenant's copy can take longer than one request may, and the next request
        finds it done or joins it. Past ``open_wait_s`` the caller is told to come back (503)."""
        if self.opened:
            return
        failed = (
            self._opening is not None
            and self._opening.done()
            and (self._opening.cancelled() or self._opening.exception() is not None)
        )
        if self._opening is None or failed:
            self._opening = asyncio.ensure_future(self._open())
        try:
            await asyncio.wait_for(asyncio.shield(self._opening), self.open_wait_s)
        except TimeoutError:
            raise ServiceUnavailable(
                "the tenant's memory is being loaded from the database; try again in a few seconds",
                headers={"Retry-After": "5"},
            ) from None

    async def _open(self) -> None:
        async with self.lock:
            if self.opened:
                return
            await asyncio.to_thread(self.folder.mkdir, mode=0o700, parents=True, exist_ok=True)
            known = await self.link.tenant_state(self.tenant)
            if known is None:
                await self.link.ensure_tenant(self.tenant)
                known = await self.link.tenant_state(self.tenant)
            seq, generation = known or (0, "")
            state = await asyncio.to_thread(self._read_state)
            same = (
                state is not None
                and state.get("database_id") == self.link.database_id
                and state.get("tenant") == self.tenant
                and state.get("generation") == generation
                and int(state.get("cursor", "-1")) <= seq
                and seq - int(state.get("cursor", "0")) <= REBUILD_GAP
            )
            if state is not None and same:
                self.generation = generation
                self.cursor = int(state["cursor"])
                self.events_cursor = int(state.get("events_cursor", state["cursor"]))
                self.events_offset = int(state.get("events_offset", "0"))
                self.origin = await asyncio.to_thread(load_origin, self.facts_dir)
                await self._local(self._in_write, replicate.install_capture)
                self.dirty = True  # a process killed mid-write leaves groups to put back: checked now
                async with self.link.tenant_read(self.tenant) as tx:
                    await self._catch_up(tx, tx.seq)
            else:
                await self._build()
            self.opened = True

    async def _build(self) -> None:
        self._close_conn()
        logger.info("building the local copy of tenant %s", self.tenant)
        staged = self.folder / "building"
        await asyncio.to_thread(shutil.rmtree, staged, True)
        await asyncio.to_thread(staged.mkdir, mode=0o700, parents=True)
        built = await build_copy(self.link, self.tenant, staged / "memory.db", staged / "facts" / "events")

        def swap() -> None:
            Database.check_closed(self.path, "replace the local copy")  # only before a tenant opens it
            remove_db(self.path)
            for old in (self.facts_dir, self.folder / "handoffs"):
                shutil.rmtree(old, ignore_errors=True)
            os.replace(staged / "memory.db", self.path)
            os.replace(staged / "facts", self.facts_dir)
            shutil.rmtree(staged, ignore_errors=True)

        await asyncio.to_thread(swap)
        self.generation, self.cursor, self.events_cursor, self.events_offset = built.generation, built.seq, built.seq, 0
        self.origin = await asyncio.to_thread(load_origin, self.facts_dir)
        self.dirty = False

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        opening, self._opening = self._opening, None
        if opening is not None and not opening.done():
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError, ServiceUnavailable, sqlite3.Error, OSError):
                await opening
        async with self.lock:
            self._close_conn()
            self.opened = False

    # -- reads ----------------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Bring the copy up to the tenant's latest committed write (one indexed statement when it is).

        While a write section of this process holds the copy, the read waits only until that section has
        caught up past what the database had committed when the read began (it does that first), not for
        the write itself; it may then see that write's rows before they are committed."""
        if not self.opened or id(self) in _INSIDE.get():
            return
        known = await self.link.tenant_state(self.tenant)
        if known is None:
            raise ReplicaStale("the tenant is gone")
        seq, generation = known
        while True:
            busy = self.lock.locked()
            if generation == self.generation and self.cursor >= seq and (busy or not self.dirty):
                return
            if not busy:
                async with self.lock, self.link.tenant_read(self.tenant) as tx:
                    await self._catch_up(tx, tx.seq)
                await self._moved_on()
                return
            async with self._moved:
                await self._moved.wait_for(lambda: self.cursor >= seq or not self.lock.locked())

    async def _moved_on(self) -> None:
        """Wake the reads waiting for the copy to move on (its cursor advanced, or its lock was let go)."""
        async with self._moved:
            self._moved.notify_all()

    async def _catch_up(self, tx: TenantTx, upto: int) -> None:
        """Apply what the database has past the cursor, and put back the groups of a failed write."""
        if tx.generation != self.generation:
            raise ReplicaStale("the tenant's rows were replaced")
        if upto < self.cursor:
            raise ReplicaStale("the database is older than this copy")
        pending = await self._local(replicate.pending_changes) if self.dirty else {}
        if upto == self.cursor and upto == self.events_cursor and not pending:
            self.dirty = False
            return
        pulled = await self._pull(tx, upto, pending)

        def apply(conn: sqlite3.Connection) -> None:
            replicate.apply_groups(conn, pulled.changes)
            replicate.clear_changes(conn)
            replicate.set_state(conn, cursor=upto)

        await self._own_events_back()
        await self._local(self._in_write, apply)
        self.cursor = upto
        self.dirty = False
        await self._moved_on()
        if pulled.events:
            lines: dict[str, list[str]] = {}
            for origin, line in pulled.events:
                lines.setdefault(origin, []).append(line)
            await asyncio.to_thread(events.append_lines, self.facts_dir / "events", lines)
        offset = await asyncio.to_thread(events.file_size, self._own_events())
        await self._local(self._in_write, lambda c: replicate.set_state(c, events_cursor=upto, events_offset=offset))
        self.events_cursor, self.events_offset = upto, offset

    async def _pull(self, tx: TenantTx, upto: int, pending: dict[str, set[Key]]) -> _Pulled:
        """What changed past the cursor (and the rows of the groups to put back), in one round trip."""
        queries, back = read_queries(tx.tenant, upto, self.cursor, self.events_cursor, pending)
        results = iter(await tx.many(queries))
        changes: dict[str, tuple[set[Key], list[Row]]] = {}

        def add(m: Mirror, keys: Iterable[Key], rows: list[Row]) -> None:
            entry = changes.setdefault(m.name, (set(), []))
            entry[0].update(keys)
            have = {replicate.group_of(m, r) for r in entry[1]}
            entry[1].extend(r for r in rows if replicate.group_of(m, r) not in have)

        if self.cursor < upto:
            for m in MIRRORS:
                rows = decode_rows(m, next(results))
                if rows:
                    add(m, {replicate.group_of(m, r) for r in rows}, rows)
            for name, key in next(results):
                if str(name) in replicate.MIRROR_NAMES:
                    add(replicate.mirror(str(name)), [tuple(json.loads(from_pg_text(str(key))))], [])
        down: list[tuple[str, str]] = []
        if self.events_cursor < upto:
            down = [(str(o), from_pg_text(str(line))) for o, line in next(results)]
        for m, keys in back:
            add(m, keys, decode_rows(m, next(results)))
        return _Pulled(changes, down)

    def _own_events(self) -> Path:
        return self.facts_dir / "events" / f"{self.origin}.jsonl"

    async def _own_events_back(self) -> None:
        """Cut this copy's event file back to what the database has (lines of a write it did not commit)."""
        if self.origin:
            await asyncio.to_thread(events.cut_back, self._own_events(), self.events_offset)

    # -- writes ---------------------------------------------------------------------------------------

    def _collect(self, conn: sqlite3.Connection) -> _Collected:
        conn.execute("BEGIN")
        try:
            pending = replicate.pending_changes(conn)
            changes = {name: (keys, replicate.read_groups(conn, name, keys)) for name, keys in pending.items()}
        finally:
            conn.execute("COMMIT")
        applied = {str(r[0]) for r in changes.get("applied_events", (set(), []))[1]}
        if not applied:
            return _Collected(changes, [], self.events_offset)
        lines, offset = events.lines_since(self._own_events(), self.events_offset, applied)
        return _Collected(changes, lines, offset)

    async def _push(self, tx: TenantTx, got: _Collected) -> None:
        """The changed groups' rows replace the database's, in one round trip (a few for a big write)."""
        await run_batched(tx, write_statements(tx.tenant, tx.seq, got.changes, got.events))

    @contextlib.asynccontextmanager
    async def gate(self) -> AsyncIterator[None]:
        """A write section of this tenant (re-entered, it is joined). See the module's docstring.

        The tenant's lock in the database is taken first, then this copy's: so the copy is held only while
        the section catches up, writes and commits, never while it waits for another server's write, and a
        read of this server waits for a section at most until that section has caught up."""
        if id(self) in _INSIDE.get():
            yield
            return
        if not self.opened:
            await self.open()
        token = _INSIDE.set(_INSIDE.get() | {id(self)})
        try:
            async with self.link.tenant_write(self.tenant, self.lock_wait_s) as tx, self.lock:
                try:
                    await self._catch_up(tx, tx.seq - 1)
                    self.dirty = True  # from here the copy may hold what the database does not (yet)
                    yield
                    await self._commit(tx)
                except BaseException:
                    await self._put_back()
                    raise
        finally:
            _INSIDE.reset(token)
            await self._moved_on()

    async def _commit(self, tx: TenantTx) -> None:
        """Send the groups the section changed, commit, then clear the local log (nothing changed: the
        transaction is rolled back and the sequence stays)."""
        got = await self._local(self._collect)
        if got.changes or got.events:
            await self._push(tx, got)
            await tx.commit()

            def mark(conn: sqlite3.Connection) -> None:
                replicate.clear_changes(conn)
                replicate.set_state(conn, cursor=tx.seq, events_cursor=tx.seq, events_offset=got.offset)

            await self._local(self._in_write, mark)
            self.cursor = self.events_cursor = tx.seq
            self.events_offset = got.offset
        self.dirty = False

    async def _put_back(self) -> None:
        """After a failed write section: the database's rows back in place of the copy's, if it answers now
        (else the next read or write does it: ``dirty`` stays set)."""
        try:
            async with asyncio.timeout(5), self.link.tenant_read(self.tenant) as tx:
                await self._catch_up(tx, tx.seq)
        except (ServiceUnavailable, TimeoutError, sqlite3.Error) as exc:
            logger.warning("tenant %s: the local copy waits to be put back (%s)", self.tenant, type(exc).__name__)
