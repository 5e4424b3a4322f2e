"""The trigger endpoint's server: uvicorn inside the bot's own asyncio loop, on its own port, under the same caps
on a request head's size and time as the memory service (memory.remote.limited_protocol; bot.triggers is what
it serves)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

import uvicorn

from bot.triggers import Accept, ProjectResolver, TriggerLimits, build_trigger_app
from memory.remote import limited_protocol

__all__ = ["TriggerServer"]

logger = logging.getLogger(__name__)


class TriggerServer:
    """The endpoint under uvicorn, in the caller's event loop: ``await start()`` binds and returns once it
    listens (``port`` then says where, useful with port 0); ``await stop()`` ends it within
    ``stop_timeout_s`` (and a second). It installs no signal handlers: the bot's own shutdown calls stop().
    ``start()`` raises OSError when the port cannot be bound (taken, say).
    """

    def __init__(
        self,
        *,
        secret: str,
        accept: Accept,
        host: str = "127.0.0.1",
        port: int = 0,
        resolve_project: ProjectResolver | None = None,
        limits: TriggerLimits | None = None,
    ) -> None:
        self._limits = limits or TriggerLimits()
        self._app = build_trigger_app(secret, accept, resolve_project=resolve_project, limits=self._limits)
        self._host = host
        self._requested_port = port
        self._server: uvicorn.Server | None = None
        self._socket: socket.socket | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the trigger server has not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the trigger server is already running")
        limits = self._limits
        config = uvicorn.Config(
            self._app,
            host=self._host,
            port=self._requested_port,
            http=limited_protocol(limits.header_bytes, limits.head_timeout_s),
            lifespan="off",
            log_config=None,
            access_log=False,  # our own lines carry the delivery id, event and outcome
            server_header=False,
            date_header=False,
            proxy_headers=False,
            limit_concurrency=limits.max_connections,
            timeout_keep_alive=max(1, round(limits.keep_alive_s)),
            timeout_graceful_shutdown=max(1, round(limits.stop_timeout_s)),
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)  # what uvicorn's serve() sets before startup()
        sock = _bind(self._host, self._requested_port)
        try:
            await server.startup(sockets=[sock])
        except BaseException:
            sock.close()
            raise
        self._server, self._socket = server, sock
        self._port = int(sock.getsockname()[1])
        logger.info("trigger endpoint listening on %s", self.url)

    async def stop(self) -> None:
        server, sock = self._server, self._socket
        if server is None:
            return
        self._server = self._socket = None
        server.should_exit = True
        try:
            async with asyncio.timeout(self._limits.stop_timeout_s + 1):
                await server.shutdown(sockets=[sock] if sock is not None else None)
        except TimeoutError:
            logger.warning("the trigger endpoint did not stop in time: closing its connections")
            for connection in list(server.server_state.connections):
                connection.transport.close()
            for task in list(server.server_state.tasks):
                task.cancel()
        finally:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        logger.info("trigger endpoint stopped")

    async def __aenter__(self) -> TriggerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, made TCP explicitly so asyncio sets TCP_NODELAY on its connections.

    Not service.server.bind: that one is inheritable (for the service's workers), and the bot's children are
    Claude Code CLIs, which must not hold the trigger port open after the bot stops."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
