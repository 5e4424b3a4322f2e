"""BotSettings: built once from the environment and an optional .env; the environment wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import BotError
from bot.settings import (
    DEFAULT_API_URL,
    DEFAULT_RPA_TRIGGER,
    BotSettings,
    ConfigError,
    Project,
    find_dotenv,
    parse_dotenv,
)

TOKEN = "123456:AAH-secret-token-value"


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "HOME": str(tmp_path / "home"),
        "MACUPOS_HOME": str(tmp_path / "data"),
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "MACUPOS_ALLOWED_USERS": "42",
    }
    env.update(extra)
    return env


def test_defaults_from_a_minimal_environment(tmp_path: Path) -> None:
    s = BotSettings.from_env(base_env(tmp_path), cwd=tmp_path / "work")
    assert s.token == TOKEN
    assert s.allowed_users == frozenset({42})
    assert s.api_url == DEFAULT_API_URL
    assert s.bot_base_url == "https://api.telegram.org/bot"
    assert s.file_base_url == "https://api.telegram.org/file/bot"
    assert s.projects == (Project("work", tmp_path / "work"),)
    assert s.default_project.name == "work"
    assert s.whisper_model == ""
    assert s.whisper_backend == "faster-whisper"
    assert s.voice_confirm is False
    assert s.webhook_url is None
    assert s.approval_timeout_s == 300.0
    assert s.rpa_trigger == DEFAULT_RPA_TRIGGER
    assert s.home == tmp_path / "data"
    assert s.db_path == tmp_path / "data" / "bot.db"
    assert s.memory.db_path == tmp_path / "data" / "memory.db"


def test_token_never_appears_in_repr_or_str(tmp_path: Path) -> None:
    s = BotSettings.from_env(base_env(tmp_path), cwd=tmp_path)
    assert TOKEN not in repr(s)
    assert TOKEN not in str(s)


def test_agents_inherit_the_environment_without_the_bot_token(tmp_path: Path) -> None:
    s = BotSettings.from_env(base_env(tmp_path, ANTHROPIC_API_KEY="k"), cwd=tmp_path)
    assert "TELEGRAM_BOT_TOKEN" not in s.agent_env
    assert TOKEN not in s.agent_env.values()
    assert s.agent_env["ANTHROPIC_API_KEY"] == "k"
    assert s.agent_env["MACUPOS_HOME"] == str(tmp_path / "data")


@pytest.mark.parametrize("value", ["", "  ", ",,"])
def test_missing_allowlist_refuses_to_start_naming_the_variable(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="MACUPOS_ALLOWED_USERS") as info:
        BotSettings.from_env(base_env(tmp_path, MACUPOS_ALLOWED_USERS=value), cwd=tmp_path)
    assert isinstance(info.value, BotError)
    assert info.value.variable == "MACUPOS_ALLOWED_USERS"


def test_missing_token_refuses_to_start(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    del env["TELEGRAM_BOT_TOKEN"]
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        BotSettings.from_env(env, cwd=tmp_path)


def test_require_false_lets_the_doctor_see_a_missing_token_and_allowlist(tmp_path: Path) -> None:
    s = BotSettings.from_env({"MACUPOS_HOME": str(tmp_path)}, cwd=tmp_path, require=False)
    assert s.token == ""
    assert s.allowed_users == frozenset()


@pytest.mark.parametrize("value", ["@owner", "12a", "-5", "0"])
def test_allowlist_entries_must_be_numeric_user_ids(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="numeric Telegram user id"):
        BotSettings.from_env(base_env(tmp_path, MACUPOS_ALLOWED_USERS=f"42,{value}"), cwd=tmp_path)


def test_several_users_with_spaces(tmp_path: Path) -> None:
    s = BotSettings.from_env(base_env(tmp_path, MACUPOS_ALLOWED_USERS=" 42 , 7,42 "), cwd=tmp_path)
    assert s.allowed_users == frozenset({7, 42})
    assert s.owner_id == 42  # the first written: one parse gives both


def test_the_toml_the_root_loaded_is_the_one_memory_uses(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "config.toml").write_text('[memory]\ntimezone = "Asia/Tokyo"\n', encoding="utf-8")
    env = base_env(tmp_path)
    assert BotSettings.from_env(env, cwd=tmp_path).memory.timezone == "Asia/Tokyo"  # read from the file
    given = {"memory": {"timezone": "Europe/Berlin"}}
    assert BotSettings.from_env(env, toml=given, cwd=tmp_path).memory.timezone == "Europe/Berlin"


def test_api_url_for_a_local_bot_api_server(tmp_path: Path) -> None:
    s = BotSettings.from_env(base_env(tmp_path, MACUPOS_TELEGRAM_API_URL="http://127.0.0.1:8081/"), cwd=tmp_path)
    assert s.bot_base_url == "http://127.0.0.1:8081/bot"
    assert s.file_base_url == "http://127.0.0.1:8081/file/bot"


@pytest.mark.parametrize("value", ["api.telegram.org", "https://api.telegram.org/bot"])
def test_bad_api_url_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="MACUPOS_TELEGRAM_API_URL"):
        BotSettings.from_env(base_env(tmp_path, MACUPOS_TELEGRAM_API_URL=value), cwd=tmp_path)


def test_projects_first_is_default_relative_paths_from_cwd(tmp_path: Path) -> None:
    env = base_env(tmp_path, MACUPOS_PROJECTS=f"eywa={tmp_path}/eywa, web=sites/web ,")
    s = BotSettings.from_env(env, cwd=tmp_path)
    assert s.projects == (Project("eywa", tmp_path / "eywa"), Project("web", tmp_path / "sites" / "web"))
    assert s.default_project.name == "eywa"
    assert s.project("WEB") == Project("web", tmp_path / "sites" / "web")
    assert s.project("nope") is None


def test_a_project_marked_private_is_private_to_memory_too(tmp_path: Path) -> None:
    env = base_env(
        tmp_path,
        MACUPOS_PROJECTS=f"client={tmp_path}/client:private, web=sites/web",
        MACUPOS_PRIVATE_PROJECTS=f"{tmp_path}/elsewhere",
    )
    s = BotSettings.from_env(env, cwd=tmp_path)
    assert s.projects == (Project("client", tmp_path / "client", True), Project("web", tmp_path / "sites" / "web"))
    assert s.memory.private_projects == (tmp_path / "elsewhere", tmp_path / "client")


@pytest.mark.parametrize("value", ["eywa", "=/x", "a b=/x", "eywa=/x,EYWA=/y", "eywa=:private"])
def test_malformed_projects_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="MACUPOS_PROJECTS"):
        BotSettings.from_env(base_env(tmp_path, MACUPOS_PROJECTS=value), cwd=tmp_path)


def test_voice_and_approval_settings(tmp_path: Path) -> None:
    env = base_env(
        tmp_path,
        MACUPOS_WHISPER_MODEL="small.en",
        MACUPOS_WHISPER_BACKEND="openai-whisper",
        MACUPOS_VOICE_CONFIRM="1",
        MACUPOS_WEBHOOK_URL="https://bot.example.org/hook",
        MACUPOS_APPROVAL_TIMEOUT_S="90",
        MACUPOS_RPA_TRIGGER="  Go   Relay ",
        MACUPOS_PUBLIC_URL="https://memory.example.org/",
    )
    s = BotSettings.from_env(env, cwd=tmp_path)
    assert s.public_url == "https://memory.example.org"
    assert (s.whisper_model, s.whisper_backend, s.voice_confirm) == ("small.en", "openai-whisper", True)
    assert s.webhook_url == "https://bot.example.org/hook"
    assert s.approval_timeout_s == 90.0
    assert s.rpa_trigger == "Go Relay"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MACUPOS_WHISPER_BACKEND", "whisper.cpp"),
        ("MACUPOS_VOICE_CONFIRM", "maybe"),
        ("MACUPOS_APPROVAL_TIMEOUT_S", "soon"),
        ("MACUPOS_APPROVAL_TIMEOUT_S", "-1"),
        ("MACUPOS_APPROVAL_TIMEOUT_S", "nan"),
        ("MACUPOS_WEBHOOK_URL", "http://bot.example.org/hook"),
        ("MACUPOS_WEBHOOK_URL", "https://bot.example.org"),
        ("MACUPOS_WEBHOOK_URL", "https://"),
        ("MACUPOS_PUBLIC_URL", "http://memory.example.org"),
        ("MACUPOS_PUBLIC_URL", "https://"),
        ("MACUPOS_ALLOWED_USERS", "42,²"),
    ],
)
def test_bad_values_name_their_variable(tmp_path: Path, variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        BotSettings.from_env(base_env(tmp_path, **{variable: value}), cwd=tmp_path)


def test_dotenv_fills_in_and_the_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "# comment\n"
        "export TELEGRAM_BOT_TOKEN='from-file'\n"
        'MACUPOS_ALLOWED_USERS="1,2"\n'
        "MACUPOS_RPA_TRIGGER=do the thing # trailing comment\n"
        "not an assignment\n",
        encoding="utf-8",
    )
    env = {"MACUPOS_HOME": str(tmp_path / "data"), "MACUPOS_ALLOWED_USERS": "9"}
    s = BotSettings.from_env(env, dotenv=dotenv, cwd=tmp_path)
    assert s.token == "from-file"
    assert s.allowed_users == frozenset({9})
    assert s.rpa_trigger == "do the thing"
    # The merged mapping is what the relay and the CLIs inherit.
    assert s.env["TELEGRAM_BOT_TOKEN"] == "from-file"
    assert s.env["MACUPOS_HOME"] == str(tmp_path / "data")


def test_dotenv_carries_memory_settings_too(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"MACUPOS_HOME={tmp_path / 'from-dotenv'}\nMACUPOS_TIMEZONE=Europe/Berlin\n", encoding="utf-8")
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "MACUPOS_ALLOWED_USERS": "1"}
    s = BotSettings.from_env(env, dotenv=dotenv, cwd=tmp_path)
    assert s.home == tmp_path / "from-dotenv"
    assert s.memory.timezone == "Europe/Berlin"


def test_parse_dotenv_quotes_escapes_and_dollars() -> None:
    parsed = parse_dotenv("A=\"line\\nnext\"\nB='$NOT_EXPANDED'\nC=plain#nocomment\n  D = spaced  \nE=\n")
    assert parsed == {"A": "line\nnext", "B": "$NOT_EXPANDED", "C": "plain#nocomment", "D": "spaced", "E": ""}


def test_find_dotenv_order(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    assert find_dotenv({"MACUPOS_HOME": str(home)}, cwd) is None
    (home / ".env").write_text("A=1\n", encoding="utf-8")
    assert find_dotenv({"MACUPOS_HOME": str(home)}, cwd) == home / ".env"
    (cwd / ".env").write_text("A=2\n", encoding="utf-8")
    assert find_dotenv({"MACUPOS_HOME": str(home)}, cwd) == cwd / ".env"
    explicit = tmp_path / "bot.env"
    explicit.write_text("A=3\n", encoding="utf-8")
    assert find_dotenv({"MACUPOS_ENV_FILE": str(explicit)}, cwd) == explicit
    with pytest.raises(ConfigError, match="MACUPOS_ENV_FILE"):
        find_dotenv({"MACUPOS_ENV_FILE": str(tmp_path / "missing.env")}, cwd)
