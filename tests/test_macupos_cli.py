"""The `macupos` command's root (macupos/cli.py): every package's commands, one configuration for all of them,
and the older `python -m bot.cli` way in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from macupos.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_the_root_mounts_every_command() -> None:
    assert main.list_commands(click.Context(main)) == ["bot", "doctor", "memory", "relay", "serve", "trigger"]


def test_serve_local_reads_the_same_dotenv_as_the_bot(tmp_path: Path) -> None:
    dotenv = tmp_path / "bot.env"
    dotenv.write_text("MACUPOS_ALLOWED_USERS=42,@ann\n", encoding="utf-8")
    env: dict[str, str | None] = {"MACUPOS_HOME": str(tmp_path / "home"), "MACUPOS_ENV_FILE": str(dotenv)}
    env |= {"MACUPOS_ALLOWED_USERS": None, "MACUPOS_PUBLIC_URL": None, "MACUPOS_MEMORY_URL": None}  # unset
    result = CliRunner().invoke(main, ["serve", "--local"], env=env, catch_exceptions=False)
    assert result.exit_code != 0 and "'@ann' is not a numeric Telegram user id" in result.output


def test_an_option_beats_the_configuration(tmp_path: Path) -> None:
    env = {"MACUPOS_HOME": str(tmp_path / "home"), "MACUPOS_PUBLIC_URL": "https://memory.example.org"}
    result = CliRunner().invoke(
        main, ["serve", "--local", "--public-url", "http://plain.example.org"], env=env, catch_exceptions=False
    )
    assert result.exit_code != 0 and "'http://plain.example.org' must be an https:// URL" in result.output


def test_the_older_module_way_in_still_runs_the_root(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert all(f"  {name} " in done.stdout for name in ("bot", "doctor", "memory", "relay", "serve", "trigger"))


def test_hooks_and_the_mcp_server_never_read_the_projects_own_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code starts them in the owner's project: its .env is the project's, not Macupos configuration."""
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (project / ".env").write_bytes(b"ANTHROPIC_API_KEY=\xff\xfe not ours\n")  # unreadable as ours: loud if read
    monkeypatch.chdir(project)
    env = {"MACUPOS_HOME": str(home), "MACUPOS_ENV_FILE": None}
    runner = CliRunner()
    hook = runner.invoke(main, ["memory", "hook", "session-start"], input="{}", env=env, catch_exceptions=False)
    stats = runner.invoke(main, ["memory", "stats"], env=env, catch_exceptions=False)
    assert hook.exit_code == 0
    log = home / "logs" / "hooks.log"
    assert not log.exists() or "configuration" not in log.read_text(encoding="utf-8")
    # A command the owner types in that folder reads it (./.env is where the README puts Macupos's own).
    assert stats.exit_code != 0 and "configuration" in stats.output and ".env" in stats.output
