"""Command-line value types and helpers shared by the memory commands."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from memory.errors import MemoryStoreError
from memory.retrieval import check_days_back
from memory.settings import MemorySettings

R = TypeVar("R")

__all__ = [
    "DAYS",
    "HOME_KEY",
    "ISO_INSTANT",
    "SETTINGS_ERROR_KEY",
    "folder_argument",
    "parse_instant",
    "run_command",
    "settings_of",
]


def parse_instant(value: str) -> datetime:
    """An ISO-8601 time ("Z" allowed); a naive one is taken as UTC. ValueError when it is not one."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _IsoInstant(click.ParamType[datetime]):
    name = "ISO-8601"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_instant(str(value))
        except ValueError:
            self.fail(f"not an ISO-8601 date: {value}", param, ctx)


ISO_INSTANT = _IsoInstant()


class _Days(click.ParamType[float]):
    name = "DAYS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return check_days_back(float(value))
        except ValueError:
            self.fail(f"not a positive number of days: {value}", param, ctx)


DAYS = _Days()


def folder_argument(value: str) -> Path:
    """A folder named on the command line; an empty name is a mistake, not the current folder."""
    if not value.strip():
        raise click.BadParameter("an empty folder name; give a path (. for the current folder)")
    return Path(value)


# Where the edge (bot.cli) leaves a bad memory setting for the command to report, in ctx.meta.
SETTINGS_ERROR_KEY = "macupos.memory_settings_error"
HOME_KEY = "macupos.home"  # beside it: $MACUPOS_HOME, known even when another setting is bad


def settings_of(ctx: click.Context) -> MemorySettings:
    """The memory settings the edge (bot.cli) put on the context; a bad one is a one-line error."""
    error = ctx.meta.get(SETTINGS_ERROR_KEY)
    if error is not None:
        raise click.ClickException(f"configuration: {error}")
    obj = ctx.find_object(MemorySettings)
    if obj is None:  # the edge always sets it; this keeps the commands usable on their own in tests
        raise click.UsageError("memory settings were not provided")
    return obj


def run_command(coro: Coroutine[Any, Any, R]) -> R:
    """Run one command's coroutine; a memory error becomes a clear CLI error, never a traceback."""
    try:
        return asyncio.run(coro)
    except MemoryStoreError as exc:
        raise click.ClickException(str(exc)) from exc
