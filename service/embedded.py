"""The embedded tenant store: each tenant a memory home of its own, ``$MACUPOS_HOME/tenants/<tenant>/``.

The same engine as the local mode (its own ``memory.db``, ``handoffs/`` and ``facts/``), opened on first
use and kept in a bounded LRU: a tenant not used for a while is closed (its facts snapshot written) when
more than ``max_open`` are open, but never while a request holds its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from memory import Eywa, MemorySettings
from memory.facts import FactsApi
from service.tenants import KeyStore, Tenant, check_tenant_name

__all__ = ["EmbeddedTenant", "EmbeddedTenantStore"]

logger = logging.getLogger(__name__)

_STALE_S = 3600.0  # spool scratch older than this is no live request's


def _make_private(folder: Path) -> None:
    """``folder`` and every missing folder above it made 0700 (``mkdir(parents=True)`` gives the ones above
    the default mode, 0755 under the usual umask); folders that exist are left as they are."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(mode=0o700, exist_ok=True)


class EmbeddedTenant:
    """A tenant's memory, opened on first use; ``spool_dir``: scratch for uploads and exports (``spool/``)."""

    def __init__(self, name: str, settings: MemorySettings, *, spool_dir: Path | None = None) -> None:
        self.name = name
        self.settings = settings
        self.spool_dir = settings.home / "spool" if spool_dir is None else spool_dir
        self.ingest_lock = asyncio.Lock()
        self.leases = 0
        self._open_lock = asyncio.Lock()
        self._eywa: Eywa | None = None
        self._facts: FactsApi | None = None

    def _make_home(self) -> None:
        # 0700: one tenant's files are no business of other local users either. `macupos serve` also sets a
        # umask of 077 (service/server.py), which covers the folders and files other code paths make.
        for folder in (self.settings.home.parent, self.settings.home, self.spool_dir):
            _make_private(folder)
        # Scratch a killed server left behind (a body half received, an export never sent).
        cutoff = time.time() - _STALE_S
        for leftover in (self.spool_dir / "tmp").glob("*"):
            with contextlib.suppress(OSError):
                if leftover.is_file() and leftover.stat().st_mtime < cutoff:
                    leftover.unlink()

    async def eywa(self) -> Eywa:
        if self._eywa is None:
            async with self._open_lock:
                if self._eywa is None:
                    await asyncio.to_thread(self._make_home)
                    self._eywa = await Eywa.open(self.settings)
        return self._eywa

    async def facts(self) -> FactsApi:
        if self._facts is None:
            await self.eywa()  # the database exists and is migrated before the facts engine opens it
            async with self._open_lock:
                if self._facts is None:
                    self._facts = await FactsApi.from_settings(self.settings)
        return self._facts

    @property
    def is_open(self) -> bool:
        return self._eywa is not None or self._facts is not None

    async def close(self) -> None:
        facts, eywa = self._facts, self._eywa
        self._facts = self._eywa = None
        try:
            if facts is not None:
                await facts.close()
        finally:
            if eywa is not None:
                await eywa.close()


class EmbeddedTenantStore:
    def __init__(self, base: MemorySettings, root: Path, keys: KeyStore, *, max_open: int = 32) -> None:
        self.base = base
        self.root = root
        self.keys = keys
        self.max_open = max(1, max_open)
        self._open: OrderedDict[str, EmbeddedTenant] = OrderedDict()

    def settings_for(self, name: str) -> MemorySettings:
        """The tenant's memory settings: the server's, with the tenant's own home. The Claude Code and Codex
        folders point inside it (and never exist): the service only ingests what was uploaded to it."""
        home = self.root / check_tenant_name(name)
        return replace(self.base, home=home, claude_config_dir=home / ".no-claude", codex_home=home / ".no-codex")

    def make_tenant(self, name: str) -> EmbeddedTenant:
        """A tenant not opened yet (another store keeps its memory elsewhere: service/pg/store.py)."""
        return EmbeddedTenant(name, self.settings_for(name))

    @contextlib.asynccontextmanager
    async def lease(self, tenant: str) -> AsyncIterator[Tenant]:
        t = self._open.get(tenant)
        if t is None:
            t = self._open[tenant] = self.make_tenant(tenant)
        self._open.move_to_end(tenant)
        t.leases += 1
        try:
            await self._evict()
            yield t
        finally:
            t.leases -= 1
            if t.leases == 0 and self._open.get(tenant) is not t:  # evicted while in use: close it now
                await t.close()

    async def _evict(self) -> None:
        over = len(self._open) - self.max_open
        if over <= 0:
            return
        # Taken out before any await: a concurrent lease neither finds them nor evicts them twice; one that
        # wants such a tenant again meanwhile opens it afresh (SQLite lets both sides share the files).
        idle = [t for t in self._open.values() if t.leases == 0][:over]
        for t in idle:
            del self._open[t.name]
        for t in idle:
            logger.info("closing tenant %s (least recently used)", t.name)
            await t.close()

    def open_count(self) -> int:
        return sum(1 for t in self._open.values() if t.is_open)

    async def close(self) -> None:
        tenants = list(self._open.values())
        self._open.clear()
        for t in tenants:
            try:
                await t.close()
            except Exception:  # one tenant that fails to close must not keep the others open
                logger.exception("closing tenant %s", t.name)
        await self.keys.close()
