"""`macupos serve --local`: the owner's own memory (``$MACUPOS_HOME/memory.db`` and its facts) as the one
tenant, for the web pages alone. There are no API keys: the owner logs in with the one-time link printed at
start, or from Telegram's Mini App. The bot may run beside it on the same files (SQLite WAL, the facts'
append-only event log), as the CLI and Claude Code's hooks already do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from memory.api import Eywa
from memory.facts.api import FactsApi
from memory.settings import MemorySettings
from service.tenants import KeyRecord, NewKey, Scope, Tenant

__all__ = ["LOCAL_TENANT", "LocalTenantStore"]

LOCAL_TENANT = "owner"


class _NoKeys:
    """The key store of ``--local``: there are none, and none can be made."""

    async def create_key(
        self, tenant: str, scope: Scope, *, label: str = "", origin: str = "cli", new_tenant: bool = False
    ) -> NewKey:
        raise NotImplementedError("serve --local has no API keys")

    async def verify(self, presented: str) -> KeyRecord | None:
        return None

    async def list_keys(self, tenant: str | None = None) -> list[KeyRecord]:
        return []

    async def revoke(self, key_id: str) -> KeyRecord | None:
        return None

    async def tenants(self) -> list[str]:
        return [LOCAL_TENANT]

    async def close(self) -> None:
        return None


class _OwnerTenant:
    def __init__(self, settings: MemorySettings) -> None:
        self.name = LOCAL_TENANT
        self.settings = settings
        self.spool_dir = settings.home / "tmp" / "web"  # scratch for corrections; no uploads come here
        self.ingest_lock = asyncio.Lock()
        self._lock = asyncio.Lock()
        self._eywa: Eywa | None = None
        self._facts: FactsApi | None = None

    async def eywa(self) -> Eywa:
        async with self._lock:
            if self._eywa is None:
                self._eywa = await Eywa.open(self.settings)
            return self._eywa

    async def facts(self) -> FactsApi:
        await self.eywa()
        async with self._lock:
            if self._facts is None:
                self._facts = await FactsApi.from_settings(self.settings)
            return self._facts

    async def close(self) -> None:
        facts, eywa = self._facts, self._eywa
        self._facts = self._eywa = None
        try:
            if facts is not None:
                await facts.close()
        finally:
            if eywa is not None:
                await eywa.close()


class LocalTenantStore:
    def __init__(self, settings: MemorySettings) -> None:
        self.keys = _NoKeys()
        self._owner = _OwnerTenant(settings)

    @property
    def home(self) -> Path:
        return self._owner.settings.home

    @contextlib.asynccontextmanager
    async def lease(self, tenant: str) -> AsyncIterator[Tenant]:
        yield self._owner

    def open_count(self) -> int:
        return 1 if self._owner._eywa is not None else 0

    async def close(self) -> None:
        await self._owner.close()
