"""What every route shares: the key check, the per-key rate limit, the tenant lease, the deadline and
the JSON error answer. A route is ``@endpoint(route, scope=…)`` over ``async def (request, call)``."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory import (
    DatabaseLockedError,
    HandoffFormatError,
    MemoryStoreError,
    SessionNotFoundError,
    SourceUnreadableError,
)
from service.errors import (
    BadRequest,
    Forbidden,
    NotFound,
    RateLimited,
    RequestTimeout,
    ServiceError,
    ServiceUnavailable,
    Unauthorized,
    Unprocessable,
)
from service.ingest_process import IngestProcesses
from service.metrics import Metrics
from service.ratelimit import RateLimiter, RateState
from service.settings import ServiceSettings
from service.tenants import KeyRecord, Scope, Tenant, TenantStore

__all__ = [
    "ERROR_KEY",
    "RATE_NOTE",
    "ROUTE_KEY",
    "Call",
    "RateNote",
    "Service",
    "authenticate",
    "brief",
    "endpoint",
    "error_response",
    "key_endpoint",
    "presented_key",
    "service_of",
]

logger = logging.getLogger(__name__)

ROUTE_KEY = "macupos.route"  # the route template, for metrics
ERROR_KEY = "macupos.error"  # the error code answered, for metrics


@dataclass(slots=True)
class RateNote:
    """Where :func:`authenticate` leaves the key's bucket for the `X-RateLimit-*` headers of the answer."""

    state: RateState | None = None


# Set to a fresh note per request by the observe middleware, which adds the headers to whatever answer goes out
# (a route's, an error's, the MCP SDK's). A context variable, not an argument: authenticate is called with the
# request's headers alone by every kind of route, and a task a route starts inherits the same note.
RATE_NOTE: ContextVar[RateNote | None] = ContextVar("macupos_rate_note", default=None)


def _note_rate(state: RateState) -> None:
    note = RATE_NOTE.get()
    if note is not None:
        note.state = state


@dataclass(slots=True)
class Service:
    """The app's shared state: settings, tenants (and their keys), metrics and rate limiters."""

    settings: ServiceSettings
    tenants: TenantStore
    metrics: Metrics
    key_limiter: RateLimiter
    register_limiter: RateLimiter  # per client address
    register_global: RateLimiter  # all addresses together
    ingests: IngestProcesses  # an upload's ingest runs in a child process (service/ingest_process.py)


@dataclass(frozen=True, slots=True)
class Call:
    key: KeyRecord
    tenant: Tenant
    service: Service


def service_of(request: Request) -> Service:
    svc: Service = request.app.state.service
    return svc


def brief(text: str, limit: int = 120) -> str:
    """A caller's text echoed in an error: quoted, and cut when long."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def error_response(request: Request | None, exc: ServiceError) -> JSONResponse:
    if request is not None:
        request.scope[ERROR_KEY] = exc.code
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def presented_key(headers: Any) -> str | None:
    """The key from ``X-API-Key`` or ``Authorization: Bearer``; None when neither is there."""
    key = headers.get("x-api-key")
    if key is None:
        scheme, _, credential = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() == "bearer":
            key = credential
    return key.strip() if key is not None else None


async def authenticate(svc: Service, headers: Any, needed: Scope) -> KeyRecord:
    """The key's record; Unauthorized (401) when missing, unknown or revoked, Forbidden (403) when its scope
    is short, RateLimited (429) when it is over its rate."""
    challenge = {"WWW-Authenticate": 'Bearer realm="macupos"'}
    presented = presented_key(headers)
    if not presented:
        raise Unauthorized("an API key is required: X-API-Key: KEY or Authorization: Bearer KEY", headers=challenge)
    key = await svc.tenants.keys.verify(presented)
    if key is None:
        raise Unauthorized("the API key is not valid (unknown or revoked)", headers=challenge)
    limiter = svc.key_limiter
    if not key.allows(needed):
        if limiter.enabled:  # refused before its rate counts: the bucket as it is, nothing spent
            _note_rate(limiter.peek(key.key_id))
        raise Forbidden(f"this key's scope is {key.scope!r}; this needs {needed!r}")
    if limiter.enabled:  # a server without a limit has no numbers to tell
        state = limiter.acquire(key.key_id)
        _note_rate(state)
        if state.wait > 0:
            retry = RateLimiter.retry_after(state.wait)
            raise RateLimited("too many requests for this key", headers={"Retry-After": retry})
    return key


def memory_error(exc: MemoryStoreError) -> ServiceError:
    """A memory error as the client may see it: never a server path."""
    if isinstance(exc, SessionNotFoundError):
        return NotFound(f"no session or handoff with id {brief(exc.session_id)}")
    if isinstance(exc, HandoffFormatError):
        return BadRequest(f"not a handoff file: {exc.reason}")
    if isinstance(exc, SourceUnreadableError):
        return Unprocessable(exc.reason)
    if isinstance(exc, DatabaseLockedError):
        return ServiceUnavailable("the memory is busy; try again", headers={"Retry-After": "1"})
    logger.error("memory error: %s", exc)
    return ServiceError("the memory store failed; the server log says why")


Handler = Callable[[Request, Call], Awaitable[Response]]
KeyHandler = Callable[[Request, KeyRecord, Service], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]


async def _answered(request: Request, route: str, work: Callable[[], Awaitable[Response]]) -> Response:
    """``work``'s response, or the JSON error it raised: never a traceback."""
    try:
        return await work()
    except ServiceError as exc:
        return error_response(request, exc)
    except MemoryStoreError as exc:
        return error_response(request, memory_error(exc))
    except Exception:  # the top of a request: log it, answer without a traceback
        logger.exception("%s %s failed", request.method, route)
        return error_response(request, ServiceError("internal error; the server log says why"))


async def _within(seconds: float, work: Awaitable[Response]) -> Response:
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await work
    except TimeoutError:
        if not deadline.expired():
            raise  # some other wait gave up: an internal error, not the request's deadline
        raise RequestTimeout("the request ran past its deadline") from None


def endpoint(route: str, *, scope: Scope = "read", upload: bool = False) -> Callable[[Handler], Endpoint]:
    """An authenticated route of one tenant: key → scope → rate → lease → handler, under a deadline."""

    def wrap(handler: Handler) -> Endpoint:
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            request.scope[ROUTE_KEY] = route
            svc = service_of(request)
            limits = svc.settings.limits

            async def leased(key: KeyRecord) -> Response:
                async with svc.tenants.lease(key.tenant) as tenant:
                    return await handler(request, Call(key, tenant, svc))

            async def work() -> Response:
                key = await authenticate(svc, request.headers, scope)
                return await _within(limits.upload_timeout_s if upload else limits.request_timeout_s, leased(key))

            return await _answered(request, route, work)

        return run

    return wrap


def key_endpoint(route: str, *, scope: Scope) -> Callable[[KeyHandler], Endpoint]:
    """An authenticated route about the key's tenant that needs no memory of it (its keys, its webhooks):
    key → scope → rate → handler, under the request deadline, with no lease (no tenant database opened)."""

    def wrap(handler: KeyHandler) -> Endpoint:
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            request.scope[ROUTE_KEY] = route
            svc = service_of(request)

            async def work() -> Response:
                key = await authenticate(svc, request.headers, scope)
                return await _within(svc.settings.limits.request_timeout_s, handler(request, key, svc))

            return await _answered(request, route, work)

        return run

    return wrap
