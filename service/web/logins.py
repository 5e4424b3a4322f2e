"""Web logins: a session cookie for each browser that logged in, its CSRF token, and ``--local``'s one-time link.

The cookie carries only a random token (256 bits); what it stands for lives here, in the server's memory,
so a restart logs every browser out and nothing a browser holds can be forged or replayed elsewhere. A
login by API key keeps the key (in memory only) and checks it again on every request: a revoked key ends
its web sessions at once. Each session has its own CSRF token, which every form that changes anything
carries and which is compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from service.tenants import Scope

__all__ = ["COOKIE", "PRE_COOKIE", "Login", "LoginVia", "Logins"]

COOKIE = "macupos_session"
PRE_COOKIE = "macupos_login"  # the login form's own CSRF token (double submit), before any session exists

LoginVia = Literal["key", "local", "telegram"]


@dataclass(slots=True)
class Login:
    token: str = field(repr=False)
    tenant: str
    scope: Scope
    via: LoginVia
    csrf: str = field(repr=False)
    expires: float
    api_key: str = field(default="", repr=False)  # a key login's key, checked again on every request
    who: str = ""  # what the page header shows: the key id, "owner", a Telegram name


class Logins:
    def __init__(self, *, ttl_s: float, max_sessions: int, clock: Callable[[], float] = time.time) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max(1, max_sessions)
        self.clock = clock
        self._sessions: OrderedDict[str, Login] = OrderedDict()
        self._one_time: set[str] = set()

    def create(self, tenant: str, scope: Scope, via: LoginVia, *, api_key: str = "", who: str = "") -> Login:
        login = Login(
            token=secrets.token_urlsafe(32),
            tenant=tenant,
            scope=scope,
            via=via,
            csrf=secrets.token_urlsafe(32),
            expires=self.clock() + self.ttl_s,
            api_key=api_key,
            who=who,
        )
        self._sessions[login.token] = login
        while len(self._sessions) > self.max_sessions:  # the oldest login goes first
            self._sessions.popitem(last=False)
        return login

    def get(self, token: str | None) -> Login | None:
        if not token:
            return None
        login = self._sessions.get(token)
        if login is None:
            return None
        if login.expires <= self.clock():
            del self._sessions[token]
            return None
        return login

    def end(self, token: str | None) -> None:
        if token:
            self._sessions.pop(token, None)

    def end_key(self, api_key: str) -> None:
        """Every session of a key found revoked."""
        for token in [t for t, s in self._sessions.items() if s.api_key == api_key]:
            del self._sessions[token]

    def add_one_time(self, token: str) -> None:
        if token:
            self._one_time.add(token)

    def spend_one_time(self, presented: str) -> bool:
        """Whether ``presented`` is a live one-time login token; it is spent by this call either way."""
        for token in list(self._one_time):
            if hmac.compare_digest(token.encode(), presented.encode()):
                self._one_time.discard(token)
                return True
        return False


def same_token(expected: str, presented: str | None) -> bool:
    """Constant-time comparison of a CSRF token (an empty one never matches)."""
    return bool(expected) and presented is not None and hmac.compare_digest(expected.encode(), presented.encode())
