"""Headers every response of the pages carries: a Content-Security-Policy without inline script (our own
files only), no framing but the Mini App's by Telegram's web client, no MIME sniffing, no referrer, and no
caching of pages that show a memory."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "MINI_APP_CSP", "WebHeaders"]

_BASE = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; "
)
CSP = _BASE + "frame-ancestors 'none'"
# Telegram's web clients (web.telegram.org/k and /a) show a Mini App in a frame; its apps open it top-level.
MINI_APP_CSP = _BASE + "frame-ancestors 'self' https://web.telegram.org"
MINI_APP_PATHS = frozenset({"/tg"})
_API_PREFIXES = ("/v1/", "/mcp", "/metrics", "/healthz")


class WebHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path.startswith(_API_PREFIXES):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                if headers.get("content-type", "").startswith("text/html"):
                    mini_app = path in MINI_APP_PATHS
                    headers.setdefault("Content-Security-Policy", MINI_APP_CSP if mini_app else CSP)
                    if not mini_app:
                        headers.setdefault("X-Frame-Options", "DENY")
                    headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, with_headers)
