"""API keys in PostgreSQL (``macupos.api_keys``, ``macupos.tenants``): the KeyStore of a fleet of servers.

The same keys, hashing and constant-time check as the embedded store (service/keys.py): only the SHA-256 of
a key is kept, and a revoked key is refused by every server from its next request on, since each request
reads its key's row.
"""

from __future__ import annotations

import time

from service.errors import Conflict
from service.keys import digest, key_id_of, key_record, list_keys_query, live_key, mint_key
from service.pg.link import PgLink
from service.tenants import KeyRecord, NewKey, Scope

__all__ = ["PgKeyStore"]

_COLS = "key_id, tenant_id, scope, label, created_at, revoked_at"


class PgKeyStore:
    def __init__(self, link: PgLink, *, owns_link: bool = False) -> None:
        self.link = link
        self._owns_link = owns_link

    async def close(self) -> None:
        if self._owns_link:
            await self.link.close()

    async def create_key(
        self, tenant: str, scope: Scope, *, label: str = "", origin: str = "cli", new_tenant: bool = False
    ) -> NewKey:
        key_id, api_key = mint_key(tenant, scope)
        now = time.time()
        async with self.link.connection() as conn, self.link.guard(), conn.transaction():
            cur = await conn.execute(
                "INSERT INTO macupos.tenants(tenant_id, origin, created_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id) DO NOTHING RETURNING tenant_id",
                (tenant, origin, now),
            )
            if await cur.fetchone() is None and new_tenant:
                raise Conflict(f"the tenant {tenant!r} exists already")
            await conn.execute(
                "INSERT INTO macupos.api_keys(key_id, tenant_id, scope, sha256, label, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (key_id, tenant, scope, digest(api_key), label, now),
            )
        return NewKey(api_key, KeyRecord(key_id, tenant, scope, label, now))

    async def verify(self, presented: str) -> KeyRecord | None:
        if (key_id := key_id_of(presented)) is None:
            return None
        # With the tenant's change sequence: the request's lease uses it to know its copy is current.
        rows = await self.link.fetch(
            f"SELECT {', '.join('k.' + c for c in _COLS.split(', '))}, k.sha256, t.seq, t.generation"
            " FROM macupos.api_keys AS k JOIN macupos.tenants AS t ON t.tenant_id = k.tenant_id WHERE k.key_id = %s",
            (key_id,),
        )
        record = live_key(presented, rows[0] if rows else None)
        if record is not None:  # found, so rows[0] is its row
            self.link.saw(record.tenant, int(rows[0][7]), str(rows[0][8]))
        return record

    async def list_keys(self, tenant: str | None = None) -> list[KeyRecord]:
        query, args = list_keys_query("macupos.api_keys", _COLS, tenant_column="tenant_id", mark="%s", tenant=tenant)
        return [key_record(r) for r in await self.link.fetch(query, args)]

    async def revoke(self, key_id: str) -> KeyRecord | None:
        rows = await self.link.fetch(
            f"UPDATE macupos.api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE key_id = %s RETURNING {_COLS}",
            (time.time(), key_id),
        )
        return key_record(rows[0]) if rows else None

    async def tenants(self) -> list[str]:
        return [str(r[0]) for r in await self.link.fetch("SELECT tenant_id FROM macupos.tenants ORDER BY tenant_id")]

    async def import_keys(self, records: list[tuple[KeyRecord, str]]) -> int:
        """Copy keys (record, sha256) from another store, e.g. service.db at a migration; ids already here stay."""
        n = 0
        async with self.link.connection() as conn, self.link.guard(), conn.transaction():
            for r, sha in records:
                await conn.execute(
                    "INSERT INTO macupos.tenants(tenant_id, origin, created_at) VALUES (%s, 'migrate', %s)"
                    " ON CONFLICT (tenant_id) DO NOTHING",
                    (r.tenant, r.created_at),
                )
                cur = await conn.execute(
                    "INSERT INTO macupos.api_keys(key_id, tenant_id, scope, sha256, label, created_at, revoked_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key_id) DO NOTHING",
                    (r.key_id, r.tenant, r.scope, sha, r.label, r.created_at, r.revoked_at),
                )
                n += cur.rowcount
        return n
