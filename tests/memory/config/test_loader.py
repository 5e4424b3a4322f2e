"""The one configuration loader: the environment beats `.env`, which beats config.toml, which beats the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import MemorySettings, SettingsError
from memory.config import load_config, public_url, telegram_user_ids


def test_the_environment_beats_dotenv_which_beats_config_toml(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[memory]\ntimezone = "Asia/Tokyo"\nwindow_days = 3\nllm_model = "from-toml"\n', encoding="utf-8"
    )
    (home / ".env").write_text("MACUPOS_TIMEZONE=Europe/Berlin\nMACUPOS_MEMORY_MODEL=from-dotenv\n", encoding="utf-8")
    environ = {"HOME": str(tmp_path), "MACUPOS_HOME": str(home), "MACUPOS_MEMORY_MODEL": "from-environment"}
    config = load_config(environ, tmp_path / "elsewhere")
    assert config.dotenv == home / ".env" and config.config_file == home / "config.toml"
    memory = MemorySettings.from_env(config.env, toml=config.toml)
    assert memory.llm_model == "from-environment"  # the environment over .env
    assert memory.timezone == "Europe/Berlin"  # .env over config.toml
    assert memory.window_days == 3  # config.toml over the default
    assert memory.max_handoffs == 5  # the default


def test_dotenv_may_move_the_home_and_so_config_toml(tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "config.toml").write_text("[relay]\nmax_turns = 7\n", encoding="utf-8")
    (tmp_path / ".env").write_text(f"MACUPOS_HOME={moved}\n", encoding="utf-8")
    config = load_config({"HOME": str(tmp_path)}, tmp_path)
    assert config.config_file == moved / "config.toml" and config.toml == {"relay": {"max_turns": 7}}


@pytest.mark.parametrize(
    ("files", "environ", "says"),
    [
        ({}, {"MACUPOS_ENV_FILE": "missing.env"}, "MACUPOS_ENV_FILE"),
        ({".env": b"\xff\xfe"}, {}, "not UTF-8"),
        ({"config.toml": b"[memory\n"}, {}, "not a readable TOML file"),
    ],
)
def test_a_file_that_cannot_be_read_is_one_settings_error(
    tmp_path: Path, files: dict[str, bytes], environ: dict[str, str], says: str
) -> None:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(SettingsError, match=says):
        load_config({"HOME": str(tmp_path), "MACUPOS_HOME": str(tmp_path), **environ}, tmp_path)


def test_the_shared_values_are_parsed_one_way() -> None:
    assert telegram_user_ids(" 42; 7,42 ,") == (42, 7)  # in order, the first being the owner
    with pytest.raises(SettingsError, match="not a numeric Telegram user id"):
        telegram_user_ids("42,@ann")
    assert public_url("https://memory.example.org/ ") == "https://memory.example.org"
    for bad in ("http://memory.example.org", "https://"):
        with pytest.raises(SettingsError, match="must be an https:// URL"):
            public_url(bad)
