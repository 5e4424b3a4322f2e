"""The `macupos` command: one sub-command group per package. The only place that reads the environment."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import click

from bot.doctor import doctor_command
from memory.cli import memory_group
from memory.clitypes import HOME_KEY, SETTINGS_ERROR_KEY, StorageFaultExit
from memory.errors import MemoryStoreError, SettingsError, StorageError
from memory.settings import MemorySettings, config_path, home_from_env
from relay.cli import SETTINGS_KEY, relay_group
from relay.settings import RelaySettings, read_config_toml
from service.cli import serve_group

__all__ = ["main"]


class TokenMask(logging.Filter):
    """Replaces the bot token in every log record (message and arguments) with ``<token>``."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def clean(self, text: str) -> str:
        return text.replace(self.token, "<token>") if self.token else text

    def filter(self, record: logging.LogRecord) -> bool:
        if self.token:
            record.msg = self.clean(record.getMessage())
            record.args = None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = self.clean(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


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
    # The token is in every Bot API URL: no log line or error may carry it (httpx logs each request at INFO).
    mask = TokenMask(settings.token)
    for handler in logging.getLogger().handlers:
        handler.addFilter(mask)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        asyncio.run(run_bot(settings, relay))
    except StorageError as exc:  # memory.db or bot.db cannot be used as it is: exit 3, like every command
        raise StorageFaultExit(exc, prefix="the bot could not start: ") from None
    except (TelegramError, OSError, MemoryStoreError) as exc:  # a start that cannot happen: one line, no token
        raise click.ClickException(mask.clean(f"the bot could not start: {exc}")) from None


if __name__ == "__main__":
    main()
