"""Every HTTP request measured (metrics) and logged: one access line naming the route template, the
status and the time, never the raw path or query (they can hold a tenant's words or a secret)."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.calls import ERROR_KEY, ROUTE_KEY
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

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.in_flight += 1
        try:
            await self.app(scope, receive, observed_send)
        finally:
            self.metrics.in_flight -= 1
            elapsed = time.perf_counter() - started
            route = str(scope.get(ROUTE_KEY, "unmatched"))
            method = str(scope.get("method", ""))
            self.metrics.observe(route, method, status, elapsed)
            if status >= 400:
                self.metrics.error(route, str(scope.get(ERROR_KEY, status)))
            access.info("%s %s %d %.1fms", method, route, status, elapsed * 1000)
