"""``macupos doctor``: check each part the bot needs and say how to fix what is broken.

Only the configured Telegram base URL is contacted (getMe); logins are judged by the files and variables
the Claude Code and Codex CLIs read, never by calling a model API. Slow parts (getMe, the Whisper load)
are bounded by timeouts and run concurrently.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sqlite3
import stat
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import click

from bot.doctor_agents import claude_login, claude_path, cli_version, codex_login, codex_path
from bot.doctor_check import Check, fail
from bot.migrations import MIGRATIONS as BOT_MIGRATIONS
from bot.settings import BotSettings, ConfigError, find_dotenv
from memory import MEMORY_RECOVER_WAY_OUT, config_path, read_config_toml
from memory.storage import MIGRATIONS as MEMORY_MIGRATIONS
from memory.storage import sqlite_fault
from relay.settings import RelaySettings

__all__ = ["Check", "doctor_command", "format_checks", "run_doctor"]

_TOKEN_FIX = "create a bot with @BotFather and set TELEGRAM_BOT_TOKEN"


async def _telegram(settings: BotSettings, timeout_s: float) -> Check:
    name = "telegram token"
    if not settings.token:
        return fail(name, "TELEGRAM_BOT_TOKEN is not set", _TOKEN_FIX)
    # Here, not at the top: every `macupos` command (and each import worker) loads this module.
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError
    from telegram.request import HTTPXRequest

    request = HTTPXRequest(connect_timeout=timeout_s, read_timeout=timeout_s, write_timeout=timeout_s)
    bot = Bot(
        settings.token,
        base_url=settings.bot_base_url,
        base_file_url=settings.file_base_url,
        request=request,
        get_updates_request=HTTPXRequest(connection_pool_size=1),
    )
    try:
        async with asyncio.timeout(timeout_s), bot:  # initialize() is the getMe call
            me = bot.bot
    except InvalidToken:
        return fail(
            name,
            f"getMe at {settings.api_url} answered 401 or 404: a rejected token, or no Bot API at that URL",
            "copy the token again from @BotFather (/token); check MACUPOS_TELEGRAM_API_URL if you set it",
        )
    except TimeoutError:
        return fail(name, f"no answer from {settings.api_url} within {timeout_s:g}s", _api_fix(settings))
    except TelegramError as exc:
        # An HTTP library's message may quote the URL, and the URL holds the token.
        message = exc.message.replace(settings.token, "<token>")
        return fail(name, f"getMe at {settings.api_url} failed: {message}", _api_fix(settings))
    return Check(name, True, f"@{me.username} (id {me.id}) via {settings.api_url}")


def _relay_settings(settings: BotSettings) -> Check:
    """The relay's settings as `macupos bot` builds them: a bad one would stop the bot after doctor passed."""
    config = config_path(settings.env, settings.home)
    try:
        RelaySettings.from_env(settings.agent_env, read_config_toml(config), memory=settings.memory)
    except ValueError as exc:
        fix = f"fix the MACUPOS_* relay variable or the [relay] table of {config} (docs/relay.md lists them)"
        return fail("relay settings", str(exc), fix)
    return Check("relay settings", True, f"[relay] of {config} and the environment")


def _api_fix(settings: BotSettings) -> str:
    return f"check the network path to {settings.api_url} (MACUPOS_TELEGRAM_API_URL for a Bot API server of your own)"


def _allowlist(settings: BotSettings) -> Check:
    if not settings.allowed_users:
        return fail(
            "allowlist",
            "MACUPOS_ALLOWED_USERS is empty: the bot will refuse to start",
            "set MACUPOS_ALLOWED_USERS to your numeric Telegram user id (@userinfobot tells you)",
        )
    ids = ", ".join(str(u) for u in sorted(settings.allowed_users))
    return Check("allowlist", True, f"{len(settings.allowed_users)} user(s): {ids}")


def _projects(settings: BotSettings) -> Check:
    missing = [f"{p.name}={p.path}" for p in settings.projects if not p.path.is_dir()]
    if missing:
        return fail("projects", f"not a folder: {', '.join(missing)}", "fix the paths in MACUPOS_PROJECTS")
    names = ", ".join(p.name for p in settings.projects)
    return Check("projects", True, f"{names} (default: {settings.default_project.name})")


def _load_whisper(settings: BotSettings) -> str:
    if settings.whisper_backend == "openai-whisper":
        whisper = importlib.import_module("whisper")
        name = settings.whisper_model or "tiny.en"
        cache = Path(settings.env.get("XDG_CACHE_HOME") or Path(settings.env.get("HOME") or Path.home()) / ".cache")
        path = Path(name) if Path(name).is_file() else cache / "whisper" / f"{name}.pt"
        if not path.is_file():
            raise FileNotFoundError(f"no checkpoint at {path}")  # loading by name would download it
        whisper.load_model(str(path), device="cpu")
        return f"openai-whisper {path}"
    whisper_model = importlib.import_module("faster_whisper").WhisperModel  # heavy: imported only when checked
    from bot.voice.transcribe import default_model_path

    name = settings.whisper_model or str(default_model_path())
    # local_files_only: a model name that is not cached must fail here, not download.
    whisper_model(name, device="cpu", compute_type="int8", local_files_only=True)
    return f"faster-whisper {name}"


async def _whisper(settings: BotSettings, timeout_s: float) -> Check:
    name = "whisper model"
    fix = (
        "set MACUPOS_WHISPER_MODEL to a downloaded model folder (or leave it empty for the bundled tiny.en); "
        "for openai-whisper install the extra and place the .pt checkpoint"
    )
    try:
        async with asyncio.timeout(timeout_s):
            loaded = await asyncio.to_thread(_load_whisper, settings)
    except TimeoutError:
        return fail(name, f"did not load within {timeout_s:g}s", "use a smaller model, or give it more memory")
    except ImportError as exc:
        return fail(name, f"backend not installed: {exc}", fix)
    except (OSError, RuntimeError, ValueError) as exc:  # HF lookups raise OSError; CTranslate2 RuntimeError
        return fail(name, f"{settings.whisper_model or 'tiny.en'}: {' '.join(str(exc).split())[:200]}", fix)
    return Check(name, True, f"{loaded} loads")


def _database(label: str, path: Path, supported: int, thorough: bool) -> Check:
    name = f"database {label}"
    # The memory database is rebuilt from its readable mirror; the bot's own state is only moved aside.
    damaged_fix = (
        MEMORY_RECOVER_WAY_OUT
        if label == "memory.db"
        else f"stop the bot, move {path} aside (a fresh one is made on the next start), then start it again"
    )
    if not path.exists():
        return Check(name, True, f"{path} not created yet (made on first run)")
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            # quick_check skips the index-to-table comparison: O(pages), fit for a frequent health probe.
            pragma = "integrity_check" if thorough else "quick_check"
            result = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        fault = sqlite_fault(path, exc, corrupt_way_out=damaged_fix)
        return fail(name, f"{path}: {exc}", fault.way_out if fault is not None else damaged_fix)
    if version > supported:
        return fail(
            name,
            f"{path} has schema {version}, newer than this Macupos ({supported})",
            "upgrade Macupos instead of downgrading the database",
        )
    if result != ["ok"]:
        return fail(
            name,
            f"{path} integrity check: {'; '.join(result[:3])}",
            damaged_fix,
        )
    pending = f", migrates {version} → {supported} on start" if version < supported else ""
    return Check(name, True, f"{path} ok (schema {version}{pending})")


def _data_folder(home: Path) -> Check:
    name = "data folder"
    if not home.exists():
        parent = next((p for p in home.parents if p.exists()), None)
        if parent is None or not os.access(parent, os.W_OK | os.X_OK):
            return fail(name, f"{home} does not exist and {parent} is not writable", f"mkdir -m 700 -p {home}")
        return Check(name, True, f"{home} will be created")
    if not home.is_dir():
        return fail(name, f"{home} is not a folder", "point MACUPOS_HOME at a folder")
    if not os.access(home, os.W_OK | os.X_OK):
        return fail(name, f"{home} is not writable by uid {os.getuid()}", f"chown -R $(id -u) {home}")
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & stat.S_IRWXO:
        detail = f"{home} is readable by other users (mode {mode:o}): it holds transcripts"
        return Check(name, True, detail, f"chmod 700 {home}", warning=True)
    return Check(name, True, f"{home} writable, mode {mode:o}")


async def run_doctor(
    settings: BotSettings,
    *,
    telegram: bool = True,
    whisper: bool = True,
    clis: bool = True,
    thorough_db: bool = True,
    timeout_s: float = 10.0,
    whisper_timeout_s: float = 120.0,
    service: bool = True,
) -> list[Check]:
    """Every check, in a fixed order; `telegram`, `whisper`, `clis`, `thorough_db`, `service` (the memory
    service's network check) set False skip the slow parts."""
    jobs: list[Awaitable[Check]] = []

    async def now(fn: Callable[[], Check]) -> Check:
        return fn()

    if telegram:
        jobs.append(_telegram(settings, timeout_s))
    elif not settings.token:  # quick mode calls no getMe, but a missing token still stops the bot
        jobs.append(now(lambda: fail("telegram token", "TELEGRAM_BOT_TOKEN is not set", _TOKEN_FIX)))
    jobs.append(now(lambda: _allowlist(settings)))
    jobs.append(now(lambda: _projects(settings)))
    if clis:
        claude_fix = "reinstall: pip install -U claude-agent-sdk (it ships the CLI), or set MACUPOS_CLAUDE_CLI"
        jobs.append(cli_version("claude cli", claude_path(settings), settings, claude_fix))
    jobs.append(asyncio.to_thread(claude_login, settings))
    if clis:
        jobs.append(
            cli_version("codex cli", codex_path(settings), settings, "reinstall: pip install -U openai-codex-cli-bin")
        )
    jobs.append(asyncio.to_thread(codex_login, settings))
    if whisper:
        jobs.append(_whisper(settings, whisper_timeout_s))
    jobs.append(asyncio.to_thread(_database, "memory.db", settings.memory.db_path, len(MEMORY_MIGRATIONS), thorough_db))
    jobs.append(asyncio.to_thread(_database, "bot.db", settings.db_path, len(BOT_MIGRATIONS), thorough_db))
    jobs.append(now(lambda: _data_folder(settings.home)))
    if settings.memory.remote:
        from bot.doctor_memory import memory_service  # imported here: only a remote memory needs its client

        jobs.append(memory_service(settings.memory, network=service, timeout_s=timeout_s))
    return list(await asyncio.gather(*jobs))


def format_checks(checks: Sequence[Check]) -> str:
    lines: list[str] = []
    for check in checks:
        mark = "✗" if not check.ok else ("!" if check.warning else "✓")
        lines.append(f"{mark} {check.name}: {check.detail}")
        if check.fix and (not check.ok or check.warning):
            lines.append(f"    fix: {check.fix}")
    failed = sum(not c.ok for c in checks)
    lines.append(f"{len(checks)} checks, {failed} failed" if failed else f"all {len(checks)} checks passed")
    return "\n".join(lines)


def _settings_from(env: Mapping[str, str]) -> BotSettings:
    cwd = Path.cwd()
    return BotSettings.from_env(env, dotenv=find_dotenv(env, cwd), cwd=cwd, require=False)


@click.command("doctor")
@click.option(
    "--quick",
    is_flag=True,
    help="No getMe, no CLI runs, no Whisper load, no memory-service call, a quick database check (health probes).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True, max=600),
    default=10.0,
    show_default=True,
    help="Seconds for getMe and the memory service.",
)
def doctor_command(quick: bool, timeout_s: float) -> None:
    """Check the token, allowlist, Claude and Codex CLIs and logins, Whisper, databases, data folder, the memory
    service (when MACUPOS_MEMORY_URL is set), relay settings."""
    try:
        settings = _settings_from(os.environ)
    except ConfigError as exc:
        click.echo(f"✗ configuration: {exc}")
        sys.exit(1)
    checks = asyncio.run(
        run_doctor(
            settings,
            telegram=not quick,
            whisper=not quick,
            clis=not quick,
            thorough_db=not quick,
            service=not quick,
            timeout_s=timeout_s,
        )
    )
    checks.append(_relay_settings(settings))
    click.echo(format_checks(checks))
    if any(not c.ok for c in checks):
        sys.exit(1)
