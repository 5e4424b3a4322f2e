"""What every loopback double shares: serving an aiohttp app on a free 127.0.0.1 port, logging requests, and
the life of a scripted model API (:class:`ApiDouble`)."""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web

__all__ = ["ApiDouble", "Handler", "LoggedRequest", "log_request", "serve"]


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: Any  # parsed JSON when it was JSON, else the raw text


async def log_request(request: web.Request) -> LoggedRequest:
    raw = await request.text()
    try:
        body: Any = json.loads(raw) if raw else None
    except json.JSONDecodeError:
        body = raw
    return LoggedRequest(request.method, request.path, request.query_string, dict(request.headers), body)


async def serve(app: web.Application, *, shutdown_timeout: float = 60.0) -> tuple[web.AppRunner, int]:
    """Start `app` on 127.0.0.1; returns the runner (cleanup() stops it) and the port."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    # Bind the socket ourselves so the free port is known without reaching into aiohttp internals.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, int(sock.getsockname()[1])


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiDouble:
    """A scripted API on 127.0.0.1: ``requests`` holds what reached its model route, ``other_requests``
    what reached any other (answered 404); ``async with`` starts and stops it."""

    shutdown_timeout_s = 60.0

    def __init__(self) -> None:
        self.requests: list[LoggedRequest] = []
        self.other_requests: list[LoggedRequest] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if isinstance(r.body, dict)]

    def _model_route(self) -> tuple[str, Handler]:
        """The POST route the double scripts, and its handler."""
        raise NotImplementedError

    def _no_route(self, path: str) -> dict[str, Any]:
        """The body of the 404 for any other route, in the API's own error shape."""
        return {"error": {"message": f"no route {path}"}}

    async def start(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post(*self._model_route())
        app.router.add_route("*", "/{tail:.*}", self._other)
        self._runner, self.port = await serve(app, shutdown_timeout=self.shutdown_timeout_s)
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _log(self, request: web.Request) -> LoggedRequest:
        return await log_request(request)

    async def _other(self, request: web.Request) -> web.Response:
        self.other_requests.append(await self._log(request))
        return web.json_response(self._no_route(request.path), status=404)
