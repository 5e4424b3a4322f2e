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
    # 2: tenants' webhooks and their delivery log (service/webhooks). The secret is kept as it is, not hashed:
    # the server signs each delivery with it.
    """
    CREATE TABLE webhooks(
        webhook_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL REFERENCES tenants(name),
        url TEXT NOT NULL,
        events TEXT NOT NULL,  -- the event names, space-separated
        secret TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX webhooks_tenant ON webhooks(tenant);

    -- Written before a delivery is tried; `body` is the exact JSON sent and signed, `next_at` when it is
    -- tried next (a try in flight pushes it past its own timeout, so a crashed server's is taken up again).
    CREATE TABLE webhook_deliveries(
        delivery_id TEXT PRIMARY KEY,
        webhook_id TEXT NOT NULL REFERENCES webhooks(webhook_id) ON DELETE CASCADE,
        tenant TEXT NOT NULL,
        event TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL CHECK(status IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        last_status INTEGER,
        last_error TEXT NOT NULL DEFAULT '',
        next_at REAL NOT NULL,
        created_at REAL NOT NULL,
        delivered_at REAL
    );
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_at);
    CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, created_at);
    """,
)
