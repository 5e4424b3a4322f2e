"""Checking a webhook delivery: the service signs each body with HMAC-SHA256 under the webhook's secret and
sends ``X-Macupos-Signature-256: sha256=<hex>``; a receiver checks it against the raw body it got."""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["SIGNATURE_HEADER", "sign", "verify_signature"]

SIGNATURE_HEADER = "X-Macupos-Signature-256"


def sign(secret: str | bytes, body: bytes) -> str:
    """The header value the service sends for ``body``: ``sha256=<hex>``."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify_signature(secret: str | bytes, body: bytes, header: str | None) -> bool:
    """Whether ``header`` (the delivery's X-Macupos-Signature-256) signs ``body`` under ``secret``; compared
    in constant time. Check the raw bytes received, before parsing them."""
    return bool(header) and hmac.compare_digest(sign(secret, body), str(header).strip())
