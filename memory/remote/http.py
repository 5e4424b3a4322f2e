"""The memory service's HTTP client: one macupos_client.AsyncClient (sdk/python) per open memory, the key in
a header, every call bounded by a timeout, every failure one typed error whose text is one line and never
holds the key: the SDK's errors are wrapped here, at the boundary.

Used by :mod:`memory.remote.client` (the facade) and :mod:`memory.remote.outbox` (uploads); the routes are those of
``macupos serve`` (docs/service.md).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from macupos_client import AsyncClient, MacuposError
from macupos_client.errors import APIError, RequestTimedOutError, TransportError

from memory.errors import MemoryStoreError

__all__ = [
    "KEY_FIX",
    "RemoteMemoryError",
    "RemoteUnsupportedError",
    "ServiceClient",
    "ServiceUnreachableError",
    "Timeouts",
    "probe",
]

logger = logging.getLogger(__name__)

KEY_FIX = "create one with `macupos serve keys create --tenant NAME` and set MACUPOS_API_KEY"
_RETRY_AFTER_MAX_S = 5.0  # a 429/503 asking for a longer wait is reported, not waited out
_ANY_STATUS = tuple(range(100, 600))  # /healthz: any answer is read here, not raised
T = TypeVar("T")


class RemoteMemoryError(MemoryStoreError):
    """The memory service refused or failed a request. ``status`` is the HTTP status (None when no answer
    came), ``code`` the service's error code (``unauthorized``, ``not_found``, …, or ``unreachable``)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        detail: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail  # the service's own message, masked ("" without one): a rejection's reason
        self.extra: dict[str, Any] = dict(extra or {})  # the service's other error fields (a script's line)

    @property
    def transient(self) -> bool:
        """Worth trying again later as it is: no answer, a timeout, a busy or failing server."""
        return self.status is None or self.status in {408, 425, 429} or self.status >= 500


class ServiceUnreachableError(RemoteMemoryError):
    """No answer: the connection failed or timed out."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None, code="unreachable")


class RemoteUnsupportedError(RemoteMemoryError):
    """An operation of the local memory that a service client cannot do (it works on the local files)."""

    def __init__(self, what: str, instead: str) -> None:
        super().__init__(f"{what} works on the local memory database, not on the memory service: {instead}")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. ``connect`` also bounds how long an unreachable service can hold a caller."""

    connect: float = 5.0
    read: float = 60.0
    upload: float = 310.0  # the service's own upload deadline is 300 s


def _why(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return "no connection within the connect timeout"
    if isinstance(exc, httpx.TimeoutException):
        return "no answer within the timeout"
    cause: BaseException | None = exc
    while cause is not None:  # the OS's own word, under httpcore's and anyio's wrappers
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            return f"cannot connect ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


async def probe(base_url: str, timeout_s: float) -> None:
    """``GET /healthz`` within ``timeout_s`` in all, on bare asyncio streams: a hook learns that the service
    is unreachable without loading an HTTP stack (httpcore's first use costs more than the probe).
    ServiceUnreachableError when no answer came, RemoteMemoryError when it was not 200."""
    parts = urlsplit(base_url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    path = parts.path.rstrip("/") + "/healthz"
    request = f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode()
    where = f"memory service at {base_url}"
    try:
        async with asyncio.timeout(timeout_s):
            tls = ssl.create_default_context() if https else None
            reader, writer = await asyncio.open_connection(host, parts.port or (443 if https else 80), ssl=tls)
            try:
                writer.write(request)
                await writer.drain()
                status_line = await reader.readline()
            finally:
                writer.close()
    except TimeoutError:
        raise ServiceUnreachableError(f"{where}: no answer within {timeout_s:g}s") from None
    except (OSError, ssl.SSLError) as exc:
        why = "connection refused" if isinstance(exc, ConnectionRefusedError) else exc.strerror or str(exc)
        raise ServiceUnreachableError(f"{where}: {why}") from None
    words = status_line.split()
    status = int(words[1]) if len(words) >= 2 and words[1].isdigit() else 0
    if status != 200:
        raise RemoteMemoryError(
            f"{where}: /healthz answered {status or 'no HTTP'}, not 200 (is the URL that of `macupos serve`?)",
            status=status or None,
            code="unhealthy",
        )


class ServiceClient:
    """Open with :meth:`open`; :meth:`aclose` when done. The HTTP is macupos_client's (sdk/python: the one
    client of the service, the same developers use); this class holds memory's side of it: the timeouts,
    and every error of the SDK made one of memory's (:meth:`call`, :meth:`request`), masked and on one line.
    """

    def __init__(self, base_url: str, api_key: str, timeouts: Timeouts = Timeouts()) -> None:
        self.base_url = base_url
        self.timeouts = timeouts
        self._key = api_key
        # Loading the CA bundle costs ~0.2-0.7 s, which a hook cannot spare; a plain-http service needs none.
        # The bare context still verifies, with no CA: TLS to anything would fail closed.
        tls: ssl.SSLContext | bool = True if base_url.startswith("https:") else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            self.sdk = AsyncClient(
                base_url,
                api_key,
                timeout=timeouts.read,
                connect_timeout=timeouts.connect,
                upload_timeout=timeouts.upload,
                # One more try of a 429/503 whose Retry-After is short; a longer wait is reported, not waited out.
                max_retries=1,
                max_retry_wait=_RETRY_AFTER_MAX_S,
                user_agent="macupos-memory-client",
                verify=tls,
                trust_env=False,  # no proxy from the environment sees the key unless the URL names it
            )
        except MacuposError as exc:
            raise RemoteMemoryError(f"memory service: {exc}", code="config") from None

    async def aclose(self) -> None:
        await self.sdk.aclose()

    def _mask(self, text: str) -> str:
        return text.replace(self._key, "<masked>") if self._key and self._key in text else text

    async def healthz(self, timeout_s: float) -> None:
        """Whether the service answers at all, within ``timeout_s`` in all; ServiceUnreachableError if not."""
        try:
            async with asyncio.timeout(timeout_s):
                response = await self.sdk.request("GET", "/healthz", ok=_ANY_STATUS, read_timeout=timeout_s)
        except (TimeoutError, RequestTimedOutError):
            raise ServiceUnreachableError(
                f"memory service at {self.base_url}: no answer within {timeout_s:g}s"
            ) from None
        except TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code != 200:
            raise RemoteMemoryError(
                f"memory service at {self.base_url}: /healthz answered {response.status_code}, not 200 "
                "(is the URL that of `macupos serve`?)",
                status=response.status_code,
                code="unhealthy",
            )

    async def call(self, answer: Awaitable[T]) -> T:
        """``answer`` (a call of :attr:`sdk`) awaited, its errors made memory's: RemoteMemoryError, or
        ServiceUnreachableError when no answer came."""
        try:
            return await answer
        except TransportError as exc:
            raise self._unreachable(exc) from None
        except APIError as exc:
            raise self._error(exc) from None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        """The response when its status is in ``ok``; RemoteMemoryError otherwise (429/503 with a short
        Retry-After are tried once more)."""
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        sent = self.sdk.request(
            method,
            path,
            params=clean,
            content=content,
            json=json_body,
            headers=headers,
            ok=ok,
            read_timeout=read_timeout,
        )
        return await self.call(sent)

    def _unreachable(self, exc: TransportError) -> ServiceUnreachableError:
        cause = exc.__cause__
        why = _why(cause) if isinstance(cause, httpx.HTTPError) else str(exc)
        return ServiceUnreachableError(self._mask(f"memory service at {self.base_url}: {why}"))

    def _error(self, exc: APIError) -> RemoteMemoryError:
        status, message = exc.status, exc.message
        detail = self._mask(message)  # as the service wrote it (a script error may span lines)
        if status == 401:
            message = f"the key is unknown or revoked: {KEY_FIX}"
        elif status == 403:
            message = f"{message or 'forbidden'} (a key of another scope: `macupos serve keys create --scope write`)"
        message = " ".join(self._mask(message).split())
        return RemoteMemoryError(
            f"memory service: {message} (HTTP {status})",
            status=status,
            code=exc.code or str(status),
            detail=detail,
            extra=exc.extra,
        )
