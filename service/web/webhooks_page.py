"""The webhooks page: the tenant's webhooks, each with its recent deliveries, and a Delete button (a write
login). Webhooks are made through the API (``POST /v1/webhooks``), whose answer holds the secret once; a page
would have to show it too, and the secret is no page's business. ``serve --local`` has no tenants and so no
webhooks: the page says they belong to `macupos serve`."""

from __future__ import annotations

import time

from starlette.responses import Response

from service.web.core import WebCall, WebError, query, redirect
from service.webhooks import webhooks_of

__all__ = ["webhooks_action", "webhooks_page"]

RECENT = 10  # deliveries shown under each webhook
SAID = {"deleted": "Webhook deleted; its pending deliveries will not be sent."}


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts is not None else ""


async def webhooks_page(call: WebCall) -> Response:
    hooks = webhooks_of(call.request.app)
    rows = []
    if hooks is not None:
        for hook in await hooks.webhooks(call.login.tenant):
            rows.append((hook, await hooks.deliveries(call.login.tenant, hook.webhook_id, RECENT)))
    done = query(call.request, "done", limit=20)
    return call.render(
        "webhooks.html",
        nav="webhooks",
        available=hooks is not None,
        rows=rows,
        done=SAID.get(done, ""),
        can_write=call.can_write,
        confirm=None,
        when=_when,
    )


async def webhooks_action(call: WebCall) -> Response:
    """``op=ask-delete`` and ``id``: the step before a delete (what goes, "Yes, delete", a way back), as the
    page's Delete button asks; ``op=delete``: the webhook and its delivery log go."""
    hooks = webhooks_of(call.request.app)
    if hooks is None:
        raise WebError("webhooks belong to `macupos serve`; this server keeps none", status=404)
    op = call.form.get("op")
    webhook_id = call.form.get("id", "")[:100]
    if op == "ask-delete":
        hook = await hooks.get(call.login.tenant, webhook_id)
        if hook is None:
            raise WebError("no such webhook (deleted already?)", status=404)
        return call.render("webhooks.html", nav="webhooks", available=True, rows=[], confirm=hook, when=_when)
    if op != "delete":
        raise WebError("unknown webhooks action", status=400)
    if not await hooks.delete(call.login.tenant, webhook_id):
        raise WebError("no such webhook (deleted already?)", status=404)
    return redirect("/webhooks", {"done": "deleted"})
