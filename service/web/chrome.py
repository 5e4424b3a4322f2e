"""What every page's frame needs besides the pages: the favicon, and an unknown address answered inside
the layout (the API's own unknown routes keep their JSON error)."""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.types import Receive, Scope, Send

from service.calls import service_of
from service.web.core import Web

__all__ = ["Chrome"]

STATIC = Path(__file__).parent / "static"
_API_PREFIXES = ("/v1/", "/mcp", "/metrics", "/healthz")


class Chrome:
    def __init__(self, web: Web) -> None:
        self.web = web

    async def favicon(self, request: Request) -> Response:
        return FileResponse(
            STATIC / "favicon.svg", media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"}
        )

    async def not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The router's answer when no route matches (a known path with another method is still 405): a
        browser asking for a page gets the layout's 404, anything else the API's JSON error."""
        request = Request(scope, receive)
        wants_page = (
            scope["type"] == "http"
            and request.method in ("GET", "HEAD")
            and not request.url.path.startswith(_API_PREFIXES)
            and "text/html" in request.headers.get("accept", "")
        )
        if not wants_page:
            raise HTTPException(404)
        login = await self.web.live_login(service_of(request), request)
        response = self.web.error_page(request, 404, "there is no page at this address", login)
        await response(scope, receive, send)
