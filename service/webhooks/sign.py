"""What a webhook is made of: its events, its secret, the signature of a delivery, and the addresses allowed.

A delivery's ``X-Macupos-Signature-256`` is ``sha256=`` and the hex HMAC-SHA256 of the exact body bytes under
the webhook's secret, as GitHub signs its own webhooks, so a receiver checks it with the code it already has
(:func:`verify` is that check). The secret is kept as it is (the server must sign with it), shown once when the
webhook is made and never again, and never written to a log.

Addresses: ``https://`` anywhere, ``http://`` only to this machine (``127.0.0.1``, ``::1``, ``localhost``)
unless ``WebhookSettings.allow_http``. No user name or password in the URL (it would be shown back in
listings), no fragment. Redirects are not followed (service/webhooks/deliver.py), so a delivery goes only to
the address the tenant registered. A tenant can still name a private address over https; the deliverer
sends it only our own signed JSON and never shows its answer back (just the status code).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from typing import Literal, get_args
from urllib.parse import urlsplit

from service.errors import BadRequest

__all__ = [
    "EVENTS",
    "SECRET_PREFIX",
    "SIGNATURE_HEADER",
    "Event",
    "check_events",
    "check_url",
    "new_secret",
    "sign",
    "verify",
]

Event = Literal["handoff.ready", "session.ingested", "session.forgotten"]
EVENTS: tuple[Event, ...] = get_args(Event)
SECRET_PREFIX = "whsec_"  # lets secret scanners and our own log filters recognise one
SIGNATURE_HEADER = "X-Macupos-Signature-256"
URL_MAX = 2048
_LOCAL_NAMES = {"localhost"}


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def sign(secret: str, body: bytes) -> str:
    """The ``X-Macupos-Signature-256`` value of ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """Whether ``header`` is the signature of ``body`` under ``secret`` (compared in constant time)."""
    return hmac.compare_digest(sign(secret, body), header)


def _is_local(host: str) -> bool:
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: object, *, allow_http: bool) -> str:
    """``url`` when a webhook may be registered for it; BadRequest saying why not."""
    if not isinstance(url, str) or not url.strip():
        raise BadRequest('"url" must be an http(s) address')
    url = url.strip()
    if len(url) > URL_MAX or any(c.isspace() or ord(c) < 32 for c in url):
        raise BadRequest(f'"url" must be one address without spaces, at most {URL_MAX} characters')
    try:
        parts = urlsplit(url)
        _ = parts.port  # ValueError for a port out of range
    except ValueError:
        raise BadRequest('"url" is not an address that can be read') from None
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise BadRequest('"url" must be an http:// or https:// address with a host')
    if parts.username is not None or parts.password is not None:
        raise BadRequest('"url" must not carry a user name or password (it would be shown in listings)')
    if parts.fragment:
        raise BadRequest('"url" must not have a #fragment')
    if parts.scheme == "http" and not allow_http and not _is_local(host):
        raise BadRequest('"url" must be https:// (plain http:// only to 127.0.0.1, ::1 or localhost)')
    return url


def check_events(events: object) -> tuple[Event, ...]:
    """The events asked for, each once, in the order of EVENTS; BadRequest naming an unknown one."""
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise BadRequest(f'"events" must be a non-empty list of: {", ".join(EVENTS)}')
    unknown = sorted(set(events) - set(EVENTS))
    if unknown:
        raise BadRequest(f"unknown event {unknown[0][:80]!r}; the events are: {', '.join(EVENTS)}")
    return tuple(e for e in EVENTS if e in events)
