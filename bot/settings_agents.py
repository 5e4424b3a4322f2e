"""The settings of agents running side by side and on their own (docs/agents.md): how many run at once, the
signed trigger endpoint, and the spending caps. Parsed once at the edge by bot.settings.BotSettings.from_env."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from bot.errors import ConfigError
from bot.profiles import check_profile

__all__ = ["budgets", "count", "trigger_settings"]


def count(variable: str, raw: str, default: int) -> int:
    """A whole number from 1 to 64 ("" is the default)."""
    raw = raw.strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ConfigError(variable, f"must be a whole number from 1 to 64, not {raw!r}")
    return int(raw)


def trigger_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """MACUPOS_TRIGGER_PORT (off when unset), _HOST, _SECRET (required with a port), _CHAT, _PROFILE."""
    raw_port = env.get("MACUPOS_TRIGGER_PORT", "").strip()
    profile = env.get("MACUPOS_TRIGGER_PROFILE", "").strip() or "edit"
    try:
        profile = check_profile(profile)
    except ValueError as exc:
        raise ConfigError("MACUPOS_TRIGGER_PROFILE", str(exc)) from exc
    chat = env.get("MACUPOS_TRIGGER_CHAT", "").strip()
    if chat and not chat.lstrip("-").isdigit():
        raise ConfigError("MACUPOS_TRIGGER_CHAT", f"must be a numeric chat id, not {chat!r}")
    out: dict[str, Any] = {"trigger_profile": profile, "trigger_chat": int(chat) if chat else 0}
    if not raw_port:
        return out
    if not raw_port.isdigit() or not 1 <= int(raw_port) <= 65535:
        raise ConfigError("MACUPOS_TRIGGER_PORT", f"must be a TCP port from 1 to 65535, not {raw_port!r}")
    secret = env.get("MACUPOS_TRIGGER_SECRET", "")
    if len(secret) < 16:
        raise ConfigError(
            "MACUPOS_TRIGGER_SECRET",
            "must be set, at least 16 characters, when MACUPOS_TRIGGER_PORT is (make one: openssl rand -hex 32)",
        )
    host = env.get("MACUPOS_TRIGGER_HOST", "").strip() or "127.0.0.1"
    return {**out, "trigger_port": int(raw_port), "trigger_secret": secret, "trigger_host": host}


def budgets(env: Mapping[str, str], projects: Sequence[str]) -> dict[str, Any]:
    """MACUPOS_RUN_BUDGET_USD, MACUPOS_DAILY_BUDGET_USD and MACUPOS_PROJECT_BUDGETS (``billing=5,other=2.5``)."""
    caps: dict[str, float] = {}
    variable = "MACUPOS_PROJECT_BUDGETS"
    for item in (p.strip() for p in env.get(variable, "").split(",")):
        if not item:
            continue
        name, sep, amount = (x.strip() for x in item.partition("="))
        project = next((p for p in projects if p.casefold() == name.casefold()), None)
        if not sep or not name:
            raise ConfigError(variable, f"{item!r} is not a project=USD pair (e.g. billing=5,other=2.5)")
        if project is None:
            raise ConfigError(variable, f"{name!r} is not a project of MACUPOS_PROJECTS")
        caps[project] = _dollars(variable, amount, f"{name}=")
    run, day = (env.get(v, "").strip() for v in ("MACUPOS_RUN_BUDGET_USD", "MACUPOS_DAILY_BUDGET_USD"))
    return {
        "run_budget_usd": _dollars("MACUPOS_RUN_BUDGET_USD", run) if run else None,
        "daily_budget_usd": _dollars("MACUPOS_DAILY_BUDGET_USD", day) if day else None,
        "project_budgets": MappingProxyType(caps),
    }


def _dollars(variable: str, raw: str, what: str = "") -> float:
    """A positive amount of US dollars (``what`` names the item of a list in the message)."""
    try:
        value = float(raw.strip().removeprefix("$"))
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ConfigError(variable, f"{what}{raw.strip()!r} must be a positive amount of US dollars, such as 5 or 2.50")
    return value
