"""The ASGI app: routes, the observe middleware, optional CORS, JSON errors, and the lifespan that opens
the tenant store (and the MCP session manager) and closes every tenant at the end."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memory import MemorySettings
from service.calls import Service, error_response
from service.embedded import EmbeddedTenantStore
from service.errors import NotFound, ServiceError
from service.export import export_route
from service.ingest_process import IngestProcesses
from service.keys import SqliteKeyStore
from service.mcp_mount import McpEndpoint
from service.metrics import Metrics
from service.observe import ObserveMiddleware
from service.open_routes import healthz_route, metrics_route, openapi_route, register_route
from service.ratelimit import RateLimiter
from service.routes_keys import create_key_route, list_keys_route, revoke_key_route
from service.routes_read import (
    facts_tier_route,
    get_route,
    handoffs_route,
    search_route,
    session_route,
    stats_route,
)
from service.routes_write import forget_route, handoff_upload_route, script_route, transcript_upload_route
from service.settings import ServiceSettings
from service.tenants import TenantStore
from service.webhooks import (
    create_webhook_route,
    delete_webhook_route,
    list_webhooks_route,
    open_webhooks,
    webhook_deliveries_route,
)

__all__ = ["StoreFactory", "build_app", "embedded_store"]

logger = logging.getLogger(__name__)

StoreFactory = Callable[[], Awaitable[TenantStore]]


def embedded_store(settings: ServiceSettings, memory: MemorySettings) -> StoreFactory:
    """The default store: one SQLite memory per tenant under ``tenants/``, keys in ``service.db``."""

    async def open_store() -> TenantStore:
        keys = await SqliteKeyStore.open(settings.db_path)
        base = replace(memory, llm_enabled=settings.use_llm)
        return EmbeddedTenantStore(base, settings.tenants_dir, keys, max_open=settings.limits.max_open_tenants)

    return open_store


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(request, NotFound("no such route"))
    code = "method_not_allowed" if exc.status_code == 405 else "http_error"
    return error_response(request, ServiceError(exc.detail or "request refused", status=exc.status_code, code=code))


async def _crash(request: Request, exc: Exception) -> Response:
    logger.error("unhandled error on %s: %s", request.method, type(exc).__name__)
    return error_response(request, ServiceError("internal error; the server log says why"))


def build_app(settings: ServiceSettings, open_store: StoreFactory) -> Starlette:
    metrics = Metrics()
    limits = settings.limits
    mcp = McpEndpoint(limits)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tenants = await open_store()
        app.state.service = Service(
            settings=settings,
            tenants=tenants,
            metrics=metrics,
            key_limiter=RateLimiter(limits.rate_per_s, limits.rate_burst),
            register_limiter=RateLimiter(limits.register_per_hour / 3600, limits.register_per_hour),
            register_global=RateLimiter(limits.register_global_per_hour / 3600, limits.register_global_per_hour),
            ingests=IngestProcesses(limits.ingest_in_process_bytes),
        )
        app.state.service.ingests.start()
        app.state.webhooks = open_webhooks(tenants.keys, settings.webhooks)  # None with --local
        if app.state.webhooks is not None:
            app.state.webhooks.start()
        metrics.gauge("macupos_tenants_open", "Tenants whose memory is open now.", lambda: float(tenants.open_count()))
        try:
            async with mcp.run():
                yield
        finally:
            try:
                if app.state.webhooks is not None:  # before the tenants: its log is in the key store's database
                    await app.state.webhooks.close()
                await app.state.service.ingests.close()
            finally:
                await tenants.close()

    routes: list[BaseRoute] = [
        Route("/healthz", healthz_route, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
        Route("/v1/openapi.json", openapi_route, methods=["GET"]),
        Route("/v1/register", register_route, methods=["POST"]),
        Route("/v1/transcripts", transcript_upload_route, methods=["POST"]),
        Route("/v1/handoffs", handoff_upload_route, methods=["POST"]),
        Route("/v1/handoffs", handoffs_route, methods=["GET"]),
        Route("/v1/get", get_route, methods=["GET"]),
        Route("/v1/search", search_route, methods=["GET"]),
        Route("/v1/sessions/{id:path}", session_route, methods=["GET"]),
        Route("/v1/sessions/{id:path}", forget_route, methods=["DELETE"]),
        Route("/v1/script", script_route, methods=["POST"]),
        Route("/v1/export", export_route, methods=["GET"]),
        Route("/v1/stats", stats_route, methods=["GET"]),
        Route("/v1/webhooks", create_webhook_route, methods=["POST"]),
        Route("/v1/webhooks", list_webhooks_route, methods=["GET"]),
        Route("/v1/webhooks/{id}", delete_webhook_route, methods=["DELETE"]),
        Route("/v1/webhooks/{id}/deliveries", webhook_deliveries_route, methods=["GET"]),
        Route("/v1/facts/tier", facts_tier_route, methods=["GET"]),
        Route("/v1/keys", create_key_route, methods=["POST"]),
        Route("/v1/keys", list_keys_route, methods=["GET"]),
        Route("/v1/keys/{id}", revoke_key_route, methods=["DELETE"]),
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
    ]
    if settings.web.local:  # the owner's own memory: the pages alone (no keys, so no API and no MCP)
        routes = [r for r in routes if getattr(r, "path", "") == "/healthz"]
    if settings.web.enabled:
        from service.web.routes import Chrome, Web, WebHeaders, web_routes  # Jinja2 only when pages are served

        web = Web(settings.web)
        routes += web_routes(web)
    middleware = [Middleware(ObserveMiddleware, metrics=metrics)]
    if settings.web.enabled:
        middleware.append(Middleware(WebHeaders))
    if settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=[
                    "X-API-Key",
                    "Authorization",
                    "Content-Type",
                    "Content-Encoding",
                    "Mcp-Protocol-Version",
                ],
                expose_headers=["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"],
                max_age=600,
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _crash},
    )
    if settings.web.enabled:
        app.router.default = Chrome(web).not_found  # an unknown address: a page inside the layout
    return app
