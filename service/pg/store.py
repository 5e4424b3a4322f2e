"""The tenant store of `macupos serve --database postgresql://…`: PostgreSQL holds every tenant's memory and
the keys; each process answers from its local copy of a tenant (service/pg/replica.py) behind the same `Eywa`
and `FactsApi` the embedded store hands out, so the routes and MCP tools are the embedded ones.

What writes runs in the tenant's write section, which the whole fleet takes one at a time:

- the routes' ``ingest_lock`` (uploads, handoff imports, forgets) *is* the section: :class:`WriteLock`;
- `Eywa`'s writing methods (its one write section hook, ``Eywa.write_section``) and every write transaction
  of its database join or open one (MCP's extract);
- the facts calls that change facts (scripts, remember, recall's access counts) open one.

Every request's lease first brings the copy up to the tenant's latest committed write (one indexed
statement when it is current): a write accepted by any process is read through every other at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

import aiosqlite

from memory import Eywa, MemorySettings
from memory.facts import FactsApi, LoadReport, Memory, ScriptResult
from memory.storage import Database
from service.embedded import EmbeddedTenant, EmbeddedTenantStore
from service.pg.keys import PgKeyStore
from service.pg.link import PgLink
from service.pg.replica import Replica, ReplicaStale
from service.settings import ServiceSettings
from service.tenants import Tenant, TenantStore

__all__ = ["PgFactsApi", "PgTenant", "PgTenantStore", "ReplicaEywa", "WriteLock", "pg_store", "replica_root"]

logger = logging.getLogger(__name__)


def _section(replica: Replica | None) -> AbstractAsyncContextManager[None]:
    return replica.gate() if replica is not None else contextlib.nullcontext()


class ReplicaDatabase(Database):
    """A copy's database: any write transaction runs in the tenant's write section (joining the caller's)."""

    replica: Replica | None = None

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        async with _section(self.replica), super().write() as conn:
            yield conn

    async def write_sync(self, fn: Any) -> Any:
        async with _section(self.replica):
            return await super().write_sync(fn)


class ReplicaEywa(Eywa):
    """`Eywa` over a copy: its write section hook is the tenant's, so each writing call is one section and
    what it reads first is current too."""

    def __init__(self, settings: MemorySettings, db: Database, replica: Replica) -> None:
        super().__init__(settings, db)
        self.replica = replica

    def write_section(self) -> AbstractAsyncContextManager[None]:
        return self.replica.gate()


class PgFactsApi(FactsApi):
    """`FactsApi` over a copy: the calls that change facts (even recall counts an access) are write sections."""

    replica: Replica | None = None

    async def run_script(self, *args: Any, **kwargs: Any) -> ScriptResult:
        async with _section(self.replica):
            return await super().run_script(*args, **kwargs)

    async def remember(self, *args: Any, **kwargs: Any) -> str:
        async with _section(self.replica):
            return await super().remember(*args, **kwargs)

    async def recall(self, *args: Any, **kwargs: Any) -> list[Memory]:
        async with _section(self.replica):
            return await super().recall(*args, **kwargs)

    async def replay_new(self) -> int:
        async with _section(self.replica):
            return await super().replay_new()

    async def rebuild(self) -> int:
        async with _section(self.replica):
            return await super().rebuild()

    async def load_snapshot(self, *args: Any, **kwargs: Any) -> LoadReport:
        async with _section(self.replica):
            return await super().load_snapshot(*args, **kwargs)


class WriteLock(asyncio.Lock):
    """A tenant's ingest lock that is its fleet-wide write section: the routes hold it around an upload's
    ingest (on a worker thread with its own connection), a handoff import, a forget."""

    def __init__(self, replica: Replica) -> None:
        super().__init__()
        self._replica = replica
        self._held: list[AbstractAsyncContextManager[None]] = []  # one at most: the lock is held once

    async def __aenter__(self) -> None:
        await self.acquire()
        section = self._replica.gate()
        try:
            await section.__aenter__()
        except BaseException:
            self.release()
            raise
        self._held.append(section)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        section = self._held.pop()
        try:
            await section.__aexit__(exc_type, exc, tb)
        finally:
            self.release()


class PgTenant(EmbeddedTenant):
    def __init__(self, name: str, settings: MemorySettings, spool_dir: Path, replica: Replica) -> None:
        super().__init__(name, settings)
        self.spool_dir = spool_dir
        self.replica = replica
        self.ingest_lock = WriteLock(replica)
        self.stale = False

    async def refresh(self) -> None:
        try:
            await self.replica.refresh()
        except ReplicaStale:
            self.stale = True
            raise

    async def eywa(self) -> Eywa:
        if self._eywa is None:
            async with self._open_lock:
                if self._eywa is None:
                    await asyncio.to_thread(self.spool_dir.mkdir, mode=0o700, parents=True, exist_ok=True)
                    await self.replica.open()
                    opened = await ReplicaDatabase.open(
                        self.settings.db_path, busy_timeout_ms=self.settings.busy_timeout_ms
                    )
                    db = cast(ReplicaDatabase, opened)
                    db.replica = self.replica
                    self._eywa = ReplicaEywa(self.settings, db, self.replica)
        return self._eywa

    async def facts(self) -> FactsApi:
        if self._facts is None:
            await self.eywa()
            async with self._open_lock:
                if self._facts is None:
                    api = cast(PgFactsApi, await PgFactsApi.from_settings(self.settings))
                    api.replica = self.replica
                    self._facts = api
                    # Opening replays event lines not applied yet; a copy has none unless a write was cut
                    # short, and then the database's rows are put back.
                    self.replica.dirty = True
                    await self.replica.refresh()
        return self._facts

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.replica.close()


class PgTenantStore(EmbeddedTenantStore):
    """Tenants' copies under ``replicas/<tenant>/``; spooled uploads under ``root/<tenant>/spool`` (where the
    embedded store spools them too, so a tenant migrated in keeps recognising files sent before)."""

    def __init__(
        self,
        base: MemorySettings,
        root: Path,
        keys: PgKeyStore,
        link: PgLink,
        replicas: Path,
        *,
        max_open: int = 32,
        lock_wait_s: float = 300.0,
        open_wait_s: float = 20.0,
        slot_lock: IO[bytes] | None = None,
    ) -> None:
        super().__init__(base, root, keys, max_open=max_open)
        self.link = link
        self.replicas = replicas
        self.lock_wait_s = lock_wait_s  # a writer waits this long for another server's write of the tenant
        self.open_wait_s = open_wait_s  # a request waits this long for a tenant's copy being built
        self._slot_lock = slot_lock

    def make_tenant(self, name: str) -> EmbeddedTenant:
        folder = self.replicas / name
        settings = replace(
            self.base, home=folder, claude_config_dir=folder / ".no-claude", codex_home=folder / ".no-codex"
        )
        replica = Replica(self.link, name, folder, lock_wait_s=self.lock_wait_s, open_wait_s=self.open_wait_s)
        return PgTenant(name, settings, self.settings_for(name).home / "spool", replica)

    @contextlib.asynccontextmanager
    async def lease(self, tenant: str) -> AsyncIterator[Tenant]:
        async with super().lease(tenant) as t:
            pg = cast(PgTenant, t)
            try:
                await pg.refresh()
            except ReplicaStale:
                if self._open.get(tenant) is pg:  # closed when its last lease ends; reopened (rebuilt) after
                    del self._open[tenant]
                raise
            yield t

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.link.close()
            if self._slot_lock is not None:
                self._slot_lock.close()


def replica_root(home: Path, database_id: str) -> tuple[Path, IO[bytes]]:
    """This process's folder of copies, ``home/pg/<database id>/<n>``, and the lock that keeps it its own:
    two processes on one host never share a copy; a restarted one takes a free folder, usually its old one."""
    base = home / "pg" / database_id
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    for n in range(1024):
        folder = base / str(n)
        folder.mkdir(mode=0o700, exist_ok=True)
        fh = (folder / "lock").open("ab")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        os.chmod(folder / "lock", 0o600)
        return folder, fh
    raise OSError(f"no free folder for the local copies under {base}")


def pg_store(settings: ServiceSettings, memory: MemorySettings) -> Callable[[], Awaitable[TenantStore]]:
    """The store factory of `macupos serve --database URL` (for ``service.app.build_app``)."""

    async def open_store() -> TenantStore:
        link = await PgLink.open(
            settings.database_url,
            max_size=settings.database_pool,
            timeout_s=settings.database_timeout_s,
        )
        try:
            folder, lock = await asyncio.to_thread(replica_root, settings.home, link.database_id)
        except BaseException:
            await link.close()
            raise
        base = replace(memory, llm_enabled=settings.use_llm)
        return PgTenantStore(
            base,
            settings.tenants_dir,
            PgKeyStore(link),
            link,
            folder,
            max_open=settings.limits.max_open_tenants,
            lock_wait_s=settings.limits.upload_timeout_s,
            open_wait_s=settings.limits.request_timeout_s * 2 / 3,  # a 503 to come back, before a 504
            slot_lock=lock,
        )

    return open_store
