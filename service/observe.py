"""Every HTTP request measured (metrics) and logged: one access line naming the route template, the
status and the time, never the raw path or query (they can hold a tenant's words or a secret). Here too
an authenticated answer, whatever made it, gets its key's `X-RateLimit-*` headers (service.calls.RATE_NOTE)."""

from __future__ import annotations

import logging
import time

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.calls import ERROR_KEY, RATE_NOTE, ROUTE_KEY, RateNote
from service.metrics import Metrics

__all__ = ["ObserveMiddleware"]

access = logging.getLogger("macupos.service.access")


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        note = RateNote()

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                if note.state is not None:
                    message.setdefault("headers", [])  # optional in ASGI; MutableHeaders needs the list
                    headers = MutableHeaders(scope=message)
                    for name, value in note.state.headers().items():
                        headers.setdefault(name, value)
            await send(message)

        self.metrics.in_flight += 1
        token = RATE_NOTE.set(note)
        try:
            await self.app(scope, receive, observed_send)
        finally:
            RATE_NOTE.reset(token)
            self.metrics.in_flight -= 1
            elapsed = time.perf_counter() - started
            route = str(scope.get(ROUTE_KEY, "unmatched"))
            method = str(scope.get("method", ""))
            self.metrics.observe(route, method, status, elapsed)
            if status >= 400:
                self.metrics.error(route, str(scope.get(ERROR_KEY, status)))
            access.info("%s %s %d %.1fms", method, route, status, elapsed * 1000)
