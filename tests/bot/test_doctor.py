"""macupos doctor against a temporary home, the Bot API double, and the real bundled CLIs and Whisper model."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.doctor import Check, doctor_command, format_checks, run_doctor
from bot.migrations import MIGRATIONS as BOT_MIGRATIONS
from bot.settings import BotSettings
from bot.state import BotState
from memory.storage.database import Database
from tests.doubles.telegram import TelegramDouble


def make_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "data"
    home.mkdir(mode=0o700, exist_ok=True)
    user_home = tmp_path / "home"
    user_home.mkdir(exist_ok=True)
    codex = user_home / ".codex"
    codex.mkdir(exist_ok=True)
    (codex / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": "sk-test"}), encoding="utf-8")
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    env = {
        "HOME": str(user_home),
        "MACUPOS_HOME": str(home),
        "MACUPOS_PROJECTS": f"proj={project}",
        "TELEGRAM_BOT_TOKEN": "123456:TEST-TOKEN",
        "MACUPOS_ALLOWED_USERS": "42",
        "ANTHROPIC_API_KEY": "dummy",
        "PATH": "/usr/bin:/bin",
    }
    env.update(extra)
    return env


def settings_for(tmp_path: Path, **extra: str) -> BotSettings:
    return BotSettings.from_env(make_env(tmp_path, **extra), cwd=tmp_path, require=False)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_healthy_setup_passes_every_check(tmp_path: Path, telegram_double: TelegramDouble) -> None:
    settings = settings_for(
        tmp_path, TELEGRAM_BOT_TOKEN=telegram_double.token, MACUPOS_TELEGRAM_API_URL=telegram_double.api_url
    )
    db = await Database.open(settings.memory.db_path)
    await db.close()
    state = await BotState.open(settings.db_path)
    await state.close()

    checks = await run_doctor(settings)

    names = [c.name for c in checks]
    assert names == [
        "telegram token",
        "allowlist",
        "projects",
        "claude cli",
        "claude login",
        "codex cli",
        "codex login",
        "whisper model",
        "database memory.db",
        "database bot.db",
        "data folder",
    ]
    failed = [c for c in checks if not c.ok or c.warning]
    assert failed == [], format_checks(checks)
    assert "@macupos_test_bot" in by_name(checks)["telegram token"].detail
    assert len(telegram_double.calls("getMe")) == 1
    assert "Claude Code" in by_name(checks)["claude cli"].detail
    assert "codex-cli" in by_name(checks)["codex cli"].detail
    assert format_checks(checks).endswith("all 11 checks passed")


async def test_a_wrong_token_fails_with_the_fix(tmp_path: Path, telegram_double: TelegramDouble) -> None:
    settings = settings_for(tmp_path, TELEGRAM_BOT_TOKEN="999:WRONG", MACUPOS_TELEGRAM_API_URL=telegram_double.api_url)
    check = by_name(await run_doctor(settings, whisper=False, clis=False))["telegram token"]
    assert not check.ok
    assert "rejected" in check.detail
    assert "@BotFather" in check.fix
    assert "WRONG" not in check.detail


async def test_an_unreachable_api_fails_within_the_timeout(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, MACUPOS_TELEGRAM_API_URL=f"http://127.0.0.1:{free_port()}")
    check = by_name(await run_doctor(settings, whisper=False, clis=False, timeout_s=5))["telegram token"]
    assert not check.ok
    assert "MACUPOS_TELEGRAM_API_URL" in check.fix


async def test_a_silent_api_fails_at_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as server:  # accepts connections (kernel backlog) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        settings = settings_for(tmp_path, MACUPOS_TELEGRAM_API_URL=url)
        check = by_name(await run_doctor(settings, whisper=False, clis=False, timeout_s=0.5))["telegram token"]
    assert not check.ok
    assert "TEST-TOKEN" not in check.detail


async def test_missing_token_and_allowlist_are_reported_not_raised(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, TELEGRAM_BOT_TOKEN="", MACUPOS_ALLOWED_USERS="")
    checks = by_name(await run_doctor(settings, whisper=False, clis=False))
    assert not checks["telegram token"].ok and "TELEGRAM_BOT_TOKEN" in checks["telegram token"].fix
    assert not checks["allowlist"].ok and "MACUPOS_ALLOWED_USERS" in checks["allowlist"].fix


async def test_a_missing_project_folder_fails(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, MACUPOS_PROJECTS=f"gone={tmp_path / 'gone'}")
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["projects"]
    assert not check.ok and "gone=" in check.detail


async def test_claude_login_sources(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, ANTHROPIC_API_KEY="")
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["claude login"]
    assert not check.ok and "/login" in check.fix

    claude_dir = tmp_path / "home" / ".claude"
    claude_dir.mkdir()
    (claude_dir / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": "t"}}), encoding="utf-8")
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["claude login"]
    assert check.ok and ".credentials.json" in check.detail

    (claude_dir / ".credentials.json").unlink()
    (tmp_path / "home" / ".claude.json").write_text(json.dumps({"oauthAccount": {"emailAddress": "a@b"}}), "utf-8")
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["claude login"]
    assert check.ok and "keychain" in check.detail


async def test_codex_login_follows_the_configured_provider(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    codex = tmp_path / "home" / ".codex"
    (codex / "config.toml").write_text(
        'model_provider = "local"\n[model_providers.local]\nbase_url = "http://127.0.0.1:1/v1"\n'
        'env_key = "LOCAL_KEY"\n',
        encoding="utf-8",
    )
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["codex login"]
    assert not check.ok and "LOCAL_KEY" in check.fix

    settings = settings_for(tmp_path, LOCAL_KEY="k")
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["codex login"]
    assert check.ok

    (codex / "config.toml").unlink()
    (codex / "auth.json").unlink()
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["codex login"]
    assert not check.ok and "codex login" in check.fix


async def test_a_whisper_model_that_is_not_there_fails_without_downloading(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, MACUPOS_WHISPER_MODEL=str(tmp_path / "no-model"))
    check = by_name(await run_doctor(settings, telegram=False, clis=False))["whisper model"]
    assert not check.ok
    assert "MACUPOS_WHISPER_MODEL" in check.fix
    named = settings_for(tmp_path, MACUPOS_WHISPER_MODEL="large-v3", HF_HUB_OFFLINE="1")
    check = by_name(await run_doctor(named, telegram=False, clis=False))["whisper model"]
    assert not check.ok


async def test_a_damaged_database_fails(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    settings.memory.db_path.write_bytes(b"this is not a database at all" * 10)
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["database memory.db"]
    assert not check.ok and "move" in check.fix


async def test_a_newer_schema_fails_and_an_older_one_will_migrate(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    conn = sqlite3.connect(settings.db_path)
    conn.execute(f"PRAGMA user_version = {len(BOT_MIGRATIONS) + 3}")
    conn.close()
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["database bot.db"]
    assert not check.ok and "upgrade Macupos" in check.fix

    conn = sqlite3.connect(settings.db_path)
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["database bot.db"]
    assert check.ok and "migrates 0" in check.detail


async def test_data_folder_permissions(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    settings.home.chmod(0o755)
    check = by_name(await run_doctor(settings, telegram=False, whisper=False, clis=False))["data folder"]
    assert check.ok and check.warning and "chmod 700" in check.fix
    assert "! data folder" in format_checks([check])

    fresh = settings_for(tmp_path, MACUPOS_HOME=str(tmp_path / "new" / "home"))
    check = by_name(await run_doctor(fresh, telegram=False, whisper=False, clis=False))["data folder"]
    assert check.ok and "will be created" in check.detail
    assert not (tmp_path / "new").exists()  # the doctor looks, it does not create

    (tmp_path / "afile").write_text("x", encoding="utf-8")
    bad = settings_for(tmp_path, MACUPOS_HOME=str(tmp_path / "afile"))
    check = by_name(await run_doctor(bad, telegram=False, whisper=False, clis=False))["data folder"]
    assert not check.ok


def test_format_checks_prints_each_fix() -> None:
    text = format_checks([Check("a", True, "fine"), Check("b", False, "broken", "do this")])
    assert text.splitlines() == ["✓ a: fine", "✗ b: broken", "    fix: do this", "2 checks, 1 failed"]


@pytest.mark.parametrize(("allowed", "code"), [("42", 0), ("", 1)])
def test_doctor_command_exit_code(tmp_path: Path, allowed: str, code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path, MACUPOS_ALLOWED_USERS=allowed)
    monkeypatch.chdir(tmp_path)  # no stray ./.env
    result = CliRunner().invoke(doctor_command, ["--quick"], env=env)
    assert result.exit_code == code, result.output
    assert "allowlist" in result.output


def test_doctor_command_reports_a_malformed_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path, MACUPOS_ALLOWED_USERS="@me")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(doctor_command, ["--quick"], env=env)
    assert result.exit_code == 1
    assert "✗ configuration: MACUPOS_ALLOWED_USERS" in result.output


def test_quick_doctor_still_fails_without_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path, TELEGRAM_BOT_TOKEN="")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(doctor_command, ["--quick"], env=env)
    assert result.exit_code == 1 and "✗ telegram token: TELEGRAM_BOT_TOKEN is not set" in result.output


def test_a_unicode_digit_in_the_allowlist_is_a_named_setting_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path, MACUPOS_ALLOWED_USERS="42,²")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(doctor_command, ["--quick"], env=env)
    assert result.exit_code == 1 and "✗ configuration: MACUPOS_ALLOWED_USERS" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


async def test_the_bot_with_a_rejected_token_exits_with_one_line_that_hides_the_token(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    token = "999:WRONG-SECRET-TOKEN"
    env = make_env(tmp_path, TELEGRAM_BOT_TOKEN=token, MACUPOS_TELEGRAM_API_URL=telegram_double.api_url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "macupos", "-v", "bot", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):  # it exits: nothing lingers after a failed start
        out, err = await proc.communicate()
    text = (out + err).decode()
    assert proc.returncode == 1 and "Error: the bot could not start" in text
    assert token not in text and "WRONG-SECRET" not in text and "Traceback" not in text


async def test_the_bot_exits_with_one_line_when_memory_cannot_open(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    env = make_env(tmp_path, TELEGRAM_BOT_TOKEN=telegram_double.token, MACUPOS_TELEGRAM_API_URL=telegram_double.api_url)
    (tmp_path / "data" / "memory.db").write_bytes(bytes(range(256)) * 32)  # not SQLite
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "macupos", "bot", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):  # no worker thread keeps a failed start alive
        out, err = await proc.communicate()
    text = (out + err).decode()
    assert proc.returncode == 3 and "Error: the bot could not start" in text and "memory.db" in text  # storage fault
    assert "Traceback" not in text


def test_doctor_checks_the_relay_settings_the_bot_would_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path, MACUPOS_PERMISSION_MODE="bogus")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(doctor_command, ["--quick"], env=env)
    assert result.exit_code == 1 and "✗ relay settings: " in result.output and "permission mode" in result.output
    fine = CliRunner().invoke(doctor_command, ["--quick"], env=make_env(tmp_path))
    assert "✓ relay settings" in fine.output
