"""What every loopback double shares: serving an aiohttp app on a free 127.0.0.1 port, and logging requests."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ["LoggedRequest", "log_request", "serve"]


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
