"""The storage seam: what the routes need from wherever tenants' memories live.

A tenant is a name (a safe slug, so it can never leave ``tenants/``) with its own memory: an `Eywa`
and a `FactsApi` over its own database, a spool folder for uploads, and a lock that keeps its ingests
one at a time. `EmbeddedTenantStore` (service/embedded.py) keeps each tenant in its own SQLite file;
another store (PostgreSQL as the durable truth, say) implements the same two protocols.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from service.errors import BadRequest

if TYPE_CHECKING:  # the memory engine is imported by whoever opens a tenant, not by `macupos --help`
    from memory import Eywa
    from memory.facts import FactsApi

__all__ = ["SCOPES", "KeyRecord", "KeyStore", "NewKey", "Scope", "Tenant", "TenantStore", "check_tenant_name"]

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")  # each allows what the ones before it do

# Lowercase only: on a case-insensitive file system "Alice" and "alice" would share a folder.
_TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def check_tenant_name(name: str) -> str:
    """``name`` when it is a tenant name (1–63 of a-z 0-9 _ -, starting with a letter or digit)."""
    if not _TENANT_RE.fullmatch(name):
        raise BadRequest("a tenant name is 1-63 characters of a-z, 0-9, '_' and '-', starting with a letter or digit")
    return name


@dataclass(frozen=True, slots=True)
class KeyRecord:
    key_id: str  # public: shown by `keys list`, named by `keys revoke`
    tenant: str
    scope: Scope
    label: str
    created_at: float
    revoked_at: float | None = None

    def allows(self, needed: Scope) -> bool:
        return SCOPES.index(self.scope) >= SCOPES.index(needed)


@dataclass(frozen=True, slots=True)
class NewKey:
    api_key: str = field(repr=False)  # shown once; only its hash is kept
    record: KeyRecord


class KeyStore(Protocol):
    async def create_key(
        self, tenant: str, scope: Scope, *, label: str = "", origin: str = "cli", new_tenant: bool = False
    ) -> NewKey:
        """A key for ``tenant`` (created when new); ``new_tenant``: Conflict when the tenant exists."""
        ...

    async def verify(self, presented: str) -> KeyRecord | None:
        """The live key ``presented`` is, or None (malformed, unknown, wrong secret or revoked)."""
        ...

    async def list_keys(self, tenant: str | None = None) -> list[KeyRecord]: ...

    async def revoke(self, key_id: str) -> KeyRecord | None: ...

    async def tenants(self) -> list[str]: ...

    async def close(self) -> None: ...


class Tenant(Protocol):
    """One tenant's memory, valid while its lease is held."""

    @property
    def name(self) -> str: ...
    @property
    def spool_dir(self) -> Path: ...  # uploads and export scratch, private to this tenant
    @property
    def ingest_lock(self) -> asyncio.Lock: ...

    async def eywa(self) -> Eywa: ...

    async def facts(self) -> FactsApi: ...


class TenantStore(Protocol):
    @property
    def keys(self) -> KeyStore: ...

    def lease(self, tenant: str) -> AbstractAsyncContextManager[Tenant]:
        """The tenant's memory, opened on first use; it stays open (not evicted) while leased."""
        ...

    def open_count(self) -> int: ...

    async def close(self) -> None: ...
