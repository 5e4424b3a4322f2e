"""A server's webhooks: registered, listed and deleted for a tenant, events written to the delivery log, and
the deliverer that sends them. Made in the app's lifespan over the key store's database (:func:`open_webhooks`)
and kept in ``app.state.webhooks``; None with ``serve --local``, which has no tenants and no keys."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette

from memory import MemoryStoreError
from service.errors import ServiceError
from service.keys import SqliteKeyStore
from service.settings import WebhookSettings
from service.webhooks.deliver import Deliverer
from service.webhooks.sign import Event, check_events, check_url, new_secret
from service.webhooks.store import Delivery, NewWebhook, SqliteWebhookStore, Webhook, WebhookStore

__all__ = ["Webhooks", "open_webhooks", "webhooks_of"]

logger = logging.getLogger(__name__)


class Webhooks:
    """A tenant's side of the webhooks, over the store, settings and clock of ``deliverer``."""

    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer
        self.store: WebhookStore = deliverer.store
        self.settings: WebhookSettings = deliverer.settings
        self.clock: Callable[[], float] = deliverer.clock

    def start(self) -> None:
        self.deliverer.start()

    async def close(self) -> None:
        await self.deliverer.close()

    async def create(self, tenant: str, url: object, events: object) -> NewWebhook:
        """A webhook for ``tenant`` (BadRequest for an address or events that are not allowed)."""
        checked_url = check_url(url, allow_http=self.settings.allow_http)
        checked_events = check_events(events)
        secret = new_secret()
        hook = await self.store.create(tenant, checked_url, checked_events, secret, self.clock())
        logger.info("webhook %s created for tenant %s (%s)", hook.webhook_id, tenant, " ".join(hook.events))
        return NewWebhook(secret, hook)

    async def webhooks(self, tenant: str) -> list[Webhook]:
        return await self.store.webhooks(tenant)

    async def get(self, tenant: str, webhook_id: str) -> Webhook | None:
        return await self.store.get(tenant, webhook_id)

    async def delete(self, tenant: str, webhook_id: str) -> bool:
        gone = await self.store.delete(tenant, webhook_id)
        if gone:
            logger.info("webhook %s of tenant %s deleted", webhook_id, tenant)
        return gone

    async def deliveries(self, tenant: str, webhook_id: str, limit: int = 100) -> list[Delivery]:
        return await self.store.deliveries(tenant, webhook_id, limit)

    async def emit(self, tenant: str, event: Event, data: dict[str, Any]) -> list[str]:
        """Write a delivery of ``event`` for each of the tenant's webhooks that wants it, then wake the
        deliverer; the delivery ids. What the event reports has happened already, so a log that cannot be
        written is logged here, not raised into the request that made the event."""
        now = self.clock()

        def body(delivery_id: str) -> str:
            envelope = {"id": delivery_id, "event": event, "created_at": now, "tenant": tenant, "data": data}
            return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)

        try:
            async with asyncio.timeout(self.settings.timeout_s):
                ids = await self.store.enqueue(tenant, event, body, now)
        except (ServiceError, MemoryStoreError, TimeoutError) as exc:
            logger.error("webhook event %s of tenant %s not written to the log: %s", event, tenant, type(exc).__name__)
            return []
        if ids:
            self.deliverer.wake()
        return ids

    async def emit_each(self, tenant: str, event: Event, items: Sequence[dict[str, Any]]) -> None:
        for data in items:
            await self.emit(tenant, event, data)


def open_webhooks(keys: object, settings: WebhookSettings) -> Webhooks | None:
    """The webhooks kept beside ``keys`` (the tenant store's key store): in service.db for the embedded store,
    in PostgreSQL for a fleet; None for a key store without a database (``serve --local``)."""
    if isinstance(keys, SqliteKeyStore):
        return Webhooks(Deliverer(SqliteWebhookStore(keys.db, settings.per_tenant), settings))
    # Looked up, not imported: only a server on PostgreSQL has loaded psycopg and the PostgreSQL key store.
    pg_keys = sys.modules.get("service.pg.keys")
    if pg_keys is not None and isinstance(keys, pg_keys.PgKeyStore):
        from service.webhooks.pg import PgWebhookStore

        return Webhooks(Deliverer(PgWebhookStore(keys.link, settings.per_tenant), settings))
    return None


def webhooks_of(app: Starlette) -> Webhooks | None:
    """The app's webhooks (None with ``serve --local``, or before the lifespan has started)."""
    hooks: Webhooks | None = getattr(app.state, "webhooks", None)
    return hooks
