"""The web pages' settings: how owners log in (API key, the one-time link of ``--local``, Telegram's Mini App)
and where the pages are reached from outside. Built once by `macupos serve` and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["WebSettings"]


@dataclass(frozen=True, slots=True)
class WebSettings:
    enabled: bool = True
    # `--local`: the owner's own $MACUPOS_HOME memory, no API and no keys; the one-time login link's token.
    local: bool = False
    login_token: str = field(default="", repr=False)
    # The HTTPS address the pages are reached at from outside (MACUPOS_PUBLIC_URL): the Mini App's URL.
    public_url: str = ""
    # Telegram's Mini App login: initData signed with this bot's token, from a user on the allowlist.
    telegram_token: str = field(default="", repr=False)
    telegram_users: frozenset[int] = frozenset()
    init_data_max_age_s: float = 3600.0
    session_ttl_s: float = 7 * 86400.0  # a login lasts a week (in memory: a restart logs everyone out)
    max_sessions: int = 10_000
    login_per_minute: int = 10  # login attempts per client address

    @property
    def telegram(self) -> bool:
        """Whether the Mini App login is on (a bot token and at least one allowed user)."""
        return bool(self.telegram_token and self.telegram_users)
