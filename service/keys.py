"""API keys in ``$MACUPOS_HOME/service.db``: created, listed, revoked and checked; kept only as hashes.

A key is ``mpk_<key id>_<secret>``: 12 hex digits of public id and 256 random bits of secret. The id
finds the row and the SHA-256 of the whole key is compared with ``hmac.compare_digest``. A plain
SHA-256 suffices: the secret is random, not a password, so a slow hash would buy nothing against a
leaked table and would cost every request. The ``mpk_`` prefix lets log filters and secret scanners
recognise a key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any, cast

from memory.storage import Database
from service.errors import Conflict
from service.migrations import MIGRATIONS
from service.tenants import SCOPES, KeyRecord, NewKey, Scope, check_tenant_name

__all__ = [
    "KEY_PREFIX",
    "KEY_RE",
    "SqliteKeyStore",
    "digest",
    "key_id_of",
    "key_record",
    "list_keys_query",
    "live_key",
    "mask_keys",
    "matches",
    "mint_key",
]

KEY_PREFIX = "mpk_"
_ID_HEX = 12
# The secret is token_urlsafe(32): 43 characters of [A-Za-z0-9_-].
KEY_RE = re.compile(r"mpk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")
_LOOSE_KEY_RE = re.compile(r"mpk_[0-9A-Za-z_-]{8,}")  # also a mistyped or cut key: mask it in logs all the same
_DUMMY = hashlib.sha256(b"no such key").hexdigest()
_COLS = "key_id, tenant, scope, label, created_at, revoked_at"


def mask_keys(text: str) -> str:
    """``text`` with anything shaped like one of our keys replaced by ``mpk_<masked>``."""
    return _LOOSE_KEY_RE.sub("mpk_<masked>", text) if KEY_PREFIX in text else text


def digest(key: str) -> str:
    """What a key store keeps of a key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def mint_key(tenant: str, scope: Scope) -> tuple[str, str]:
    """A new key's (public id, whole key) for ``tenant``; ValueError for a bad tenant name or scope."""
    check_tenant_name(tenant)
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    key_id = secrets.token_hex(_ID_HEX // 2)
    return key_id, f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def key_id_of(presented: str) -> str | None:
    """The public id of a presented key, or None when it is not shaped like one of ours."""
    return presented[len(KEY_PREFIX) : len(KEY_PREFIX) + _ID_HEX] if KEY_RE.fullmatch(presented) else None


def matches(presented: str, stored: str | None) -> bool:
    """Whether ``presented`` is the key whose digest is ``stored``. Compared in constant time, and compared
    even when no row was found (``stored`` None), so timing tells nothing about which ids exist."""
    return hmac.compare_digest(digest(presented), stored if stored is not None else _DUMMY) and stored is not None


def key_record(row: Any) -> KeyRecord:
    """A key's row (``key id, tenant, scope, label, created_at, revoked_at``, either store) as a KeyRecord."""
    revoked = float(row[5]) if row[5] is not None else None
    return KeyRecord(str(row[0]), str(row[1]), cast(Scope, row[2]), str(row[3]), float(row[4]), revoked)


def live_key(presented: str, row: Any) -> KeyRecord | None:
    """The record of the row found for ``presented`` (None when none was; its digest in ``row[6]``), or None
    when the key does not match it or was revoked."""
    if not matches(presented, str(row[6]) if row else None) or row is None or row[5] is not None:
        return None
    return key_record(row)


def list_keys_query(
    table: str, columns: str, *, tenant_column: str, mark: str, tenant: str | None
) -> tuple[str, tuple[str, ...]]:
    """``list_keys``'s query and arguments in either store's names (``mark``: its placeholder)."""
    where, args = (f" WHERE {tenant_column} = {mark}", (tenant,)) if tenant is not None else ("", ())
    return f"SELECT {columns} FROM {table}{where} ORDER BY {tenant_column}, created_at, key_id", args


class SqliteKeyStore:
    """The embedded key store. Reads run on the caller's thread (one indexed row: microseconds); writes go
    through the database's write discipline, so `macupos serve keys …` may run beside a live server."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open(cls, path: Path) -> SqliteKeyStore:
        return cls(await Database.open(path, busy_timeout_ms=5_000, migrations=MIGRATIONS))

    async def close(self) -> None:
        await self.db.close()

    async def create_key(
        self, tenant: str, scope: Scope, *, label: str = "", origin: str = "cli", new_tenant: bool = False
    ) -> NewKey:
        key_id, api_key = mint_key(tenant, scope)
        now = time.time()
        async with self.db.write() as conn:
            try:
                await conn.execute(
                    "INSERT INTO tenants(name, origin, created_at) VALUES (?, ?, ?)", (tenant, origin, now)
                )
            except sqlite3.IntegrityError:
                if new_tenant:
                    raise Conflict(f"the tenant {tenant!r} exists already") from None
            await conn.execute(
                "INSERT INTO api_keys(key_id, tenant, scope, sha256, label, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (key_id, tenant, scope, digest(api_key), label, now),
            )
        return NewKey(api_key, KeyRecord(key_id, tenant, scope, label, now))

    async def verify(self, presented: str) -> KeyRecord | None:
        if (key_id := key_id_of(presented)) is None:
            return None
        sql = f"SELECT {_COLS}, sha256 FROM api_keys WHERE key_id = ?"
        row = await self.db.read(lambda conn: conn.execute(sql, (key_id,)).fetchone())
        return live_key(presented, row)

    async def list_keys(self, tenant: str | None = None) -> list[KeyRecord]:
        sql, args = list_keys_query("api_keys", _COLS, tenant_column="tenant", mark="?", tenant=tenant)
        rows = await self.db.read(lambda conn: conn.execute(sql, args).fetchall())
        return [key_record(r) for r in rows]

    async def revoke(self, key_id: str) -> KeyRecord | None:
        """Revoke a key (from its next request on); returns it, or None when there is no such key."""
        async with self.db.write() as conn:
            await conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (time.time(), key_id)
            )
            async with conn.execute(f"SELECT {_COLS} FROM api_keys WHERE key_id = ?", (key_id,)) as cur:
                row = await cur.fetchone()
        return key_record(row) if row else None

    async def tenants(self) -> list[str]:
        rows = await self.db.read(lambda conn: conn.execute("SELECT name FROM tenants ORDER BY name").fetchall())
        return [str(r[0]) for r in rows]
