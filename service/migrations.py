"""Numbered, append-only schema migrations of the service's own file, ``$MACUPOS_HOME/service.db``.

Never edit a released entry: add the next one. Opened with
``memory.storage.database.Database.open(path, migrations=MIGRATIONS)``; times are epoch seconds (REAL).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: tuple[str, ...] = (
    # 1: tenants and their API keys, kept only as hashes
    """
    CREATE TABLE tenants(
        name TEXT PRIMARY KEY,
        origin TEXT NOT NULL CHECK(origin IN ('cli', 'register')),
        created_at REAL NOT NULL
    );

    -- A key is `mpk_<key_id>_<secret>`: the id finds the row, the SHA-256 of the whole key is compared.
    CREATE TABLE api_keys(
        key_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL REFERENCES tenants(name),
        scope TEXT NOT NULL CHECK(scope IN ('read', 'write', 'admin')),
        sha256 TEXT NOT NULL,
        label TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        revoked_at REAL
    );
    CREATE INDEX api_keys_tenant ON api_keys(tenant);
    """,
)
