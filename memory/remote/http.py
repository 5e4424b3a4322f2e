"""The memory service's HTTP client: one httpx client per open memory, the key in a header, every call
bounded by a timeout, every failure one typed error whose text is one line and never holds the key.

Used by :mod:`memory.remote.client` (the facade) and :mod:`memory.remote.outbox` (uploads); the routes are those of
``macupos serve`` (docs/service.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

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


class RemoteMemoryError(MemoryStoreError):
    """The memory service refused or failed a request. ``status`` is the HTTP status (None when no answer
    came), ``code`` the service's error code (``unauthorized``, ``not_found``, …, or ``unreachable``)."""

    def __init__(self, message: str, *, status: int | None = None, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code

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
    """Open with :meth:`open`; :meth:`aclose` when done. Requests are made with :meth:`request`."""

    def __init__(self, base_url: str, api_key: str, timeouts: Timeouts = Timeouts()) -> None:
        self.base_url = base_url
        self.timeouts = timeouts
        self._key = api_key
        # Loading the CA bundle costs ~0.2-0.7 s, which a hook cannot spare; a plain-http service needs none.
        # The bare context still verifies, with no CA: TLS to anything would fail closed.
        tls: ssl.SSLContext | bool = True if base_url.startswith("https:") else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._http = httpx.AsyncClient(
            base_url=base_url,
            verify=tls,
            headers={"X-API-Key": api_key, "User-Agent": "macupos-memory-client"},
            timeout=httpx.Timeout(timeouts.read, connect=timeouts.connect),
            follow_redirects=False,  # a redirect would resend the key wherever it points
            trust_env=False,  # no proxy from the environment sees the key unless the URL names it
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def _mask(self, text: str) -> str:
        return text.replace(self._key, "<masked>") if self._key and self._key in text else text

    async def healthz(self, timeout_s: float) -> None:
        """Whether the service answers at all, within ``timeout_s`` in all; ServiceUnreachableError if not."""
        try:
            async with asyncio.timeout(timeout_s):
                response = await self._http.get("/healthz", timeout=httpx.Timeout(timeout_s))
        except (TimeoutError, httpx.TimeoutException):
            raise ServiceUnreachableError(
                f"memory service at {self.base_url}: no answer within {timeout_s:g}s"
            ) from None
        except httpx.HTTPError as exc:
            raise ServiceUnreachableError(self._mask(f"memory service at {self.base_url}: {_why(exc)}")) from None
        if response.status_code != 200:
            raise RemoteMemoryError(
                f"memory service at {self.base_url}: /healthz answered {response.status_code}, not 200 "
                "(is the URL that of `macupos serve`?)",
                status=response.status_code,
                code="unhealthy",
            )

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
        timeout = httpx.Timeout(read_timeout or self.timeouts.read, connect=self.timeouts.connect)
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        body = content if json_body is None else json.dumps(json_body).encode()
        sent = dict(headers or {})
        if json_body is not None:
            sent["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                response = await self._http.request(
                    method, path, params=clean, content=body, headers=sent, timeout=timeout
                )
            except httpx.HTTPError as exc:
                raise ServiceUnreachableError(self._mask(f"memory service at {self.base_url}: {_why(exc)}")) from None
            if response.status_code in ok:
                return response
            wait = _retry_after(response)
            if attempt == 1 and wait is not None:
                await asyncio.sleep(wait)
                continue
            raise self._error(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, response: httpx.Response) -> RemoteMemoryError:
        status = response.status_code
        code, message = "", ""
        try:
            err = response.json().get("error", {})
            code, message = str(err.get("code", "")), str(err.get("message", ""))
        except (ValueError, AttributeError):
            message = response.text[:200].strip()
        if status == 401:
            message = f"the key is unknown or revoked: {KEY_FIX}"
        elif status == 403:
            message = f"{message or 'forbidden'} (a key of another scope: `macupos serve keys create --scope write`)"
        message = " ".join(self._mask(message or response.reason_phrase).split())
        return RemoteMemoryError(f"memory service: {message} (HTTP {status})", status=status, code=code or str(status))


def _retry_after(response: httpx.Response) -> float | None:
    if response.status_code not in (429, 503):
        return None
    try:
        wait = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return wait if 0 <= wait <= _RETRY_AFTER_MAX_S else None
