"""One rooted error hierarchy for the service; each error knows its HTTP status and its stable code.

A message reaches the client as ``{"error": {"code", "message"}}``: it names what was wrong with the
request and never a server path, a key or another tenant.

The tree, each with its status (a class defined in another module names it)::

    ServiceError  500 internal
        BadRequest  400
        Unauthorized  401
        Forbidden  403
        NotFound  404
        Conflict  409
        PayloadTooLarge  413
        UnsupportedMediaType  415
        Unprocessable  422
            ScriptFailed  422 script_error
        RateLimited  429
        ServiceUnavailable  503
            DatabaseUnavailable  503, Retry-After  (service.pg.link)
            ReplicaStale  503, Retry-After  (service.pg.replica)
        RequestTimeout  504
        NotImplementedHere  501  (service.webhooks.routes: a key store without webhooks)
        WebError  (service.web.core)
        PoolBusy  (service.pg.pool: never reaches a client)
        SchemaMismatch  (service.pg.link: at start-up)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RequestTimeout",
    "ScriptFailed",
    "ServiceError",
    "ServiceUnavailable",
    "Unauthorized",
    "Unprocessable",
    "UnsupportedMediaType",
    "error_body",
]


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


class ServiceError(Exception):
    """Base of every error the service raises on purpose."""

    status: int = 500
    code: str = "internal"

    def __init__(
        self,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        status: int | None = None,
        code: str | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        self.message = message
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, **self.extra)


class BadRequest(ServiceError):
    status, code = 400, "bad_request"


class Unauthorized(ServiceError):
    status, code = 401, "unauthorized"


class Forbidden(ServiceError):
    status, code = 403, "forbidden"


class NotFound(ServiceError):
    status, code = 404, "not_found"


class Conflict(ServiceError):
    status, code = 409, "conflict"


class PayloadTooLarge(ServiceError):
    status, code = 413, "payload_too_large"


class UnsupportedMediaType(ServiceError):
    status, code = 415, "unsupported_media_type"


class Unprocessable(ServiceError):
    status, code = 422, "unprocessable"


class ScriptFailed(Unprocessable):
    code = "script_error"


class RateLimited(ServiceError):
    status, code = 429, "rate_limited"


class ServiceUnavailable(ServiceError):
    status, code = 503, "unavailable"


class RequestTimeout(ServiceError):
    status, code = 504, "timeout"
