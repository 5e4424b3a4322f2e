"""One tenant's memory as a local copy of its rows in PostgreSQL, kept in step through the tenant's change
sequence (docs/decisions.md, "Memory service on PostgreSQL").

The copy is an ordinary memory database (the embedded engine's file), so reads run the one retrieval code.
Every write runs in a *write section* (:meth:`Replica.gate`): the tenant's row in ``macupos.tenants`` is
locked (one writer per tenant in the whole fleet) and its sequence bumped; the copy catches up to the rows
other processes wrote; the write runs locally as in the embedded engine, its triggers noting each group of
rows it changed (memory/replicate.py); those groups are copied to PostgreSQL stamped with the new sequence,
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from psycopg import sql

from memory import replicate
from memory.db import SCHEMA_VERSION, Database
from memory.facts.events import load_origin
from memory.replicate import MIRRORS, Key, Mirror, Row
from service.errors import ServiceUnavailable
from service.pg.link import PgLink, Query, TenantTx, from_pg_text, to_pg_text

__all__ = [
    "REBUILD_GAP",
    "Replica",
    "ReplicaStale",
    "build_copy",
    "decode_rows",
    "encode_columns",
    "insert_statements",
    "push_rows",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
REBUILD_GAP = 2_000  # a copy this many writes behind when opened is built afresh rather than caught up
_BATCH_BYTES = 8 << 20  # rows sent in one INSERT, about
_PG_TYPE = {"text": "text", "int": "bigint", "real": "float8"}
# The replicas whose write section the running task is in: a write inside one (Eywa.forget inside the
# upload route's section) joins it.
_INSIDE: ContextVar[frozenset[int]] = ContextVar("macupos_pg_sections", default=frozenset())


class ReplicaStale(ServiceUnavailable):
    """The tenant's rows in the database are no longer the ones this copy follows (replaced, or a database
    restored from an older backup): the copy is built afresh when the tenant is next opened."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the tenant's memory is being reloaded ({why}); try again", headers={"Retry-After": "1"})


# --- rows between the two stores --------------------------------------------------------------------------


def _texts(m: Mirror) -> list[int]:
    return [i for i, c in enumerate(m.columns) if c.kind == "text"]


def decode_rows(m: Mirror, rows: Iterable[tuple[Any, ...]]) -> list[Row]:
    """Rows as PostgreSQL returned them, as the replica stores them."""
    texts = _texts(m)
    out = []
    for r in rows:
        row = list(r)
        for i in texts:
            v = row[i]
            if v is not None and v[:1] == "\x01":
                row[i] = from_pg_text(v)
        out.append(tuple(row))
    return out


def encode_columns(m: Mirror, rows: list[Row]) -> list[list[Any]]:
    """Rows of the replica as one list per column, typed for PostgreSQL arrays."""
    cols: list[list[Any]] = [[] for _ in m.columns]
    for r in rows:
        for i, (c, v) in enumerate(zip(m.columns, r, strict=True)):
            if v is None:
                if not c.null:
                    raise replicate.ReplicaStateError(f"{m.name}.{c.name} is NULL in the local copy")
            elif c.kind == "text":
                if not isinstance(v, str):
                    raise replicate.ReplicaStateError(f"{m.name}.{c.name} holds a {type(v).__name__}, not text")
                v = to_pg_text(v)
            elif c.kind == "int":
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                if not isinstance(v, int):
                    raise replicate.ReplicaStateError(f"{m.name}.{c.name} holds a {type(v).__name__}, not an integer")
            elif isinstance(v, int):
                v = float(v)
            cols[i].append(v)
    return cols


def _insert_sql(m: Mirror) -> sql.Composed:
    casts = sql.SQL(", ").join(sql.SQL("%s::{}[]").format(sql.SQL(_PG_TYPE[c.kind])) for c in m.columns)
    names = sql.SQL(", ").join(sql.Identifier(n) for n in ("tenant_id", *m.names, "seq"))
    return sql.SQL("INSERT INTO macupos.{} ({}) SELECT %s, u.*, %s FROM unnest({}) AS u").format(
        sql.Identifier(m.name), names, casts
    )


def _group_filter(m: Mirror, keys: list[Key]) -> tuple[sql.Composable, list[Any]]:
    """``(g1, g2) IN (…)`` of some groups, as SQL and its parameters."""
    if m.width == 1:
        return sql.SQL("{} = ANY(%s)").format(sql.Identifier(m.group[0])), [[to_pg_text(k[0]) for k in keys]]
    cols = [c for c in m.columns if c.name in m.group]
    params: list[Any] = []
    for i, c in enumerate(cols):
        params.append([to_pg_text(k[i]) if c.kind == "text" else k[i] for k in keys])
    lhs = sql.SQL(", ").join(sql.Identifier(c.name) for c in cols)
    casts = sql.SQL(", ").join(sql.SQL("%s::{}[]").format(sql.SQL(_PG_TYPE[c.kind])) for c in cols)
    return sql.SQL("({}) IN (SELECT * FROM unnest({}))").format(lhs, casts), params


def _select(m: Mirror, where: sql.Composable) -> sql.Composed:
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in m.names)
    return sql.SQL("SELECT {} FROM macupos.{} WHERE tenant_id = %s AND {}").format(cols, sql.Identifier(m.name), where)


def _size(row: Row) -> int:
    return sum(len(v) if isinstance(v, str) else 8 for v in row)


def insert_statements(tenant: str, m: Mirror, rows: list[Row], seq: int) -> list[tuple[Query, list[Any]]]:
    """INSERTs of rows (their groups already cleared) stamped with ``seq``, a few megabytes each."""
    query = _insert_sql(m)
    out: list[tuple[Query, list[Any]]] = []
    start, size = 0, 0
    for i, row in enumerate(rows):
        size += _size(row)
        if size >= _BATCH_BYTES or i + 1 == len(rows):
            out.append((query, [tenant, seq, *encode_columns(m, rows[start : i + 1])]))
            start, size = i + 1, 0
    return out


async def push_rows(tx: TenantTx, m: Mirror, rows: list[Row], seq: int) -> None:
    """Insert rows (their groups already cleared) stamped with ``seq``."""
    for query, params in insert_statements(tx.tenant, m, rows, seq):
        await tx.run(query, params)


# --- one copy, built whole --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Built:
    seq: int
    generation: str
    rows: dict[str, int] = field(default_factory=dict)


def _remove_db(path: Path) -> None:
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)


def _write_events(folder: Path, lines: dict[str, list[str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for origin, found in lines.items():
        with (folder / f"{origin}.jsonl").open("a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in found))
            fh.flush()
            os.fsync(fh.fileno())


async def build_copy(link: PgLink, tenant: str, db_path: Path, events_dir: Path) -> _Built:
    """Write the tenant's whole memory, as one snapshot, into a new memory database at ``db_path`` (with the
    capture triggers) and its facts events into ``events_dir``."""
    _remove_db(db_path)
    db = await Database.open(db_path)  # the memory schema, migrated
    await db.close()
    conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous = OFF")  # a copy being built is thrown away if anything stops it
        conn.execute("BEGIN IMMEDIATE")
        async with link.tenant_read(tenant) as tx:
            built = _Built(tx.seq, tx.generation)
            for m in MIRRORS:
                n = 0
                order = sql.SQL(" ORDER BY row, id") if m.name == "chunks" else sql.SQL("")
                query = _select(m, sql.SQL("true")) + order
                async for batch in tx.stream(query, [tenant]):
                    rows = decode_rows(m, batch)
                    await asyncio.to_thread(replicate.load_rows, conn, m.name, rows)
                    n += len(rows)
                built.rows[m.name] = n
            lines: dict[str, list[str]] = {}
            events = "SELECT origin, line FROM macupos.facts_events WHERE tenant_id = %s ORDER BY seq, at_ms, id"
            async for batch in tx.stream(events, [tenant]):
                for origin, line in batch:
                    lines.setdefault(str(origin), []).append(from_pg_text(str(line)))
        built.rows["facts_events"] = sum(len(v) for v in lines.values())

        def finish() -> None:
            replicate.rebuild_chunk_fts(conn)
            replicate.install_capture(conn)
            replicate.set_state(
                conn,
                database_id=link.database_id,
                tenant=tenant,
                generation=built.generation,
                cursor=built.seq,
                events_cursor=built.seq,
                events_offset=0,
                schema=SCHEMA_VERSION,
            )
            conn.execute("COMMIT")

        await asyncio.to_thread(finish)
        await asyncio.to_thread(_write_events, events_dir, lines)
        return built
    finally:
        conn.close()


# --- the replica of one tenant ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Pulled:
    changes: dict[str, tuple[set[Key], list[Row]]]
    events: list[tuple[str, str]]  # (origin, line)


@dataclass(slots=True)
class _Collected:
    changes: dict[str, tuple[set[Key], list[Row]]]
    events: list[tuple[str, int, str, str]]  # (id, at_ms, origin, line)
    offset: int


class Replica:
    """The local copy of ``tenant``'s memory in ``folder`` (memory.db, facts/, handoffs/)."""

    def __init__(self, link: PgLink, tenant: str, folder: Path, *, lock_wait_s: float) -> None:
        self.link = link
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

    # -- the local file, on worker threads ------------------------------------------------------------

    def _sqlite(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA synchronous = NORMAL")
        return self._conn

    async def _local(self, fn: Callable[..., T], *args: Any) -> T:
        conn = self._sqlite()
        return await asyncio.to_thread(fn, conn, *args)

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
        build it from the database."""
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
            _remove_db(self.path)
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
            await asyncio.to_thread(_write_events, self.facts_dir / "events", lines)
        offset = await asyncio.to_thread(self._own_events_size)
        await self._local(self._in_write, lambda c: replicate.set_state(c, events_cursor=upto, events_offset=offset))
        self.events_cursor, self.events_offset = upto, offset

    async def _pull(self, tx: TenantTx, upto: int, pending: dict[str, set[Key]]) -> _Pulled:
        """What changed past the cursor (and the rows of the groups to put back), in one round trip."""
        queries: list[tuple[Query, list[Any]]] = []
        if self.cursor < upto:
            queries += [(_select(m, sql.SQL("seq > %s")), [tx.tenant, self.cursor]) for m in MIRRORS]
            queries.append(
                (
                    "SELECT mirror, key FROM macupos.deletions WHERE tenant_id = %s AND seq > %s",
                    [tx.tenant, self.cursor],
                )
            )
        if self.events_cursor < upto:
            queries.append(
                (
                    "SELECT origin, line FROM macupos.facts_events WHERE tenant_id = %s AND seq > %s AND seq <= %s"
                    " ORDER BY seq, at_ms, id",
                    [tx.tenant, self.events_cursor, upto],
                )
            )
        back: list[tuple[Mirror, list[Key]]] = []
        for m in MIRRORS:
            keys = sorted(pending.get(m.name, set()), key=repr)
            for i in range(0, len(keys), 500):
                where, params = _group_filter(m, keys[i : i + 500])
                queries.append((_select(m, where), [tx.tenant, *params]))
                back.append((m, keys[i : i + 500]))
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
        events: list[tuple[str, str]] = []
        if self.events_cursor < upto:
            events = [(str(o), from_pg_text(str(line))) for o, line in next(results)]
        for m, keys in back:
            add(m, keys, decode_rows(m, next(results)))
        return _Pulled(changes, events)

    # -- this copy's facts events -----------------------------------------------------------------------

    def _own_events_path(self) -> Path:
        return self.facts_dir / "events" / f"{self.origin}.jsonl"

    def _own_events_size(self) -> int:
        try:
            return self._own_events_path().stat().st_size
        except FileNotFoundError:
            return 0

    async def _own_events_back(self) -> None:
        """Cut this copy's event file back to what the database has (lines of a write it did not commit)."""

        def cut() -> None:
            path = self._own_events_path()
            if self.origin and path.exists() and path.stat().st_size > self.events_offset:
                with path.open("rb+") as fh:
                    fh.truncate(self.events_offset)
                    os.fsync(fh.fileno())

        await asyncio.to_thread(cut)

    def _own_events_since(self, applied: set[str]) -> tuple[list[tuple[str, int, str, str]], int]:
        """Whole lines of this copy's event file past the database's offset whose events were committed here."""
        path = self._own_events_path()
        try:
            with path.open("rb") as fh:
                fh.seek(self.events_offset)
                data = fh.read()
        except FileNotFoundError:
            return [], self.events_offset
        whole = data[: data.rfind(b"\n") + 1]
        out = []
        for raw in whole.split(b"\n"):
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("id") in applied:
                line = raw.decode("utf-8")
                out.append((str(event["id"]), int(event["at_ms"]), str(event["origin"]), line))
        return out, self.events_offset + len(whole)

    # -- writes ---------------------------------------------------------------------------------------

    def _collect(self, conn: sqlite3.Connection) -> _Collected:
        conn.execute("BEGIN")
        try:
            pending = replicate.pending_changes(conn)
            changes = {name: (keys, replicate.read_groups(conn, name, keys)) for name, keys in pending.items()}
        finally:
            conn.execute("COMMIT")
        applied = {str(r[0]) for r in changes.get("applied_events", (set(), []))[1]}
        events, offset = self._own_events_since(applied) if applied else ([], self.events_offset)
        return _Collected(changes, events, offset)

    async def _push(self, tx: TenantTx, got: _Collected) -> None:
        """The changed groups' rows replace the database's, in one round trip (a few for a big write)."""
        statements: list[tuple[Query, list[Any]]] = []
        for name, (keys, rows) in got.changes.items():
            m = replicate.mirror(name)
            ordered = sorted(keys, key=repr)
            for i in range(0, len(ordered), 500):
                where, params = _group_filter(m, ordered[i : i + 500])
                delete = sql.SQL("DELETE FROM macupos.{} WHERE tenant_id = %s AND {}").format(
                    sql.Identifier(name), where
                )
                statements.append((delete, [tx.tenant, *params]))
            statements += insert_statements(tx.tenant, m, rows, tx.seq)
            gone = keys - {replicate.group_of(m, r) for r in rows}
            if gone:
                statements.append(
                    (
                        "INSERT INTO macupos.deletions(tenant_id, mirror, key, seq)"
                        " SELECT %s, %s, unnest(%s::text[]), %s"
                        " ON CONFLICT (tenant_id, mirror, key) DO UPDATE SET seq = excluded.seq",
                        [tx.tenant, name, [to_pg_text(json.dumps(list(k))) for k in sorted(gone, key=repr)], tx.seq],
                    )
                )
        if got.events:
            ids, at, origins, lines = (list(x) for x in zip(*got.events, strict=True))
            statements.append(
                (
                    "INSERT INTO macupos.facts_events(tenant_id, id, at_ms, origin, line, seq)"
                    " SELECT %s, u.*, %s FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[]) AS u"
                    " ON CONFLICT (tenant_id, id) DO NOTHING",
                    [tx.tenant, tx.seq, ids, at, origins, [to_pg_text(x) for x in lines]],
                )
            )
        size = 0
        batch: list[tuple[Query, list[Any]]] = []
        for statement in statements:  # a pipeline holds its parameters in memory: a few megabytes a trip
            batch.append(statement)
            size += sum(len(v) if isinstance(v, str) else 8 for p in statement[1] if isinstance(p, list) for v in p)
            if size >= _BATCH_BYTES:
                await tx.many(batch)
                batch, size = [], 0
        await tx.many(batch)

    @contextlib.asynccontextmanager
    async def gate(self) -> AsyncIterator[None]:
        """A write section of this tenant (re-entered, it is joined). See the module's docstring."""
        if id(self) in _INSIDE.get():
            yield
            return
        if not self.opened:
            await self.open()
        try:
            async with self.lock, self._section():
                yield
        finally:
            await self._moved_on()

    @contextlib.asynccontextmanager
    async def _section(self) -> AsyncIterator[None]:
        token = _INSIDE.set(_INSIDE.get() | {id(self)})
        try:
            async with self.link.tenant_write(self.tenant, self.lock_wait_s) as tx:
                seq = tx.seq
                await self._catch_up(tx, seq - 1)
                self.dirty = True  # from here the copy may hold what the database does not (yet)
                yield
                got = await self._local(self._collect)
                if got.changes or got.events:
                    await self._push(tx, got)
                else:
                    tx.seq = 0  # nothing written: the sequence is not bumped
            if got.changes or got.events:

                def mark(conn: sqlite3.Connection) -> None:
                    replicate.clear_changes(conn)
                    replicate.set_state(conn, cursor=seq, events_cursor=seq, events_offset=got.offset)

                await self._local(self._in_write, mark)
                self.cursor = self.events_cursor = seq
                self.events_offset = got.offset
            self.dirty = False
        except BaseException:
            await self._put_back()
            raise
        finally:
            _INSIDE.reset(token)

    async def _put_back(self) -> None:
        """After a failed write section: the database's rows back in place of the copy's, if it answers now
        (else the next read or write does it: ``dirty`` stays set)."""
        try:
            async with asyncio.timeout(5), self.link.tenant_read(self.tenant) as tx:
                await self._catch_up(tx, tx.seq)
        except (ServiceUnavailable, TimeoutError, sqlite3.Error) as exc:
            logger.warning("tenant %s: the local copy waits to be put back (%s)", self.tenant, type(exc).__name__)
