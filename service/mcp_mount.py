"""`/mcp`: the stdio server's tools (`eywa_*`, `memory`) over MCP streamable HTTP, scoped to the key's tenant.

One MCP server (memory/mcp_server.py, built without a memory of its own) serves every tenant. Each HTTP
request is authenticated here, its tenant leased, and that tenant's memory put in the request's ASGI
scope, where the tools look for it; so a tool can only ever see the memory of the key that called it.
Stateless streamable HTTP with JSON responses: no session outlives its request, none can be taken over
by another key, and any process of a fleet can answer any request.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager

from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from memory.errors import MemoryStoreError
from memory.mcp_server import SCOPED_STATE_KEY, ToolState, build_server
from service.calls import ROUTE_KEY, authenticate, error_response, service_of
from service.errors import PayloadTooLarge, RequestTimeout, ServiceError
from service.settings import Limits
from service.tenants import Tenant

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

    def run(self) -> AbstractAsyncContextManager[None]:
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[ROUTE_KEY] = "/mcp"
        request = Request(scope, receive)
        svc = service_of(request)
        try:
            key = await authenticate(svc, request.headers, "read")
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.limits.mcp_bytes:  # the SDK would answer in plain text
                raise PayloadTooLarge(f"the body is larger than {self.limits.mcp_bytes} bytes")
        except ServiceError as exc:
            await error_response(request, exc)(scope, receive, send)
            return
        async with svc.tenants.lease(key.tenant) as tenant:
            scope[SCOPED_STATE_KEY] = await _tool_state(tenant, key.allows("write"))
            started = False

            async def tracking_send(message: Message) -> None:
                nonlocal started
                started = started or message["type"] == "http.response.start"
                await send(message)

            deadline = asyncio.timeout(self.limits.upload_timeout_s)
            try:
                async with deadline:
                    await self.manager.handle_request(scope, receive, tracking_send)
            except TimeoutError:
                if not deadline.expired():
                    raise
                if not started:
                    await error_response(request, RequestTimeout("the request ran past its deadline"))(
                        scope, receive, send
                    )
