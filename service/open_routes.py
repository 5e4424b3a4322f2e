"""The routes outside a tenant: liveness, self-service registration, metrics and the OpenAPI document."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from service.bodies import json_object, read_body
from service.calls import ROUTE_KEY, authenticate, error_response, service_of
from service.errors import BadRequest, NotFound, RateLimited, ServiceError
from service.metrics import CONTENT_TYPE
from service.openapi import openapi_document
from service.ratelimit import RateLimiter
from service.tenants import Scope, check_tenant_name

__all__ = ["healthz_route", "metrics_route", "openapi_route", "register_route"]

_REGISTER_BYTES = 4096


async def healthz_route(request: Request) -> Response:
    request.scope[ROUTE_KEY] = "/healthz"
    return JSONResponse({"status": "ok"})


async def register_route(request: Request) -> Response:
    """`POST /v1/register` `{"tenant"?: NAME}` → 201 `{"api_key", "tenant", "key_id", "scope"}`: a new tenant
    with a write key. Off unless the server runs with --allow-register; rate limited per client address."""
    request.scope[ROUTE_KEY] = "/v1/register"
    svc = service_of(request)
    try:
        if not svc.settings.allow_register:
            raise NotFound("self-service registration is off on this server")
        client = request.client.host if request.client else "unknown"
        wait = max(svc.register_limiter.take(client), svc.register_global.take("*"))
        if wait > 0:
            raise RateLimited(
                "too many registrations; try later", headers={"Retry-After": RateLimiter.retry_after(wait)}
            )
        raw = await read_body(request, _REGISTER_BYTES)
        tenant = f"t-{secrets.token_hex(6)}"
        if raw.strip():
            body = json_object(raw)
            wanted = body.get("tenant")
            if wanted is not None:
                if not isinstance(wanted, str):
                    raise BadRequest("tenant must be a string")
                tenant = check_tenant_name(wanted)
        new = await svc.tenants.keys.create_key(
            tenant, "write", label="self-service", origin="register", new_tenant=True
        )
    except ServiceError as exc:
        return error_response(request, exc)
    body = {"api_key": new.api_key, "tenant": tenant, "key_id": new.record.key_id, "scope": new.record.scope}
    return JSONResponse(body, status_code=201, headers={"Cache-Control": "no-store"})


async def _refused(request: Request, route: str, needed: Scope) -> Response | None:
    """Name the route (for the metrics), then check the key: the error response when it falls short, else None."""
    request.scope[ROUTE_KEY] = route
    try:
        await authenticate(service_of(request), request.headers, needed)
    except ServiceError as exc:
        return error_response(request, exc)
    return None


async def metrics_route(request: Request) -> Response:
    """Prometheus text; needs an admin key (the counts are the whole server's, not one tenant's)."""
    if (refused := await _refused(request, "/metrics", "admin")) is not None:
        return refused
    return PlainTextResponse(service_of(request).metrics.render(), media_type=CONTENT_TYPE)


async def openapi_route(request: Request) -> Response:
    if (refused := await _refused(request, "/v1/openapi.json", "read")) is not None:
        return refused
    return JSONResponse(openapi_document(service_of(request).settings))
