"""Webhooks and their delivery log, in the service's own database beside the API keys: ``service.db``
(:class:`SqliteWebhookStore`, migration 2 of service/migrations.py) or PostgreSQL's ``macupos`` schema
(service/webhooks/pg.py, migration 2 of service/pg/migrations.py). Both run the same statements.

A delivery is written (status ``pending``) before it is tried. A try first *claims* it: its ``next_at`` is
pushed past the try's own timeout, so no other deliverer (another server of a fleet) takes it meanwhile, and
one that a crash or a shutdown cut short is taken up again when that time comes. Its outcome then sets
``delivered``, ``failed`` (its tries spent) or the next try's time.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from memory.storage import Database
from service.errors import Conflict
from service.webhooks.sign import Event

__all__ = [
    "Delivery",
    "DeliveryStatus",
    "Due",
    "NewWebhook",
    "SqlWebhookStore",
    "SqliteWebhookStore",
    "Webhook",
    "WebhookStore",
]

DeliveryStatus = Literal["pending", "delivered", "failed"]
Rows = list[tuple[Any, ...]]
Run = Callable[[str, Sequence[Any]], Awaitable[Rows]]
_HOOK_COLS = "webhook_id, {T}, url, events, created_at"
_DELIVERY_COLS = "delivery_id, webhook_id, event, status, attempts, last_status, last_error, created_at, delivered_at"


@dataclass(frozen=True, slots=True)
class Webhook:
    webhook_id: str
    tenant: str
    url: str
    events: tuple[Event, ...]
    created_at: float

    def listing(self) -> dict[str, Any]:
        return {"id": self.webhook_id, "url": self.url, "events": list(self.events), "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class NewWebhook:
    secret: str = field(repr=False)  # shown once, in the answer to its creation
    webhook: Webhook


@dataclass(frozen=True, slots=True)
class Delivery:
    delivery_id: str
    webhook_id: str
    event: str
    status: DeliveryStatus
    attempts: int
    last_status: int | None  # the receiver's HTTP status at the last try; None when it never answered
    last_error: str  # why the last try failed, in our words ("" when it did not)
    created_at: float
    delivered_at: float | None

    def listing(self) -> dict[str, Any]:
        return {
            "id": self.delivery_id,
            "event": self.event,
            "status": self.status,
            "attempts": self.attempts,
            "last_status": self.last_status,
            "last_error": self.last_error,
            "created_at": self.created_at,
            "delivered_at": self.delivered_at,
        }


@dataclass(frozen=True, slots=True)
class Due:
    """A delivery claimed for one try: what to send, where, and the secret to sign it with."""

    delivery_id: str
    webhook_id: str
    event: str
    body: str
    attempts: int  # tries before this one
    url: str
    secret: str = field(repr=False)


def _webhook(row: Sequence[Any]) -> Webhook:
    events = tuple(cast(Event, e) for e in str(row[3]).split())
    return Webhook(str(row[0]), str(row[1]), str(row[2]), events, float(row[4]))


def _delivery(row: Sequence[Any]) -> Delivery:
    return Delivery(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        cast(DeliveryStatus, row[3]),
        int(row[4]),
        int(row[5]) if row[5] is not None else None,
        str(row[6]),
        float(row[7]),
        float(row[8]) if row[8] is not None else None,
    )


class SqlWebhookStore:
    """The statements of both stores; a store names its tables, its tenant column and its placeholder, and
    gives a read and a write transaction. What the hub and the deliverer take (:data:`WebhookStore`)."""

    hooks = "webhooks"
    log = "webhook_deliveries"
    tenant_col = "tenant"
    mark = "?"
    skip_locked = ""  # PostgreSQL: claims of several servers pass each other by

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant

    def _read(self, sql: str, args: Sequence[Any] = ()) -> Awaitable[Rows]:
        raise NotImplementedError

    def _write(self) -> AbstractAsyncContextManager[Run]:
        raise NotImplementedError

    def sql(self, text: str) -> str:
        return text.format(H=self.hooks, D=self.log, T=self.tenant_col, lock=self.skip_locked).replace("?", self.mark)

    def _room(self, count: object) -> None:
        if int(cast(int, count)) >= self.per_tenant:
            raise Conflict(f"this tenant has {count} webhooks, the most it may have; delete one first")

    _COUNT = "SELECT count(*) FROM {H} WHERE {T} = ?"
    _INSERT = "INSERT INTO {H}(webhook_id, {T}, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)"

    async def create(self, tenant: str, url: str, events: Sequence[Event], secret: str, now: float) -> Webhook:
        """A new webhook; Conflict when the tenant has ``per_tenant`` already."""
        hook = Webhook("wh_" + secrets.token_hex(8), tenant, url, tuple(events), now)
        async with self._write() as run:
            self._room((await run(self.sql(self._COUNT), (tenant,)))[0][0])
            await run(self.sql(self._INSERT), (hook.webhook_id, tenant, url, " ".join(events), secret, now))
        return hook

    async def webhooks(self, tenant: str) -> list[Webhook]:
        sql = self.sql(f"SELECT {_HOOK_COLS} FROM {{H}} WHERE {{T}} = ? ORDER BY created_at, webhook_id")
        return [_webhook(r) for r in await self._read(sql, (tenant,))]

    async def get(self, tenant: str, webhook_id: str) -> Webhook | None:
        sql = self.sql(f"SELECT {_HOOK_COLS} FROM {{H}} WHERE webhook_id = ? AND {{T}} = ?")
        rows = await self._read(sql, (webhook_id, tenant))
        return _webhook(rows[0]) if rows else None

    async def delete(self, tenant: str, webhook_id: str) -> bool:
        """Remove the webhook and its delivery log (pending deliveries are never tried again)."""
        async with self._write() as run:
            found = await run(self.sql("SELECT 1 FROM {H} WHERE webhook_id = ? AND {T} = ?"), (webhook_id, tenant))
            if not found:
                return False
            await run(self.sql("DELETE FROM {D} WHERE webhook_id = ?"), (webhook_id,))
            await run(self.sql("DELETE FROM {H} WHERE webhook_id = ?"), (webhook_id,))
        return True

    async def enqueue(self, tenant: str, event: Event, body: Callable[[str], str], now: float) -> list[str]:
        """A pending delivery for each of the tenant's webhooks that wants ``event``; ``body(delivery id)`` is
        its JSON. Returns the delivery ids."""
        ids: list[str] = []
        async with self._write() as run:
            hooks = await run(self.sql("SELECT webhook_id, events FROM {H} WHERE {T} = ?"), (tenant,))
            for webhook_id, events in hooks:
                if event not in str(events).split():
                    continue
                delivery_id = "dl_" + secrets.token_hex(12)
                await run(
                    self.sql(
                        "INSERT INTO {D}(delivery_id, webhook_id, {T}, event, body, status, next_at, created_at)"
                        " VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)"
                    ),
                    (delivery_id, webhook_id, tenant, event, body(delivery_id), now, now),
                )
                ids.append(delivery_id)
        return ids

    async def deliveries(self, tenant: str, webhook_id: str, limit: int) -> list[Delivery]:
        """The newest first."""
        sql = self.sql(
            f"SELECT {_DELIVERY_COLS} FROM {{D}} WHERE webhook_id = ? AND {{T}} = ?"
            " ORDER BY created_at DESC, delivery_id LIMIT ?"
        )
        return [_delivery(r) for r in await self._read(sql, (webhook_id, tenant, limit))]

    async def claim(self, now: float, hold_s: float, limit: int) -> list[Due]:
        async with self._write() as run:
            claimed = await run(
                self.sql(
                    "UPDATE {D} SET next_at = ? WHERE delivery_id IN (SELECT delivery_id FROM {D}"
                    " WHERE status = 'pending' AND next_at <= ? ORDER BY next_at LIMIT ?{lock})"
                    " RETURNING delivery_id, webhook_id, event, body, attempts"
                ),
                (now + hold_s, now, limit),
            )
            hooks: dict[str, tuple[str, str]] = {}
            for webhook_id in {str(r[1]) for r in claimed}:
                rows = await run(self.sql("SELECT url, secret FROM {H} WHERE webhook_id = ?"), (webhook_id,))
                if rows:
                    hooks[webhook_id] = (str(rows[0][0]), str(rows[0][1]))
        return [
            Due(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), *hooks[str(r[1])])
            for r in claimed
            if str(r[1]) in hooks
        ]

    async def finish(
        self,
        delivery_id: str,
        status: DeliveryStatus,
        *,
        http_status: int | None,
        error: str,
        next_at: float,
        now: float,
    ) -> None:
        async with self._write() as run:
            await run(
                self.sql(
                    "UPDATE {D} SET attempts = attempts + 1, status = ?, last_status = ?, last_error = ?,"
                    " next_at = ?, delivered_at = ? WHERE delivery_id = ?"
                ),
                (status, http_status, error, next_at, now if status == "delivered" else None, delivery_id),
            )

    async def next_due(self) -> float | None:
        rows = await self._read(self.sql("SELECT min(next_at) FROM {D} WHERE status = 'pending'"))
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    async def prune(self, before: float) -> int:
        async with self._write() as run:
            gone = await run(
                self.sql("DELETE FROM {D} WHERE status <> 'pending' AND created_at < ? RETURNING delivery_id"),
                (before,),
            )
        return len(gone)


WebhookStore = SqlWebhookStore  # either store: SqliteWebhookStore, or service.webhooks.pg's PgWebhookStore


class SqliteWebhookStore(SqlWebhookStore):
    """In ``service.db``, on the key store's own database (``SqliteKeyStore.db``): opened and closed with it."""

    def __init__(self, db: Database, per_tenant: int) -> None:
        super().__init__(per_tenant)
        self.db = db

    async def create(self, tenant: str, url: str, events: Sequence[Event], secret: str, now: float) -> Webhook:
        # On a plain sqlite3 connection (Database.write_sync), not aiosqlite's: aiosqlite logs every statement
        # with its parameters at DEBUG, and the secret is one of them.
        hook = Webhook("wh_" + secrets.token_hex(8), tenant, url, tuple(events), now)

        def insert(conn: sqlite3.Connection) -> None:
            self._room(conn.execute(self.sql(self._COUNT), (tenant,)).fetchone()[0])
            conn.execute(self.sql(self._INSERT), (hook.webhook_id, tenant, url, " ".join(events), secret, now))

        await self.db.write_sync(insert)
        return hook

    def _read(self, sql: str, args: Sequence[Any] = ()) -> Awaitable[Rows]:
        def fetch(conn: sqlite3.Connection) -> Rows:
            return [tuple(r) for r in conn.execute(sql, tuple(args)).fetchall()]

        return self.db.read(fetch)

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Run]:
        async with self.db.write() as conn:

            async def run(sql: str, args: Sequence[Any]) -> Rows:
                async with conn.execute(sql, tuple(args)) as cur:
                    return [tuple(r) for r in await cur.fetchall()]

            yield run
