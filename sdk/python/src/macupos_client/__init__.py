"""A client for the Macupos memory service (`macupos serve`): :class:`Client` (blocking) and
:class:`AsyncClient` (asyncio), with the same methods, on httpx.

    from macupos_client import Client

    with Client.from_env() as memory:  # MACUPOS_MEMORY_URL, MACUPOS_API_KEY
        memory.upload_transcript("claude/app/s1.jsonl", open("s1.jsonl", "rb").read())
        for result in memory.get("deploy"):
            print(result.headline)

Every error is a :class:`MacuposError` (macupos_client.errors draws the tree).
"""

from __future__ import annotations

from macupos_client._async import AsyncClient
from macupos_client._sync import Client
from macupos_client.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    MacuposError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    RequestTimedOutError,
    ScriptError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
    UnprocessableError,
    UnsupportedMediaTypeError,
)
from macupos_client.models import (
    ApiKey,
    Delivery,
    GroundingResult,
    HandoffPage,
    HandoffSummary,
    HandoffUpload,
    NewApiKey,
    NewWebhook,
    RateLimit,
    SearchHit,
    Stats,
    TranscriptUpload,
    Webhook,
)
from macupos_client.webhooks import SIGNATURE_HEADER, sign, verify_signature

__version__ = "0.1.0"

__all__ = [
    "SIGNATURE_HEADER",
    "APIError",
    "ApiKey",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "Delivery",
    "GroundingResult",
    "HandoffPage",
    "HandoffSummary",
    "HandoffUpload",
    "MacuposError",
    "NewApiKey",
    "NewWebhook",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimit",
    "RateLimitedError",
    "RequestTimedOutError",
    "ScriptError",
    "SearchHit",
    "ServerError",
    "ServiceUnavailableError",
    "Stats",
    "TranscriptUpload",
    "TransportError",
    "UnprocessableError",
    "UnsupportedMediaTypeError",
    "Webhook",
    "sign",
    "verify_signature",
]
