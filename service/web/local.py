"""`macupos serve --local`: the owner's own memory (``$MACUPOS_HOME/memory.db`` and its facts) as the one
tenant, for the web pages alone. There are no API keys: the owner logs in with the one-time link printed at
start, or from Telegram's Mini App. The bot may run beside it on the same files (SQLite WAL, the facts'
append-only event log), as the CLI and Claude Code's hooks already do.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from memory import MemorySettings
from service.embedded import EmbeddedTenant
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


class LocalTenantStore:
    def __init__(self, settings: MemorySettings) -> None:
        self.keys = _NoKeys()
        # Scratch for corrections (no uploads come here), beside the owner's files.
        self._owner = EmbeddedTenant(LOCAL_TENANT, settings, spool_dir=settings.home / "tmp" / "web")

    @property
    def home(self) -> Path:
        return self._owner.settings.home

    @contextlib.asynccontextmanager
    async def lease(self, tenant: str) -> AsyncIterator[Tenant]:
        yield self._owner

    def open_count(self) -> int:
        return 1 if self._owner.is_open else 0

    async def close(self) -> None:
        await self._owner.close()
