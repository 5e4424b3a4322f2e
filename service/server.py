"""Running the app under uvicorn: the listening socket (bound first, so its real port can be announced),
TLS when a certificate is given, limits on the request head (memory/remote/http_limits.py), owner-only files,
and a log filter that keeps keys out of every log line."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable

import uvicorn

from memory import MemorySettings
from memory.remote import limited_protocol
from service.app import build_app, embedded_store
from service.keys import mask_keys
from service.settings import OWNER_ONLY_UMASK, ServiceSettings
from service.tenants import TenantStore

__all__ = ["OWNER_ONLY_UMASK", "KeyMask", "bind", "serve"]


class KeyMask(logging.Filter):
    """Masks anything shaped like an API key in a log record (its message, arguments and traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_keys(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = mask_keys(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def bind(host: str, port: int) -> socket.socket:
    """The listening socket. Made with proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets
    that say they are TCP, and without it Nagle's algorithm and the client's delayed ACK hold every response
    whose headers and body go out in two writes for 40 ms."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def install_key_mask() -> None:
    mask = KeyMask()
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, KeyMask) for f in handler.filters):
            handler.addFilter(mask)


async def serve(
    settings: ServiceSettings, memory: MemorySettings, *, announce: Callable[[str], None] | None = None
) -> None:
    """Serve until SIGINT or SIGTERM; the lifespan closes every tenant (writing facts snapshots)."""
    install_key_mask()
    os.umask(OWNER_ONLY_UMASK)
    if settings.web.local:
        from service.web.local import LocalTenantStore

        async def owner_store() -> TenantStore:
            return LocalTenantStore(memory)

        app = build_app(settings, owner_store)
    elif settings.database_url:
        from service.pg.store import pg_store  # psycopg only for a server that uses PostgreSQL

        app = build_app(settings, pg_store(settings, memory))
    else:
        app = build_app(settings, embedded_store(settings, memory))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ssl_certfile=str(settings.certfile) if settings.certfile else None,
        ssl_keyfile=str(settings.keyfile) if settings.keyfile else None,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        access_log=False,  # our own access line names the route template, never a raw path or query
        log_config=None,  # the root logging the edge configured (with the key mask) handles uvicorn's too
        server_header=False,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=15,
        lifespan="on",
        http=limited_protocol(settings.limits.header_bytes, settings.limits.head_timeout_s),
    )
    server = uvicorn.Server(config)
    config.load()
    sock = bind(settings.host, settings.port)  # an OSError (port taken) is the caller's one-line error
    host, port = sock.getsockname()[:2]
    scheme = "https" if settings.certfile else "http"
    shown = f"[{host}]" if ":" in str(host) else str(host)
    if announce is not None:
        announce(f"macupos serve: listening on {scheme}://{shown}:{port}")
        if settings.web.local:  # printed once, like Jupyter's: the link logs one browser in, once
            announce(f"macupos serve: open {scheme}://{shown}:{port}/login?token={settings.web.login_token}")
    await server.serve(sockets=[sock])
