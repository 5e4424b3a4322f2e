"""The `macupos` command: one sub-command group per package. The only place that reads the environment."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from types import TracebackType

import click

from bot.doctor import doctor_command
from bot.trigger_cli import trigger_command
from memory import MemorySettings, MemoryStoreError, SettingsError, StorageError, config_path, home_from_env
from memory.cli import HOME_KEY, SETTINGS_ERROR_KEY, StorageFaultExit, memory_group
from memory.redact import RedactingFilter, install
from relay.cli import SETTINGS_KEY, relay_group
from relay.settings import RelaySettings, read_config_toml
from service.cli import serve_group

__all__ = ["main"]

_log = logging.getLogger("macupos")
# One per process: installed on the root handlers by `main`, told the owner's secrets and the bot token.
_LOG_FILTER = RedactingFilter()


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """An uncaught exception's traceback goes through logging too, so the redacting filter sees it."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    _log.critical("uncaught exception", exc_info=(kind, exc, tb))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="macupos")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-v info, -vv debug).")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """Macupos: a phone-driven desk for coding agents, with the Eywa memory core.

    Configuration comes from the environment (MACUPOS_HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, …) and the
    optional $MACUPOS_HOME/config.toml.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # Secrets never reach a log: every record's final text (and traceback) passes the redactor.
    install(_LOG_FILTER)
    sys.excepthook = _log_uncaught
    try:
        memory = MemorySettings.from_env(os.environ)
    except SettingsError as exc:
        if ctx.invoked_subcommand in ("bot", "doctor"):
            return  # they read their settings themselves and report a bad one in their own way
        if ctx.invoked_subcommand == "memory":
            # Each memory command reports it when it needs its settings; Claude Code's hooks fail open instead.
            ctx.meta[SETTINGS_ERROR_KEY] = exc
            ctx.meta[HOME_KEY] = home_from_env(os.environ)  # where a failing hook still logs why
            return
        raise click.ClickException(f"configuration: {exc}") from exc
    _LOG_FILTER.update(own_secrets=memory.own_secrets, literals=(memory.api_key,) if memory.api_key else ())
    ctx.obj = memory

    def relay_settings() -> RelaySettings:
        config = config_path(os.environ, memory.home)
        return RelaySettings.from_env(os.environ, read_config_toml(config), memory=memory)

    # Built only when a relay command runs, so a bad [relay] table cannot break the memory commands.
    ctx.meta[SETTINGS_KEY] = relay_settings


main.add_command(memory_group, name="memory")
main.add_command(relay_group, name="relay")
main.add_command(doctor_command, name="doctor")
main.add_command(serve_group, name="serve")
main.add_command(trigger_command, name="trigger")


@main.command("bot")
def bot_command() -> None:
    """Run the Telegram bot (long polling; a webhook when MACUPOS_WEBHOOK_URL is set) until stopped."""
    from telegram.error import TelegramError

    from bot.app import run_bot  # imported here: `macupos memory …` must not pay for telegram and the SDKs
    from bot.settings import BOT_ONLY_SECRETS, BotSettings, ConfigError, find_dotenv

    env = dict(os.environ)
    try:
        settings = BotSettings.from_env(env, dotenv=find_dotenv(env, Path.cwd()))
        config = config_path(settings.env, settings.home)
        relay = RelaySettings.from_env(settings.agent_env, read_config_toml(config), memory=settings.memory)
    except ConfigError as exc:
        raise click.ClickException(f"{exc}\nRun `macupos doctor` for a full check.") from exc
    except ValueError as exc:
        raise click.ClickException(f"configuration: {exc}") from exc
    # Both agent SDKs layer the parent's environment under the env we pass them: drop the bot's own
    # secrets from this process so no Claude or Codex child (nor anything they run) can read them.
    for name in BOT_ONLY_SECRETS:
        os.environ.pop(name, None)
    # The token is in every Bot API URL: no log line or error may carry it (httpx logs each request at INFO),
    # whole, URL-encoded or its secret half, even cut short; nor may the owner's own secrets.
    mask = install(_LOG_FILTER)
    service_key = (settings.memory.api_key,) if settings.memory.api_key else ()  # the memory service's
    mask.update(own_secrets=settings.memory.own_secrets, literals=service_key)
    mask.mask_token(settings.token)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        asyncio.run(run_bot(settings, relay))
    except StorageError as exc:  # memory.db or bot.db cannot be used as it is: exit 3, like every command
        raise StorageFaultExit(exc, prefix="the bot could not start: ") from None
    except (TelegramError, OSError, MemoryStoreError) as exc:  # a start that cannot happen: one line, no token
        raise click.ClickException(mask.clean(f"the bot could not start: {exc}")) from None


if __name__ == "__main__":
    main()
