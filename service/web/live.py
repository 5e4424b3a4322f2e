"""Server-sent events that keep the Review and Sessions pages current without a reload.

The routes go through ``web.page`` (login, scope, tenant) like any page, but a stream must not live inside
that wrapper: it holds a tenant lease (a leased tenant is never evicted) and runs under the request
deadline. So the handler only checks its query and returns a ``StreamingResponse`` at once — the lease and
the deadline end there — and the stream's generator then, every ``POLL_S`` seconds:

- checks that the login still stands (a logout or a revoked key ends the stream with ``event: end``);
- leases the tenant for one cheap read (a count and a max over an index, or the list's first rows) under
  the request deadline, and lets it go;
- sends an event when what it read changed, else a comment (so a gone client is noticed on the next send).

A stream ends by itself after ``LIFETIME_S``; the browser's EventSource reconnects after ``RETRY_MS`` (and a
shutting-down server waits at most that long for it). What the pages do with the events: static/live.js.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import Response, StreamingResponse

from memory import Eywa, SessionKind
from memory.handoffs import queue_state
from service.tenants import Tenant
from service.web.core import WebCall, query

__all__ = ["review_events", "sessions_events", "sessions_newer"]

logger = logging.getLogger(__name__)

POLL_S = 2.0
LIFETIME_S = 45.0
RETRY_MS = 3000
NEW_CAP = 20  # "20+ new": the sessions poll reads no more rows than that


def session_filters(call: WebCall) -> dict[str, str]:
    """The sessions list's filters from the query, as the page and its stream read them."""
    r = call.request
    kind = query(r, "kind", limit=20)
    return {
        "project": query(r, "project", limit=200),
        "kind": kind if kind in ("", *SessionKind) else "",
        "since": query(r, "since", limit=10),
        "until": query(r, "until", limit=10),
    }


async def sessions_newer(eywa: Eywa, filters: dict[str, str], after: str) -> int:
    """How many sessions the list (with its filters) now shows above one that started at ``after`` (at most
    NEW_CAP + 1: the page says "20+")."""
    rows = await eywa.list_sessions(**filters, limit=NEW_CAP + 1, offset=0)
    return sum(1 for s in rows if s.at > after)


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _stream(call: WebCall, read: Callable[[Tenant], Awaitable[dict[str, Any]]], name: str) -> Response:
    svc, web, request = call.service, call.web, call.request
    tenant_name = call.login.tenant

    async def events() -> AsyncIterator[bytes]:
        yield f"retry: {RETRY_MS}\n\n".encode()
        last: dict[str, Any] | None = None
        ends = time.monotonic() + LIFETIME_S
        while True:
            if await web.live_login(svc, request) is None:
                yield _event("end", {"reason": "logged out"})
                return
            try:
                async with asyncio.timeout(svc.settings.limits.request_timeout_s):
                    async with svc.tenants.lease(tenant_name) as tenant:
                        now = await read(tenant)
            except Exception:  # a busy or failing memory: end this stream; the browser tries again later
                logger.exception("live %s read failed", name)
                return
            yield _event(name, now) if now != last else b": unchanged\n\n"
            last = now
            if time.monotonic() + POLL_S > ends:
                return
            await asyncio.sleep(POLL_S)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}  # no proxy may hold events back
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        return 0.0
    return value if value == value and abs(value) < 1e12 else 0.0  # no NaN, no absurd times


async def review_events(call: WebCall) -> Response:
    """``event: review``, ``data: {"pending": N, "new": M}``: M handoffs arrived after ``?after=`` (the
    newest ts the page showed), for the queue of ``?project=``."""
    project = query(call.request, "project", limit=200)
    after = _float(query(call.request, "after", limit=40))

    async def read(tenant: Tenant) -> dict[str, Any]:
        state = await queue_state(await tenant.eywa(), project=project or None, after=after)
        return {"pending": state.pending, "new": state.newer}

    return _stream(call, read, "review")


async def sessions_events(call: WebCall) -> Response:
    """``event: sessions``, ``data: {"new": M}``: M sessions (at most 21) of the list's filters started after
    ``?after=`` (the newest start the page showed)."""
    filters = session_filters(call)
    after = query(call.request, "after", limit=40)

    async def read(tenant: Tenant) -> dict[str, Any]:
        return {"new": await sessions_newer(await tenant.eywa(), filters, after)}

    return _stream(call, read, "sessions")
