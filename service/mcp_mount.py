"""`/mcp`: the stdio server's tools (`eywa_*`, `memory`) over MCP streamable HTTP, scoped to the key's tenant.

One MCP server (memory/mcp_server.py, built without a memory of its own) serves every tenant. Each HTTP
request is authenticated here, its tenant leased, and that tenant's memory put in the request's ASGI
scope, where the tools look for it; so a tool can only ever see the memory of the key that called it.
Stateless streamable HTTP with JSON responses: no session outlives its request, none can be taken over
by another key, and any process of a fleet can answer any request.

A ``GET`` opens an event stream that stays open until the client leaves, holding its tenant open (never
closed by the LRU) all the while: so a key may hold only ``mcp_streams_per_key`` of them at once (per
process; more are answered 429), and each is ended cleanly after ``mcp_stream_s`` (clients reconnect).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from contextlib import AbstractAsyncContextManager

from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from memory import SCOPED_STATE_KEY, MemoryStoreError, ToolState, build_server
from service.calls import ROUTE_KEY, authenticate, error_response, service_of
from service.errors import PayloadTooLarge, RateLimited, RequestTimeout, ServiceError
from service.settings import Limits
from service.tenants import KeyRecord, Tenant

__all__ = ["McpEndpoint"]

logger = logging.getLogger(__name__)


async def _tool_state(tenant: Tenant, writable: bool) -> ToolState:
    state = ToolState(None, local_files=False, writable=writable)
    try:
        state.eywa = await tenant.eywa()
    except MemoryStoreError as exc:
        logger.error("tenant %s: memory unavailable: %s", tenant.name, exc)
        state.error = "the memory store failed to open; the server log says why"
    try:
        state.facts = await tenant.facts()
    except MemoryStoreError as exc:
        logger.error("tenant %s: facts unavailable: %s", tenant.name, exc)
        state.facts_error = "the facts store failed to open; the server log says why"
    return state


class McpEndpoint:
    """The ASGI app mounted at /mcp; :meth:`run` belongs in the app's lifespan."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.server = build_server(None)
        # DNS-rebinding protection is for unauthenticated local servers; every request here needs a key,
        # and behind a proxy the Host is the public name.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=limits.mcp_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = self.server.session_manager
        self.streams: Counter[str] = Counter()  # open GET streams per key id

    def run(self) -> AbstractAsyncContextManager[None]:
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[ROUTE_KEY] = "/mcp"
        request = Request(scope, receive)
        svc = service_of(request)
        stream = request.method == "GET"
        try:
            key = await authenticate(svc, request.headers, "read")
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.limits.mcp_bytes:  # the SDK would answer in plain text
                raise PayloadTooLarge(f"the body is larger than {self.limits.mcp_bytes} bytes")
            if stream and self.streams[key.key_id] >= self.limits.mcp_streams_per_key:
                raise RateLimited(
                    f"this key has {self.limits.mcp_streams_per_key} event streams open already",
                    headers={"Retry-After": "30"},
                )
        except ServiceError as exc:
            await error_response(request, exc)(scope, receive, send)
            return
        if not stream:
            await self._handle(request, key, send, stream=False)
            return
        self.streams[key.key_id] += 1  # no await since the check above: two GETs cannot both pass it
        try:
            await self._handle(request, key, send, stream=True)
        finally:
            self.streams[key.key_id] -= 1
            if self.streams[key.key_id] <= 0:
                del self.streams[key.key_id]

    async def _handle(self, request: Request, key: KeyRecord, send: Send, *, stream: bool) -> None:
        scope, receive = request.scope, request.receive
        svc = service_of(request)
        async with svc.tenants.lease(key.tenant) as tenant:
            scope[SCOPED_STATE_KEY] = await _tool_state(tenant, key.allows("write"))
            started = False

            async def tracking_send(message: Message) -> None:
                nonlocal started
                started = started or message["type"] == "http.response.start"
                await send(message)

            deadline = asyncio.timeout(self.limits.mcp_stream_s if stream else self.limits.upload_timeout_s)
            try:
                async with deadline:
                    await self.manager.handle_request(scope, receive, tracking_send)
            except TimeoutError:
                if not deadline.expired():
                    raise
                if stream and started:  # the stream's time is up: end it cleanly, so the client reconnects
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                elif not started:
                    await error_response(request, RequestTimeout("the request ran past its deadline"))(
                        scope, receive, send
                    )
