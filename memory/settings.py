"""Typed settings for the memory core, built once at the edge from an environment mapping and optional TOML.

Library code never reads ``os.environ``: the composition root (macupos/cli.py) loads the configuration once
(memory/config/loader.py, which states the precedence) and passes it here.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from memory.errors import SettingsError
from memory.render.markdown import zone

__all__ = ["MemorySettings", "config_path", "home_from_env", "read_config_toml"]

_N = TypeVar("_N", int, float)

DEFAULT_LLM_MODEL = "claude-haiku-4-5"


@dataclass(frozen=True, slots=True)
class MemorySettings:
    home: Path
    claude_config_dir: Path
    codex_home: Path
    timezone: str = "UTC"
    window_days: float = 14.0
    max_handoffs: int = 5
    own_secrets: tuple[str, ...] = ()
    llm_model: str = DEFAULT_LLM_MODEL
    llm_enabled: bool = True
    llm_timeout_s: float = 120.0
    extract_concurrency: int = 2
    tool_output_limit: int = 2000
    busy_timeout_ms: int = 30_000
    hook_budget_s: float = 5.0
    facts_half_life_days: float = 30.0
    facts_push_every_s: float = 600.0  # git sync of the facts folder, when it is a repository with a remote
    facts_pull_every_s: float = 1800.0
    claude_env: Mapping[str, str] = field(default_factory=dict)
    # Folders whose sessions memory leaves alone (memory.redact.privacy; the bot adds its own list in a file).
    private_projects: tuple[Path, ...] = ()
    memory_daily_budget_usd: float | None = None  # handoff extraction's spend cap a day (memory.spend)
    # The memory service (`macupos serve`) this client uses instead of the local database (memory.remote.client);
    # "" keeps memory local. The key is a secret: never in a repr, a log line or an error.
    memory_url: str = ""
    api_key: str = field(default="", repr=False)

    @property
    def remote(self) -> bool:
        """Whether memory lives in a service (``memory_url``) rather than in the local database."""
        return bool(self.memory_url)

    @property
    def outbox_dir(self) -> Path:
        """Redacted transcripts waiting for the service (memory.remote.outbox)."""
        return self.home / "outbox"

    @property
    def db_path(self) -> Path:
        return self.home / "memory.db"

    @property
    def handoffs_dir(self) -> Path:
        return self.home / "handoffs"

    @property
    def claude_projects_dir(self) -> Path:
        return self.claude_config_dir / "projects"

    @property
    def codex_sessions_dir(self) -> Path:
        return self.codex_home / "sessions"

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], toml_path: Path | None = None, *, toml: Mapping[str, Any] | None = None
    ) -> MemorySettings:
        """Build settings from an environment mapping plus the ``[memory]`` table of config.toml: ``toml``, the
        document memory.config.load_config parsed, else the file at ``toml_path`` (or :func:`config_path`).

        Precedence: environment over TOML over defaults (memory/config/loader.py states it for every part). A value
        that cannot be used (not a number, an unknown timezone, a malformed TOML file) raises
        :class:`SettingsError` naming the setting.
        """
        user_home = Path(env.get("HOME") or Path.home())
        for name in ("MACUPOS_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "MACUPOS_CONFIG"):
            raw = env.get(name, "")
            if raw.startswith("~") and _expand(raw) == Path(raw):
                raise SettingsError(name, raw, "names the home folder of a user this machine does not know")
        home = home_from_env(env)
        toml_file = toml_path or config_path(env, home)
        document = read_config_toml(toml_file) if toml is None else toml
        memory_table = document.get("memory", {})
        if not isinstance(memory_table, dict):
            raise SettingsError(f"{toml_file} [memory]", memory_table, "must be a table")
        table: dict[str, Any] = dict(memory_table)

        def pick(env_key: str, toml_key: str, default: Any) -> Any:
            if env.get(env_key):
                return env[env_key]
            return table.get(toml_key, default)

        def number(kind: Callable[[Any], _N], env_key: str, toml_key: str, default: _N) -> _N:
            value = pick(env_key, toml_key, default) if env_key else table.get(toml_key, default)
            name = f"{env_key} (or [memory] {toml_key})" if env_key else f"[memory] {toml_key}"
            try:
                parsed = float(value) if not isinstance(value, bool) else math.nan
            except (TypeError, ValueError):
                parsed = math.nan
            if not math.isfinite(parsed):
                raise SettingsError(name, value, "not a number")
            if kind is int and not parsed.is_integer():
                raise SettingsError(name, value, "not a whole number")
            return kind(parsed)

        timezone = str(pick("MACUPOS_TIMEZONE", "timezone", "UTC"))
        try:
            zone(timezone)
        except ValueError as exc:
            raise SettingsError("MACUPOS_TIMEZONE (or [memory] timezone)", timezone, "not an IANA timezone") from exc

        secrets_raw = pick("MACUPOS_SECRETS", "own_secrets", ())
        if isinstance(secrets_raw, str):
            own = tuple(s for s in (x.strip() for x in secrets_raw.split(",")) if s)
        elif isinstance(secrets_raw, list | tuple):
            own = tuple(str(s) for s in secrets_raw if str(s))
        else:
            raise SettingsError("MACUPOS_SECRETS (or [memory] own_secrets)", secrets_raw, "not a list of strings")
        llm_flag = str(pick("MACUPOS_MEMORY_LLM", "llm_enabled", "1")).lower()
        private = _folders(
            "MACUPOS_PRIVATE_PROJECTS (or [memory] private_projects)",
            pick("MACUPOS_PRIVATE_PROJECTS", "private_projects", ()),
            user_home,
        )
        budget_raw = pick("MACUPOS_MEMORY_DAILY_BUDGET_USD", "daily_budget_usd", None)
        budget = None
        if budget_raw is not None and str(budget_raw).strip() != "":
            budget = number(float, "MACUPOS_MEMORY_DAILY_BUDGET_USD", "daily_budget_usd", 0.0)
            if budget < 0:
                raise SettingsError(
                    "MACUPOS_MEMORY_DAILY_BUDGET_USD (or [memory] daily_budget_usd)", budget_raw, "must not be negative"
                )
        memory_url, api_key = _service(pick("MACUPOS_MEMORY_URL", "url", ""), pick("MACUPOS_API_KEY", "api_key", ""))
        return cls(
            home=home,
            claude_config_dir=_expand(env.get("CLAUDE_CONFIG_DIR") or user_home / ".claude"),
            codex_home=_expand(env.get("CODEX_HOME") or user_home / ".codex"),
            timezone=timezone,
            window_days=number(float, "MACUPOS_MEMORY_WINDOW_DAYS", "window_days", 14.0),
            max_handoffs=min(5, number(int, "MACUPOS_MEMORY_MAX_HANDOFFS", "max_handoffs", 5)),
            own_secrets=own,
            llm_model=str(pick("MACUPOS_MEMORY_MODEL", "llm_model", DEFAULT_LLM_MODEL)),
            llm_enabled=llm_flag not in {"0", "false", "no", "off"},
            llm_timeout_s=number(float, "MACUPOS_MEMORY_LLM_TIMEOUT", "llm_timeout_s", 120.0),
            extract_concurrency=max(1, number(int, "MACUPOS_MEMORY_CONCURRENCY", "extract_concurrency", 2)),
            tool_output_limit=number(int, "", "tool_output_limit", 2000),
            hook_budget_s=number(float, "", "hook_budget_s", 5.0),
            facts_half_life_days=number(float, "MACUPOS_FACTS_HALF_LIFE_DAYS", "facts_half_life_days", 30.0),
            facts_push_every_s=number(float, "MACUPOS_FACTS_PUSH_EVERY_S", "facts_push_every_s", 600.0),
            facts_pull_every_s=number(float, "MACUPOS_FACTS_PULL_EVERY_S", "facts_pull_every_s", 1800.0),
            claude_env={k: v for k, v in env.items() if k.startswith(("ANTHROPIC_", "CLAUDE_"))},
            private_projects=private,
            memory_daily_budget_usd=budget,
            memory_url=memory_url,
            api_key=api_key,
        )


_URL_SETTING = "MACUPOS_MEMORY_URL (or [memory] url)"
_KEY_SETTING = "MACUPOS_API_KEY (or [memory] api_key)"


def _service(raw_url: Any, raw_key: Any) -> tuple[str, str]:
    """The service's base URL (no trailing slash) and key; both "" for local memory. The key is never quoted
    in an error."""
    if not isinstance(raw_url, str):
        raise SettingsError(_URL_SETTING, raw_url, "not a URL")
    if not isinstance(raw_key, str):
        raise SettingsError(_KEY_SETTING, None, "not a string")
    url, key = raw_url.strip(), raw_key.strip()
    if not url:
        return "", ""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise SettingsError(_URL_SETTING, url, "not an http:// or https:// URL with a host")
    if parts.username or parts.password:  # a credential in the URL would end up in logs and errors
        raise SettingsError(_URL_SETTING, None, "must not hold a user or password: put the key in MACUPOS_API_KEY")
    if parts.query or parts.fragment:
        raise SettingsError(_URL_SETTING, url, "must not have a query or fragment")
    if not key:
        raise SettingsError(
            _KEY_SETTING, None, "is required when MACUPOS_MEMORY_URL is set (macupos serve keys create)"
        )
    if any(c.isspace() or ord(c) < 32 or ord(c) > 126 for c in key):
        raise SettingsError(_KEY_SETTING, None, "holds spaces or characters a key never has")
    return url.rstrip("/"), key


def _folders(name: str, raw: Any, user_home: Path) -> tuple[Path, ...]:
    """Absolute folders from a comma-separated string or a TOML list; ``~`` is the environment's HOME."""
    if isinstance(raw, str):
        items = [x.strip() for x in raw.split(",")]
    elif isinstance(raw, list | tuple):
        items = [str(x).strip() for x in raw]
    else:
        raise SettingsError(name, raw, "not a list of folders")
    out: list[Path] = []
    for item in filter(None, items):
        path = user_home / item[2:] if item == "~" or item.startswith("~/") else _expand(item)
        if not path.is_absolute():
            raise SettingsError(name, item, "not an absolute folder (start it with / or ~/)")
        out.append(path)
    return tuple(dict.fromkeys(out))


def read_config_toml(path: Path) -> dict[str, Any]:
    """The parsed config.toml document, or {} when there is none: the one reader of that file."""
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            return dict(tomllib.load(fh))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(str(path), None, f"not a readable TOML file: {exc}") from exc


def config_path(env: Mapping[str, str], home: Path | None = None) -> Path:
    """The one config.toml every part reads: ``$MACUPOS_CONFIG``, else ``<home>/config.toml`` (``home``
    defaults to :func:`home_from_env`'s). It need not exist."""
    explicit = env.get("MACUPOS_CONFIG", "").strip()
    if explicit == "~" or explicit.startswith("~/"):  # the HOME of ``env``, not of this process
        return Path(env.get("HOME") or Path.home()) / explicit[2:]
    if explicit:
        return _expand(explicit)
    return (home if home is not None else home_from_env(env)) / "config.toml"


def home_from_env(env: Mapping[str, str]) -> Path:
    """``$MACUPOS_HOME``, else ``~/.macupos``: known even when another setting is bad."""
    user_home = Path(env.get("HOME") or Path.home())
    return _expand(env.get("MACUPOS_HOME") or user_home / ".macupos")


def _expand(raw: str | Path) -> Path:
    """``raw`` with a leading ``~`` or ``~user`` expanded; as written when there is no such user (from_env
    refuses that, but the home must stay known for reporting it)."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        return Path(raw)
