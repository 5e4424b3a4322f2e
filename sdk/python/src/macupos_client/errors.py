"""One rooted error hierarchy: every exception this client raises is a :class:`MacuposError`.

An answer of the service that is not a success is an :class:`APIError` carrying the service's own error
body (``{"error": {"code", "message", ...}}``): ``status``, ``code``, ``message`` and any further fields in
``extra`` (``limit`` of a 413, ``line`` of a failed script). No answer at all is a :class:`TransportError`.

The tree::

    MacuposError
        ConfigurationError
        TransportError
            RequestTimedOutError
        APIError
            BadRequestError  400
            AuthenticationError  401
            PermissionDeniedError  403
            NotFoundError  404
            ConflictError  409
            PayloadTooLargeError  413
            UnsupportedMediaTypeError  415
            UnprocessableError  422
                ScriptError  422 script_error
            RateLimitedError  429
            ServerError  5xx
                ServiceUnavailableError  503
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConflictError",
    "MacuposError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestTimedOutError",
    "ScriptError",
    "ServerError",
    "ServiceUnavailableError",
    "TransportError",
    "UnprocessableError",
    "UnsupportedMediaTypeError",
    "error_for",
]


class MacuposError(Exception):
    """The root: catch this to catch everything the client raises."""


class ConfigurationError(MacuposError):
    """The client cannot be made as asked (``from_env`` without ``MACUPOS_MEMORY_URL``, a bad URL)."""


class TransportError(MacuposError):
    """No answer came: the connection failed or broke. The httpx error is the ``__cause__``."""


class RequestTimedOutError(TransportError):
    """No connection, or no answer, within the timeout."""


class APIError(MacuposError):
    """The service answered with an error. ``retry_after`` is the seconds its Retry-After asked for."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str = "",
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{message} (HTTP {status}{', ' + code if code else ''})")
        self.message = message
        self.status = status
        self.code = code
        self.extra: dict[str, Any] = dict(extra or {})
        self.headers: dict[str, str] = dict(headers or {})
        self.retry_after = retry_after


class BadRequestError(APIError):
    pass


class AuthenticationError(APIError):
    """The key is missing, unknown or revoked."""


class PermissionDeniedError(APIError):
    """The key's scope does not allow this (a read key writing, a write key managing keys)."""


class NotFoundError(APIError):
    pass


class ConflictError(APIError):
    pass


class PayloadTooLargeError(APIError):
    pass


class UnsupportedMediaTypeError(APIError):
    pass


class UnprocessableError(APIError):
    pass


class ScriptError(UnprocessableError):
    """A facts script failed (nothing it did was kept); ``line`` is where, 0 when unknown."""

    @property
    def line(self) -> int:
        value = self.extra.get("line")
        return int(value) if isinstance(value, int | float | str) and str(value).isdigit() else 0


class RateLimitedError(APIError):
    """Too many requests for this key; ``retry_after`` says when to try again."""


class ServerError(APIError):
    pass


class ServiceUnavailableError(ServerError):
    """Busy for now (an ingest budget full, a database away); ``retry_after`` says when to try again."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: UnprocessableError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def error_for(status: int, code: str) -> type[APIError]:
    """The class an error answer is raised as."""
    if status == 422 and code == "script_error":
        return ScriptError
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else APIError
