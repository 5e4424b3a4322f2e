"""Which config.toml: one answer for every part (`config_path`)."""

from __future__ import annotations

from pathlib import Path

from memory.settings import MemorySettings, config_path


def test_macupos_config_wins_and_is_expanded(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "MACUPOS_HOME": str(tmp_path / "data"), "MACUPOS_CONFIG": "~/etc/macupos.toml"}
    assert config_path(env) == tmp_path / "etc" / "macupos.toml"


def test_without_it_the_file_is_in_the_data_home(tmp_path: Path) -> None:
    assert config_path({"HOME": str(tmp_path)}) == tmp_path / ".macupos" / "config.toml"
    assert config_path({"MACUPOS_HOME": str(tmp_path / "d")}) == tmp_path / "d" / "config.toml"
    assert config_path({"MACUPOS_CONFIG": "  "}, tmp_path) == tmp_path / "config.toml"  # blank is unset


def test_memory_settings_read_the_file_config_path_names(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "macupos.toml").write_text('[memory]\ntimezone = "Asia/Tokyo"\n', encoding="utf-8")
    env = {"HOME": str(tmp_path), "MACUPOS_CONFIG": "~/etc/macupos.toml"}
    assert MemorySettings.from_env(env).timezone == "Asia/Tokyo"
