"""Fuzzing the bot's settings as `macupos bot` builds them: any .env bytes plus any environment give settings or
one ConfigError / ValueError (each is one ``Error:`` line at startup), never a traceback.

The .env files are generated line by line (``KEY=value`` in every quoting, ``export``, comments, junk) or are
the repository's deploy/.env.example damaged byte by byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from bot.settings import BOT_ENV_VARS, BotSettings, ConfigError, find_dotenv
from memory import read_config_toml
from memory.settings import config_path
from relay.settings import RelaySettings
from tests.fuzzing import ROOT, fuzz_settings, mutated_bytes, records, texts

ENV_EXAMPLE = (ROOT / "deploy" / ".env.example").read_bytes()
_KEYS = [*BOT_ENV_VARS, "MACUPOS_TIMEZONE", "MACUPOS_MEMORY_WINDOW_DAYS", "MACUPOS_CONFIG", "MACUPOS_RELAY_DEADLINE_S"]
_VALUES = st.one_of(
    texts,
    st.sampled_from(
        [
            "123456789",
            "42,43",
            "@someone",
            "²",
            "0",
            "app=/srv/app,site=site",
            "a=",
            "https://api.telegram.org/bot",
            "https://bot.example.org/tg",
            "http://127.0.0.1:1/x",
            "ftp://x",
            "nan",
            "inf",
            "-5",
            "~nosuchuser/x",
            "faster-whisper",
            "yes",
        ]
    ),
)


@st.composite
def _line(draw: st.DrawFn) -> str:
    key = draw(st.one_of(st.sampled_from(_KEYS), texts))
    value = draw(_VALUES)
    quote = draw(st.sampled_from(["", "'", '"']))
    head = draw(st.sampled_from(["", "export ", "  ", "#"]))
    tail = draw(st.sampled_from(["", " # note", "\r"]))
    return f"{head}{key}={quote}{value}{quote}{tail}"


dotenv_bytes = st.one_of(
    st.lists(st.one_of(_line(), texts), min_size=1, max_size=6).map(
        lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")
    ),
    mutated_bytes(ENV_EXAMPLE),
    st.binary(max_size=80),
)
bot_env = records(
    {"TELEGRAM_BOT_TOKEN": st.sampled_from(["123:abc", ""]), "MACUPOS_ALLOWED_USERS": _VALUES},
    {k: _VALUES for k in _KEYS},
    max_extra=3,
).map(lambda env: {k: v.replace("\x00", "") for k, v in env.items()})  # a real environment holds no NUL


def _start(env: dict[str, str], dotenv: Path, cwd: Path) -> object:
    """What `macupos bot` does before it starts: the bot's settings, then the relay's from the same env."""
    settings = BotSettings.from_env(env, dotenv=find_dotenv(env, cwd) or dotenv, cwd=cwd)
    config = config_path(settings.env, settings.home)
    return RelaySettings.from_env(settings.agent_env, read_config_toml(config), memory=settings.memory)


@fuzz_settings()
@given(env=bot_env, dotenv=dotenv_bytes)
@example(env={"TELEGRAM_BOT_TOKEN": "1:a"}, dotenv=b"MACUPOS_ALLOWED_USERS=42\nMACUPOS_HOME=~nosuchuser/x\n")
@example(env={"TELEGRAM_BOT_TOKEN": "1:a", "MACUPOS_ALLOWED_USERS": "42"}, dotenv=b"MACUPOS_PROJECTS=a=~nosuchuser\n")
@example(env={"TELEGRAM_BOT_TOKEN": "1:a", "MACUPOS_ALLOWED_USERS": "42"}, dotenv=b"MACUPOS_APPROVAL_TIMEOUT_S=nan\n")
@example(env={"MACUPOS_ENV_FILE": "~nosuchuser/.env"}, dotenv=b"")
def test_any_dotenv_and_environment_give_settings_or_one_config_error(
    tmp_path: Path, env: dict[str, Any], dotenv: bytes
) -> None:
    path = tmp_path / ".env"
    path.write_bytes(dotenv)
    merged = {"HOME": str(tmp_path), "MACUPOS_HOME": str(tmp_path / "home"), **env}
    try:
        _start(merged, path, tmp_path)
    except ConfigError as exc:
        assert exc.variable, "the error names the variable"
    except ValueError as exc:
        assert str(exc)
