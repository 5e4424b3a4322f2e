"""The `macupos` command: one sub-command group per package, and the only place that reads the environment.

It loads the configuration once (memory.load_config: the environment beats `.env`, which beats config.toml)
and hands each command its typed settings: memory's as the click context object, the relay's as a factory
in ``ctx.meta``, the service's option defaults as the context's default map, and the bot's to ``run_bot``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import cast

import click

from memory import MemorySettings, MemoryStoreError, SettingsError, StorageError, home_from_env
from memory.cli import HOME_KEY, SETTINGS_ERROR_KEY, StorageFaultExit
from memory.config import Config, load_config
from memory.redact import RedactingFilter, install
from relay.settings import SETTINGS_KEY, RelaySettings

__all__ = ["main"]

_log = logging.getLogger("macupos")
# One per process: installed on the root handlers by `main`, told the owner's secrets and the bot token.
_LOG_FILTER = RedactingFilter()
# In ctx.meta: the loaded Config, or the SettingsError that stopped loading it (the bot reports it its own way).
_CONFIG_KEY = "macupos.config"
_DOCTOR_HINT = "\nRun `macupos doctor` for a full check."


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """An uncaught exception's traceback goes through logging too, so the redacting filter sees it."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    _log.critical("uncaught exception", exc_info=(kind, exc, tb))


# Claude Code starts these in the owner's project folder. That project's own .env (its API keys, say) is not
# Macupos configuration, so they read only $MACUPOS_ENV_FILE or $MACUPOS_HOME/.env.
_IN_PROJECT = (("memory", "hook"), ("memory", "mcp"))
_ARGS_KEY = "macupos.args"
# Each package's commands, imported only when one of them runs: `macupos memory hook`, which Claude Code starts
# at every session's start and end, then loads none of the relay's, the service's or the bot's modules
# (`macupos memory get`: 0.27 s instead of 0.44 s on 2 cores, bench.service_latency).
# Each entry: the module, its command, and (or "") its function giving the command's option defaults from the
# configuration's environment (click's default map).
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "doctor": ("bot.doctor", "doctor_command", ""),
    "memory": ("memory.cli", "memory_group", ""),
    "relay": ("relay.cli", "relay_group", ""),
    "serve": ("service.cli", "serve_group", "serve_defaults"),
    "trigger": ("bot.trigger_cli", "trigger_command", "trigger_defaults"),
}


class _Root(click.Group):
    """The root group, remembering its arguments (which command runs decides which `.env` is read) and
    importing a package's commands only when they are asked for."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS_KEY] = tuple(a for a in args if not a.startswith("-"))
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, name, _ = _COMMANDS[cmd_name]
        return cast(click.Command, getattr(importlib.import_module(module), name))


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="macupos")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-v info, -vv debug).")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """Macupos: a phone-driven desk for coding agents, with the Eywa memory core.

    Configuration comes from the environment (MACUPOS_HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, …), then a .env
    file ($MACUPOS_ENV_FILE, ./.env or $MACUPOS_HOME/.env), then $MACUPOS_HOME/config.toml: the first of
    them that sets a value wins. `memory hook` and `memory mcp`, which Claude Code starts in your projects,
    skip ./.env.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # Secrets never reach a log: every record's final text (and traceback) passes the redactor.
    install(_LOG_FILTER)
    sys.excepthook = _log_uncaught
    try:
        in_project = ctx.meta.get(_ARGS_KEY, ())[:2] in _IN_PROJECT
        config = load_config(os.environ, None if in_project else Path.cwd())
    except SettingsError as exc:  # a .env or config.toml that cannot be read
        ctx.meta[_CONFIG_KEY] = exc
        _settings_failed(ctx, exc, home_from_env(os.environ))
        return
    ctx.meta[_CONFIG_KEY] = config
    ctx.default_map = _defaults(ctx.invoked_subcommand, config)
    try:
        memory = MemorySettings.from_env(config.env, toml=config.toml)
    except SettingsError as exc:
        _settings_failed(ctx, exc, home_from_env(config.env))
        return
    _LOG_FILTER.update(own_secrets=memory.own_secrets, literals=(memory.api_key,) if memory.api_key else ())
    ctx.obj = memory

    def relay_settings() -> RelaySettings:
        return RelaySettings.from_env(config.env, config.toml, memory=memory)

    # Built only when a relay command runs, so a bad [relay] table cannot break the memory commands.
    ctx.meta[SETTINGS_KEY] = relay_settings


def _defaults(command: str | None, config: Config) -> dict[str, object]:
    """The option defaults the configuration gives the command about to run (click's default map)."""
    module, _, defaults = _COMMANDS.get(command or "", ("", "", ""))
    if not defaults:
        return {}
    return {str(command): getattr(importlib.import_module(module), defaults)(config.env)}


def _settings_failed(ctx: click.Context, exc: SettingsError, home: Path) -> None:
    """A setting that cannot be used: each command reports it in its own way, the others stop here."""
    if ctx.invoked_subcommand in ("bot", "doctor"):
        return  # they build their settings themselves and report a bad one beside the fix
    if ctx.invoked_subcommand == "memory":
        # Each memory command reports it when it needs its settings; Claude Code's hooks fail open instead.
        ctx.meta[SETTINGS_ERROR_KEY] = exc
        ctx.meta[HOME_KEY] = home  # where a failing hook still logs why
        return
    raise click.ClickException(f"configuration: {exc}") from exc


@main.command("bot")
@click.pass_context
def bot_command(ctx: click.Context) -> None:
    """Run the Telegram bot (long polling; a webhook when MACUPOS_WEBHOOK_URL is set) until stopped."""
    from telegram.error import TelegramError

    from bot.app import run_bot  # imported here: `macupos memory …` must not pay for telegram and the SDKs
    from bot.settings import BOT_ONLY_SECRETS, BotSettings, ConfigError

    loaded: Config | SettingsError = ctx.meta[_CONFIG_KEY]
    if isinstance(loaded, SettingsError):
        raise click.ClickException(f"{loaded}{_DOCTOR_HINT}")
    try:
        settings = BotSettings.from_env(loaded.env, toml=loaded.toml)
        relay = RelaySettings.from_env(settings.agent_env, loaded.toml, memory=settings.memory)
    except ConfigError as exc:
        raise click.ClickException(f"{exc}{_DOCTOR_HINT}") from exc
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
