"""The one configuration loader of every `macupos` command, and the parsers of the values more than one part reads.

Precedence, stated once: **the process environment beats the `.env` file, which beats config.toml, which beats
the built-in defaults.** The composition root (macupos/cli.py) calls :func:`load_config` once with
``os.environ``; every command builds its typed settings from the :class:`Config` it hands down. Nothing here
reads ``os.environ`` itself.

The `.env` file is ``$MACUPOS_ENV_FILE`` if set, else ``./.env``, else ``$MACUPOS_HOME/.env`` (those two
variables come from the environment alone: they say where the file is). config.toml is ``$MACUPOS_CONFIG``,
else ``$MACUPOS_HOME/config.toml``, where the `.env` file may set either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from memory.errors import SettingsError
from memory.settings import config_path, read_config_toml

__all__ = [
    "Config",
    "find_dotenv",
    "load_config",
    "parse_dotenv",
    "public_url",
    "read_dotenv",
    "telegram_user_ids",
]

_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class Config:
    """What :func:`load_config` read: the variables and the parsed config.toml every command's settings use."""

    env: Mapping[str, str] = field(repr=False)  # the environment over the `.env` file's variables: holds secrets
    toml: Mapping[str, Any] = field(default_factory=dict)  # config.toml, parsed; {} when there is none
    dotenv: Path | None = None  # the `.env` file read, if any
    config_file: Path | None = None  # where config.toml is looked for (it need not exist)


def load_config(environ: Mapping[str, str], cwd: Path | None) -> Config:
    """The environment over the `.env` file, and config.toml (see the module's precedence).

    Raises :class:`SettingsError` for a `.env` or config.toml that cannot be read (a missing
    ``$MACUPOS_ENV_FILE``, a file that is not UTF-8, malformed TOML).
    """
    dotenv = find_dotenv(environ, cwd)
    env = {**read_dotenv(dotenv), **environ} if dotenv is not None else dict(environ)
    path = config_path(env)
    return Config(env=MappingProxyType(env), toml=read_config_toml(path), dotenv=dotenv, config_file=path)


def find_dotenv(env: Mapping[str, str], cwd: Path | None) -> Path | None:
    """The ``.env`` to read: ``$MACUPOS_ENV_FILE`` if set, else ``./.env`` (unless ``cwd`` is None: a command
    Claude Code starts in the owner's project, whose own ``.env`` is not ours), else ``$MACUPOS_HOME/.env``."""
    explicit = env.get("MACUPOS_ENV_FILE", "").strip()
    if explicit:
        path = _user_path("MACUPOS_ENV_FILE", explicit)
        if not path.is_file():
            raise SettingsError("MACUPOS_ENV_FILE", None, f"{path} is not a file")
        return path
    candidates = [cwd / ".env"] if cwd is not None else []
    home = env.get("MACUPOS_HOME", "").strip()
    if home:
        candidates.append(_user_path("MACUPOS_HOME", home) / ".env")
    return next((p for p in candidates if p.is_file()), None)


def _user_path(variable: str, raw: str) -> Path:
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # "~name" of a user this machine does not know
        raise SettingsError(variable, raw, "names an unknown user's home folder") from None


def parse_dotenv(text: str) -> dict[str, str]:
    """``KEY=value`` lines as docker, systemd and python-dotenv agree on them: comments, ``export``, quotes.

    No variable expansion: a token or key containing ``$`` stays as written.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _DOTENV_LINE.match(line)
        if match is None:
            continue  # not an assignment: ignored, as python-dotenv does
        out[match.group(1)] = _dotenv_value(match.group(2))
    return out


def _dotenv_value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        body = raw[1:-1]
        return body.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
    # An unquoted value ends at a " #" comment.
    hash_at = raw.find(" #")
    return (raw[:hash_at] if hash_at >= 0 else raw).strip()


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables of one `.env` file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError("MACUPOS_ENV_FILE", None, f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SettingsError("MACUPOS_ENV_FILE", None, f"{path} is not UTF-8 text") from exc
    return parse_dotenv(text)


# Read by the bot and by `macupos serve --local` (the Mini App's login and address): parsed here, once.


def telegram_user_ids(raw: str) -> tuple[int, ...]:
    """``MACUPOS_ALLOWED_USERS``: numeric Telegram user ids, comma- (or semicolon-) separated, in their order
    without repeats (the first is the owner, whose chat unattended runs report to)."""
    ids: dict[int, None] = {}
    for part in raw.replace(";", ",").split(","):
        item = part.strip()
        if not item:
            continue
        if not (item.isascii() and item.isdigit()) or int(item) == 0:  # "²" is a digit int() refuses
            raise SettingsError(
                "MACUPOS_ALLOWED_USERS",
                None,
                f"{item!r} is not a numeric Telegram user id (use ids such as 123456789, not @usernames)",
            )
        ids[int(item)] = None
    return tuple(ids)


def public_url(raw: str, setting: str = "MACUPOS_PUBLIC_URL") -> str:
    """``MACUPOS_PUBLIC_URL`` (or ``--public-url``): an https:// address with a host, no trailing slash."""
    url = raw.strip().rstrip("/")
    if url and (not url.startswith("https://") or not urlsplit(url).hostname):
        raise SettingsError(setting, None, f"{url!r} must be an https:// URL (Telegram opens Mini Apps only over TLS)")
    return url
