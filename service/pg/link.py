"""The service's link to PostgreSQL: a bounded pool of psycopg 3 async connections, the schema migrations,
every statement under a deadline, and the two kinds of tenant transaction the replicas use.

Every failure to reach or hear from the database (refused, reset, shutting down, a deadline, no free
connection in time) is :class:`DatabaseUnavailable`, a 503 with ``Retry-After``: the request can be retried
as it is. The pool connects in the caller's own time, with no background reconnection and its back-off: while
the database is down a request fails at once, and the first one after it is back connects and succeeds. Its
message never carries the database URL (it may hold a password).

Tenant transactions run as role ``macupos_tenant`` with ``macupos.tenant`` set (``set_config(..., true)``:
for this transaction only), so row-level security is the second wall around each tenant's rows whatever
role the URL names (a superuser too).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from memory.storage import SCHEMA_VERSION
from service.errors import ServiceError, ServiceUnavailable
from service.pg.migrations import LOCK_KEY, MIGRATIONS, TENANT_ROLE
from service.pg.pool import AConn, Pool, PoolBusy

__all__ = [
    "DatabaseUnavailable",
    "PgLink",
    "Query",
    "SchemaMismatch",
    "TenantTx",
    "from_pg_text",
    "redact_url",
    "to_pg_text",
]

logger = logging.getLogger(__name__)

Query = str | sql.SQL | sql.Composed


class DatabaseUnavailable(ServiceUnavailable):
    def __init__(self, message: str = "the database is unavailable; try again") -> None:
        super().__init__(message, headers={"Retry-After": "1"})


class SchemaMismatch(ServiceError):
    """The database holds another memory schema than this program's (run the matching version).

    Raised at start-up (migrating), never in a request; the CLI says its message as one line."""


def redact_url(url: str) -> str:
    """The URL with any password replaced, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(an unreadable database URL)"
    info.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(info.items()) if k in {"host", "port", "dbname", "user"})


# PostgreSQL text cannot hold U+0000, which a transcript's JSON can ("\u0000"). Such a value (and any that
# starts with the mark itself) is stored as the mark and its JSON; everything else as it is.
_MARK = "\x01"


def to_pg_text(value: str) -> str:
    if "\x00" in value or value.startswith(_MARK):
        return _MARK + json.dumps(value)
    return value


def from_pg_text(value: str) -> str:
    if value.startswith(_MARK):
        out = json.loads(value[1:])
        return str(out)
    return value


@dataclass(slots=True)
class TenantTx:
    """A connection inside one tenant's transaction; ``seq``: the tenant's change sequence (a write's own)."""

    conn: AConn
    tenant: str
    seq: int
    generation: str
    link: PgLink
    committed: bool = False

    async def commit(self) -> None:
        async with self.link.guard():
            await self.conn.execute("COMMIT")
        self.committed = True

    async def rows(self, query: Query, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self.link.guard():
            cur = await self.conn.execute(query, params)
            return await cur.fetchall()

    async def run(self, query: Query, params: Sequence[Any] = ()) -> None:
        async with self.link.guard():
            await self.conn.execute(query, params)

    async def many(self, statements: Sequence[tuple[Query, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Several statements in one round trip (a pipeline); the rows of each (none for a write)."""
        if not statements:
            return []
        async with self.link.guard():
            async with self.conn.pipeline():
                cursors = [await self.conn.execute(q, p) for q, p in statements]
            return [await c.fetchall() if c.description else [] for c in cursors]

    def stream(self, query: Query, params: Sequence[Any] = (), batch: int = 5000) -> Stream:
        return Stream(self, query, params, batch)


class Stream:
    """A server-side cursor read in batches (a replica built from a large tenant)."""

    def __init__(self, tx: TenantTx, query: Query, params: Sequence[Any], batch: int) -> None:
        self.tx, self.query, self.params, self.batch = tx, query, params, batch

    async def __aiter__(self) -> AsyncIterator[list[tuple[Any, ...]]]:
        cur = self.tx.conn.cursor(name="macupos_stream")
        try:
            async with self.tx.link.guard():
                await cur.execute(self.query, self.params)
            while True:
                async with self.tx.link.guard():
                    rows = await cur.fetchmany(self.batch)
                if not rows:
                    return
                yield rows
        finally:
            with contextlib.suppress(psycopg.Error):
                await cur.close()


# A tenant's (seq, generation) as the key check of this request read it (with the key's row, in one
# statement): the request's lease then need not ask again. Each request runs in a task of its own.
_SEEN: ContextVar[tuple[str, int, str] | None] = ContextVar("macupos_pg_seen", default=None)

_UNAVAILABLE = (psycopg.OperationalError, psycopg.InterfaceError)


class PgLink:
    """Open with :meth:`open`; one per process, shared by the key store and every tenant."""

    def __init__(self, pool: Pool, *, timeout_s: float, database_id: str) -> None:
        self.pool = pool
        self.timeout_s = timeout_s  # each statement (the server's statement_timeout, and ours a bit later)
        self.database_id = database_id

    @classmethod
    async def open(
        cls, url: str, *, max_size: int = 16, timeout_s: float = 30.0, connect_timeout_s: float = 10.0
    ) -> PgLink:
        """Connect (a pool of up to ``max_size``), migrate the schema, and check it mirrors this memory schema."""
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError:  # its message would quote the URL, password and all
            raise DatabaseUnavailable(
                "the database URL is neither a postgresql:// URL nor a key=value connection string"
            ) from None
        options = f"-c statement_timeout={int(timeout_s * 1000)}"
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, int(connect_timeout_s)),
            "options": options,
            "application_name": "macupos serve",
        }
        pool = Pool(url, kwargs, max_size, wait_s=timeout_s)
        try:
            async with pool.connection():
                pass
        except (DatabaseUnavailable, psycopg.Error) as exc:
            await pool.close()
            raise DatabaseUnavailable(f"cannot connect to the database ({redact_url(url)})") from exc
        link = cls(pool, timeout_s=timeout_s, database_id="")
        try:
            link.database_id = await link.migrate()
        except BaseException:
            await pool.close()
            raise
        return link

    async def close(self) -> None:
        await self.pool.close()

    @contextlib.asynccontextmanager
    async def guard(self, timeout_s: float | None = None) -> AsyncIterator[None]:
        """PostgreSQL statements under a deadline; failing to reach the database is DatabaseUnavailable."""
        try:
            async with asyncio.timeout(timeout_s or self.timeout_s + 5):
                yield
        except TimeoutError:
            raise DatabaseUnavailable("the database did not answer in time; try again") from None
        except psycopg.errors.LockNotAvailable:
            raise DatabaseUnavailable("the tenant is busy with another write; try again") from None
        except _UNAVAILABLE as exc:
            logger.warning("database unavailable: %s", type(exc).__name__)
            raise DatabaseUnavailable() from exc

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AConn]:
        """A pooled connection (autocommit); PostgreSQL failures inside are DatabaseUnavailable."""
        try:
            async with self.pool.connection() as conn:
                yield conn
        except PoolBusy:
            raise DatabaseUnavailable("every database connection is busy; try again") from None
        except _UNAVAILABLE as exc:
            logger.warning("database unavailable: %s", type(exc).__name__)
            raise DatabaseUnavailable() from exc

    async def migrate(self) -> str:
        """Bring the schema up to date (one process at a time); returns the database id."""
        async with self.connection() as conn, self.guard(), conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            await conn.execute("CREATE SCHEMA IF NOT EXISTS macupos")
            await conn.execute("CREATE TABLE IF NOT EXISTS macupos.schema_version(version int NOT NULL)")
            cur = await conn.execute("SELECT COALESCE(max(version), 0) FROM macupos.schema_version")
            row = await cur.fetchone()
            current = int(row[0]) if row else 0
            if current > len(MIGRATIONS):
                raise SchemaMismatch(f"the database's schema is {current}, newer than this program's {len(MIGRATIONS)}")
            for version in range(current, len(MIGRATIONS)):
                logger.info("migrating the database to schema %d", version + 1)
                await conn.execute(MIGRATIONS[version])  # several statements, no parameters
                await conn.execute("INSERT INTO macupos.schema_version(version) VALUES (%s)", (version + 1,))
            cur = await conn.execute("SELECT key, value FROM macupos.info")
            info = {str(k): str(v) for k, v in await cur.fetchall()}
        if info.get("memory_schema") != str(SCHEMA_VERSION):
            raise SchemaMismatch(
                f"the database mirrors memory schema {info.get('memory_schema')}, this program's is {SCHEMA_VERSION}"
            )
        return info["database_id"]

    async def fetch(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement outside any tenant (the directory), in autocommit."""
        async with self.connection() as conn, self.guard():
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    @staticmethod
    def saw(tenant: str, seq: int, generation: str) -> None:
        """Note a tenant's state read in this request (by the key check) for its lease to use."""
        _SEEN.set((tenant, seq, generation))

    async def tenant_state(self, tenant: str) -> tuple[int, str] | None:
        """(seq, generation) of a tenant, or None when it does not exist; read by this request's key check
        if it did, else now."""
        seen = _SEEN.get()
        if seen is not None and seen[0] == tenant:
            _SEEN.set(None)  # once: a later read in this request asks again
            return seen[1], seen[2]
        rows = await self.fetch("SELECT seq, generation FROM macupos.tenants WHERE tenant_id = %s", (tenant,))
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    async def ensure_tenant(self, tenant: str, origin: str = "cli") -> None:
        await self.fetch(
            "INSERT INTO macupos.tenants(tenant_id, origin, created_at) VALUES (%s, %s, extract(epoch FROM now()))"
            " ON CONFLICT (tenant_id) DO NOTHING",
            (tenant, origin),
        )

    async def _enter_tenant(self, conn: AConn, tenant: str) -> None:
        await conn.execute(
            "SELECT set_config('role', %s, true), set_config('macupos.tenant', %s, true)", (TENANT_ROLE, tenant)
        )

    @contextlib.asynccontextmanager
    async def tenant_read(self, tenant: str) -> AsyncIterator[TenantTx]:
        """One snapshot of a tenant's rows (REPEATABLE READ, read only) and its sequence in that snapshot."""
        async with self.connection() as conn:
            try:
                async with self.guard():
                    async with conn.pipeline():  # one round trip
                        await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        cur = await conn.execute(
                            "SELECT seq, generation FROM macupos.tenants WHERE tenant_id = %s", (tenant,)
                        )
                        await self._enter_tenant(conn, tenant)
                    row = await cur.fetchone()
                seq, generation = (int(row[0]), str(row[1])) if row else (0, "")
                yield TenantTx(conn, tenant, seq, generation, self)
            finally:
                await self._end(conn, commit=False)

    @contextlib.asynccontextmanager
    async def tenant_write(self, tenant: str, lock_wait_s: float) -> AsyncIterator[TenantTx]:
        """A tenant's write transaction: its row in ``tenants`` locked (one writer per tenant in the whole
        fleet; a writer waits up to ``lock_wait_s`` for another) and its sequence bumped. Committed by
        ``tx.commit()``; rolled back otherwise."""
        async with self.connection() as conn:
            tx: TenantTx | None = None
            try:
                async with self.guard(lock_wait_s + self.timeout_s + 5):
                    async with conn.pipeline():  # one round trip
                        await conn.execute("BEGIN")
                        await conn.execute(
                            "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                            (f"{int(lock_wait_s * 1000)}ms", f"{int((lock_wait_s + self.timeout_s) * 1000)}ms"),
                        )
                        cur = await conn.execute(
                            "UPDATE macupos.tenants SET seq = seq + 1 WHERE tenant_id = %s RETURNING seq, generation",
                            (tenant,),
                        )
                        await conn.execute(
                            "SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', %s, true),"
                            " set_config('role', %s, true), set_config('macupos.tenant', %s, true)",
                            (f"{int(self.timeout_s * 1000)}ms", TENANT_ROLE, tenant),
                        )
                    row = await cur.fetchone()
                if row is None:
                    raise LookupError(f"no tenant {tenant!r} in the database")
                tx = TenantTx(conn, tenant, int(row[0]), str(row[1]), self)
                yield tx
            finally:
                if tx is None or not tx.committed:
                    await self._end(conn, commit=False)

    async def _end(self, conn: AConn, *, commit: bool) -> None:
        if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return
        try:
            async with asyncio.timeout(5):
                await conn.execute("COMMIT" if commit else "ROLLBACK")
        except (TimeoutError, psycopg.Error) as exc:  # the pool replaces a connection it cannot use again
            logger.info("ending a transaction failed: %s", type(exc).__name__)
            with contextlib.suppress(psycopg.Error):
                await conn.close()
