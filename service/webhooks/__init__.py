"""Tenants' signed webhooks: ``handoff.ready``, ``session.ingested`` and ``session.forgotten``, written to a
delivery log in the service's own database and sent, signed with HMAC-SHA256, by a deliverer of the app's
lifespan that retries with backoff. See docs/service.md, "Webhooks"."""

from service.webhooks import events
from service.webhooks.hub import Webhooks, open_webhooks, webhooks_of
from service.webhooks.routes import (
    create_webhook_route,
    delete_webhook_route,
    list_webhooks_route,
    webhook_deliveries_route,
)
from service.webhooks.sign import EVENTS, SIGNATURE_HEADER, Event, check_url, sign, verify
from service.webhooks.store import Delivery, NewWebhook, Webhook, WebhookStore

__all__ = [
    "EVENTS",
    "SIGNATURE_HEADER",
    "Delivery",
    "Event",
    "NewWebhook",
    "Webhook",
    "WebhookStore",
    "Webhooks",
    "check_url",
    "create_webhook_route",
    "delete_webhook_route",
    "events",
    "list_webhooks_route",
    "open_webhooks",
    "sign",
    "verify",
    "webhook_deliveries_route",
    "webhooks_of",
]
