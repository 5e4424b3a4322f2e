"""What the sync and the async client share: their options and constructors, a request as data, the retry
rule, and how an answer becomes a result or an error. Neither client does I/O here, so both behave the same."""

from __future__ import annotations

import inspect
import json
import math
import os
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, Self, TypeVar
from urllib.parse import urlsplit

import httpx

from macupos_client.errors import APIError, ConfigurationError, RequestTimedOutError, TransportError, error_for
from macupos_client.models import HandoffPage, RateLimit

__all__ = [
    "Call",
    "ClientBase",
    "Options",
    "Pages",
    "Request",
    "api_error",
    "as_method",
    "env_settings",
    "rate_limit",
    "retry_wait",
    "transport_error",
]

T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)
F = TypeVar("F", bound=Callable[..., Any])

URL_VAR = "MACUPOS_MEMORY_URL"
KEY_VAR = "MACUPOS_API_KEY"


@dataclass(frozen=True, slots=True)
class Options:
    """How a client talks to the service. Timeouts in seconds; ``upload_timeout`` bounds a transcript
    upload and an export (the service's own upload deadline is 300 s)."""

    base_url: str
    api_key: str = field(repr=False)
    timeout: float = 60.0
    connect_timeout: float = 5.0
    upload_timeout: float = 310.0
    # A 429 or 503 with Retry-After is tried again up to max_retries times, when it asks for at most
    # max_retry_wait seconds; a longer wait is raised at once (RateLimitedError.retry_after says how long).
    max_retries: int = 2
    max_retry_wait: float = 30.0
    user_agent: str = "macupos-client/0.1"
    verify: ssl.SSLContext | bool | str = True
    trust_env: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ConfigurationError(f"the service URL must be http(s)://host[:port], not {self.base_url!r}")
        if self.max_retries < 0 or self.max_retry_wait < 0:
            raise ConfigurationError("max_retries and max_retry_wait cannot be negative")

    def client_kwargs(self) -> dict[str, Any]:
        """httpx.Client / httpx.AsyncClient keywords."""
        auth = {"X-API-Key": self.api_key} if self.api_key else {}
        return {
            "base_url": self.base_url.rstrip("/"),
            "headers": {"User-Agent": self.user_agent, **auth, **self.headers},
            "timeout": httpx.Timeout(self.timeout, connect=self.connect_timeout),
            "verify": self.verify,
            "trust_env": self.trust_env,
            "follow_redirects": False,  # a redirect would resend the key wherever it points
        }


def env_settings() -> tuple[str, str]:
    """``MACUPOS_MEMORY_URL`` and ``MACUPOS_API_KEY``: the one place the client reads the environment (its
    ``from_env`` constructors)."""
    url = os.environ.get(URL_VAR, "").strip()
    if not url:
        raise ConfigurationError(f"{URL_VAR} is not set (the memory service's address, e.g. http://127.0.0.1:8750)")
    return url, os.environ.get(KEY_VAR, "").strip()


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    ok: tuple[int, ...] = (200,)
    upload: bool = False  # under upload_timeout instead of timeout
    gzip: bool = False  # content is to be gzipped before sending (the async client does it on a thread)
    timeout_s: float | None = None  # this request's own read timeout, over the options' ones

    @classmethod
    def of(
        cls,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
        upload: bool = False,
        gzip: bool = False,
        timeout_s: float | None = None,
    ) -> Request:
        sent = dict(headers or {})
        if json_body is not None:
            content = json.dumps(json_body).encode()
            sent["Content-Type"] = "application/json"
        return cls(method, path, query(params), content, sent, ok, upload, gzip, timeout_s)

    def timeout(self, options: Options) -> httpx.Timeout:
        read = self.timeout_s or (options.upload_timeout if self.upload else options.timeout)
        return httpx.Timeout(read, connect=min(options.connect_timeout, read))


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """A request and how its answer reads."""

    request: Request
    parse: Callable[[httpx.Response], T]


@dataclass(frozen=True, slots=True)
class Pages(Generic[T]):
    """Handoff pages from ``first`` on: ``after`` is the call for the page after one (None after the last),
    ``items`` what a page gives the caller."""

    first: Call[HandoffPage]
    after: Callable[[HandoffPage], Call[HandoffPage] | None]
    items: Callable[[HandoffPage], Iterable[T]]


def as_method(method: F, describe: Callable[..., Any], owner: str, returns: str = "{}") -> F:
    """``method`` named and documented as ``describe`` (a :mod:`~macupos_client._calls` function), with its
    parameters after ``self`` and ``returns`` around what its call gives: what help() and inspect show."""
    signature = inspect.signature(describe)
    described = str(signature.return_annotation)  # "Call[...]" or "Pages[...]": the annotations are strings
    result = returns.format(described[described.index("[") + 1 : -1])
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__name__ = describe.__name__
    method.__qualname__ = f"{owner}.{describe.__name__}"
    method.__doc__ = describe.__doc__
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[this, *signature.parameters.values()], return_annotation=result
    )
    return method


class ClientBase(Generic[H]):
    """The options, the httpx client of ``_http_class`` on them, and the rule each answer goes through."""

    _http_class: type[H]

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        *,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        upload_timeout: float = 310.0,
        max_retries: int = 2,
        max_retry_wait: float = 30.0,
        user_agent: str = "macupos-client/0.1",
        verify: ssl.SSLContext | bool | str = True,
        trust_env: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.options = Options(
            base_url,
            api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            upload_timeout=upload_timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            user_agent=user_agent,
            verify=verify,
            trust_env=trust_env,
            headers=dict(headers or {}),
        )
        self._http: H = self._http_class(**self.options.client_kwargs())
        self.last_rate_limit: RateLimit | None = None

    @classmethod
    def from_env(cls, **options: Any) -> Self:
        """A client of the service at ``MACUPOS_MEMORY_URL`` with the key in ``MACUPOS_API_KEY``."""
        url, key = env_settings()
        return cls(url, key, **options)

    @property
    def base_url(self) -> str:
        return self.options.base_url

    def _build(self, request: Request, content: bytes | None) -> httpx.Request:
        """One attempt at ``request``, its body ``content`` as it goes on the wire."""
        timeout = request.timeout(self.options)
        return self._http.build_request(
            request.method,
            request.path,
            params=request.params,
            content=content,
            headers=request.headers,
            timeout=timeout,
        )

    @contextmanager
    def _answered(self) -> Iterator[None]:
        """Sending inside: an httpx error raised as the TransportError of no answer, the httpx one its cause."""
        try:
            yield
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.options.base_url) from exc

    def _wait(self, response: httpx.Response, request: Request, retries_done: int) -> float | None:
        """None when ``response`` is the answer; else the seconds to wait before sending again, or the error
        raised when it is not to be sent again. Keeps the answer's rate limit."""
        self.last_rate_limit = rate_limit(response) or self.last_rate_limit
        if response.status_code in request.ok:
            return None
        wait = retry_wait(response, retries_done, self.options)
        if wait is None:
            raise api_error(response)
        return wait


def query(params: Mapping[str, Any] | None) -> dict[str, str]:
    """Query parameters as the service reads them: None left out, datetimes ISO-8601, booleans 1/0."""
    out: dict[str, str] = {}
    for name, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        elif isinstance(value, datetime):
            out[name] = value.isoformat()
        else:
            out[name] = str(value)
    return out


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a Retry-After header asks for (delta-seconds or an HTTP date); None without one."""
    raw = response.headers.get("retry-after", "").strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def retry_wait(response: httpx.Response, retries_done: int, options: Options) -> float | None:
    """How long to wait before sending again, or None to give the answer back as it is."""
    if response.status_code not in (429, 503) or retries_done >= options.max_retries:
        return None
    wait = retry_after(response)
    return wait if wait is not None and wait <= options.max_retry_wait else None


def api_error(response: httpx.Response) -> APIError:
    """The error answer as the exception of its status, with the service's code, message and other fields."""
    status = response.status_code
    code, message, extra = "", "", {}
    try:
        err = response.json().get("error", {})
        if isinstance(err, dict):
            extra = {k: v for k, v in err.items() if k not in {"code", "message"}}
            code, message = str(err.get("code", "")), str(err.get("message", ""))
    except (ValueError, AttributeError):
        message = response.text[:200].strip()
    cls = error_for(status, code)
    return cls(
        message or response.reason_phrase or "error",
        status=status,
        code=code,
        extra=extra,
        headers=dict(response.headers),
        retry_after=retry_after(response),
    )


def transport_error(exc: httpx.HTTPError, base_url: str) -> TransportError:
    """No answer from ``base_url``; the httpx error stays the cause."""
    if isinstance(exc, httpx.TimeoutException):
        return RequestTimedOutError(f"{base_url}: no answer within the timeout ({type(exc).__name__})")
    return TransportError(f"{base_url}: {exc or type(exc).__name__}")


def rate_limit(response: httpx.Response) -> RateLimit | None:
    h = response.headers
    try:
        return RateLimit(int(h["x-ratelimit-limit"]), int(h["x-ratelimit-remaining"]), float(h["x-ratelimit-reset"]))
    except (KeyError, ValueError):
        return None


def checked(response: httpx.Response, ok: tuple[int, ...]) -> httpx.Response:
    if response.status_code not in ok:
        raise api_error(response)
    return response


def json_object(response: httpx.Response) -> dict[str, Any]:
    data = response.json()
    if not isinstance(data, dict):
        raise APIError("the service answered JSON that is not an object", status=response.status_code)
    return data


def json_list(response: httpx.Response) -> list[dict[str, Any]]:
    data = response.json()
    if not isinstance(data, list):
        raise APIError("the service answered JSON that is not a list", status=response.status_code)
    return [d for d in data if isinstance(d, dict)]
