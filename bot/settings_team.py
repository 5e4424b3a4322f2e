"""The settings of a team room (bot.roles): roles given by configuration, and a per-person daily spending cap.

``MACUPOS_ROLES="approver:@alice,member:@bob,viewer:123456"`` or a ``[roles]`` table in config.toml
(``"@alice" = "approver"``; the environment's entries win). A subject is a numeric Telegram user id (safest:
a username can change hands) or an ``@username``. ``MACUPOS_USER_DAILY_BUDGET_USD`` caps what the
instructions of each person but the owner may spend per day. Parsed once at the edge by
bot.settings.BotSettings.from_env.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from bot.errors import ConfigError

__all__ = ["ASSIGNABLE_ROLES", "subject_of", "team_settings"]

ASSIGNABLE_ROLES: tuple[str, ...] = ("approver", "member", "viewer")  # the owner is MACUPOS_ALLOWED_USERS' first
_USERNAME = re.compile(r"^@?([A-Za-z0-9_]{3,32})$")


def subject_of(raw: str) -> str | None:
    """A user id (digits) or ``@name`` in lower case; None when ``raw`` is neither."""
    text = raw.strip()
    if text.isdigit() and len(text) <= 16:
        return str(int(text))
    found = _USERNAME.match(text)
    return f"@{found.group(1).lower()}" if found else None


def _role(variable: str, subject_raw: str, role_raw: str) -> tuple[str, str]:
    role = role_raw.strip().lower()
    if role not in ASSIGNABLE_ROLES:
        raise ConfigError(variable, f"{role_raw.strip()!r} is not a role (one of {', '.join(ASSIGNABLE_ROLES)})")
    subject = subject_of(subject_raw)
    if subject is None:
        raise ConfigError(variable, f"{subject_raw.strip()!r} is neither a numeric user id nor an @username")
    return subject, role


def team_settings(env: Mapping[str, str], toml: Mapping[str, Any] | None) -> dict[str, Any]:
    """``roles`` (subject → role) and ``user_daily_budget_usd``, as BotSettings fields."""
    roles: dict[str, str] = {}
    table = (toml or {}).get("roles")
    if table is not None:
        if not isinstance(table, Mapping):
            raise ConfigError("[roles]", 'must be a table of "@name" = "approver" | "member" | "viewer"')
        for subject, role in table.items():
            s, r = _role("[roles]", str(subject), str(role))
            roles[s] = r
    variable = "MACUPOS_ROLES"
    for item in (p.strip() for p in env.get(variable, "").split(",")):
        if not item:
            continue
        role, sep, who = item.partition(":")
        if not sep:
            raise ConfigError(variable, f"{item!r} is not role:@user (e.g. approver:@alice,member:123456)")
        s, r = _role(variable, who, role)
        roles[s] = r
    cap_raw = env.get("MACUPOS_USER_DAILY_BUDGET_USD", "").strip()
    cap: float | None = None
    if cap_raw:
        try:
            cap = float(cap_raw.removeprefix("$"))
        except ValueError:
            cap = float("nan")
        if not 0 < cap < float("inf"):
            raise ConfigError(
                "MACUPOS_USER_DAILY_BUDGET_USD", f"{cap_raw!r} must be a positive amount of US dollars, such as 5"
            )
    return {"roles": MappingProxyType(roles), "user_daily_budget_usd": cap}
