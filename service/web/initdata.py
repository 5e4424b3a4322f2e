"""Telegram Mini App ``initData``: checked as Telegram's Web Apps documentation specifies.

The data is a query string. Its ``hash`` must be the hex HMAC-SHA256 of the data-check-string (every other
field as ``key=value``, sorted by key, joined by ``\\n``) under the secret key HMAC-SHA256(bot token, key
"WebAppData"). ``auth_date`` must be at most ``max_age_s`` old (and not from the future), and the user must be
on the allowlist. Another bot's data fails the HMAC (its token is another key); so does any edited field.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

__all__ = ["InitDataError", "TelegramUser", "check_init_data", "sign_init_data"]

MAX_INIT_DATA = 8192  # characters: a real one is a few hundred
_FUTURE_SLACK_S = 60.0  # a client clock a minute ahead of ours is not a forgery


class InitDataError(ValueError):
    """initData refused; ``reason`` says why (shown to the user: it names no secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TelegramUser:
    id: int
    first_name: str
    username: str
    auth_date: int


def _secret(bot_token: str) -> bytes:
    return hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()


def _check_string(fields: dict[str, str]) -> str:
    return "\n".join(f"{k}={fields[k]}" for k in sorted(fields))


def sign_init_data(fields: dict[str, str], bot_token: str) -> str:
    """``fields`` as Telegram's client would send them, signed with ``bot_token`` (tests and tools)."""
    digest = hmac.new(_secret(bot_token), _check_string(fields).encode(), hashlib.sha256).hexdigest()
    return urlencode({**fields, "hash": digest})


def check_init_data(
    raw: str, bot_token: str, allowed: Collection[int], *, max_age_s: float = 3600.0, now: float | None = None
) -> TelegramUser:
    """The Telegram user ``raw`` vouches for; InitDataError when it is forged, stale or not allowed."""
    if not raw or len(raw) > MAX_INIT_DATA:
        raise InitDataError("no Telegram login data (open this page from the bot's /memory button)")
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise InitDataError("the Telegram login data is malformed") from None
    fields: dict[str, str] = {}
    for key, value in pairs:
        if key in fields:  # two values for one field: which one did Telegram sign?
            raise InitDataError("the Telegram login data is malformed")
        fields[key] = value
    given = fields.pop("hash", "")
    if not bot_token:
        raise InitDataError("Telegram login is not configured on this server")
    expected = hmac.new(_secret(bot_token), _check_string(fields).encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given.lower()):
        raise InitDataError("the Telegram login data is not signed for this bot")
    try:
        auth_date = int(fields.get("auth_date", ""))
    except ValueError:
        raise InitDataError("the Telegram login data has no valid auth_date") from None
    clock = time.time() if now is None else now
    if clock - auth_date > max_age_s:
        raise InitDataError("the Telegram login data is too old; open the page from the bot again")
    if auth_date - clock > _FUTURE_SLACK_S:
        raise InitDataError("the Telegram login data is dated in the future")
    try:
        user = json.loads(fields.get("user", ""))
        user_id = user["id"]
    except (ValueError, TypeError, KeyError):
        raise InitDataError("the Telegram login data names no user") from None
    if not isinstance(user_id, int) or isinstance(user_id, bool):
        raise InitDataError("the Telegram login data names no user")
    if user_id not in allowed:
        raise InitDataError("this Telegram account is not on the bot's allowlist")
    return TelegramUser(user_id, str(user.get("first_name", "")), str(user.get("username", "")), auth_date)
