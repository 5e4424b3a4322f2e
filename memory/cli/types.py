"""Command-line value types and helpers shared by the memory commands."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from memory.errors import MemoryStoreError, StorageError
from memory.index.retrieval import check_days_back
from memory.settings import MemorySettings
from memory.storage.faults import os_fault
from memory.timeutil import parse_iso

R = TypeVar("R")

__all__ = [
    "DAYS",
    "EXIT_STORAGE",
    "HOME_KEY",
    "ISO_INSTANT",
    "SETTINGS_ERROR_KEY",
    "StorageFaultExit",
    "folder_argument",
    "parse_instant",
    "run_command",
    "settings_of",
]


def parse_instant(value: str) -> datetime:
    """An ISO-8601 time ("Z" allowed); a naive one is taken as UTC. ValueError when it is not one."""
    return parse_iso(value)


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


# Where the root (macupos.cli) leaves a bad memory setting for the command to report, in ctx.meta.
SETTINGS_ERROR_KEY = "macupos.memory_settings_error"
HOME_KEY = "macupos.home"  # beside it: $MACUPOS_HOME, known even when another setting is bad


def settings_of(ctx: click.Context) -> MemorySettings:
    """The memory settings the root (macupos.cli) put on the context; a bad one is a one-line error."""
    error = ctx.meta.get(SETTINGS_ERROR_KEY)
    if error is not None:
        raise click.ClickException(f"configuration: {error}")
    obj = ctx.find_object(MemorySettings)
    if obj is None:  # the edge always sets it; this keeps the commands usable on their own in tests
        raise click.UsageError("memory settings were not provided")
    return obj


# Exit statuses (docs/exit-codes.md): 0 done, 1 the command failed, 2 a usage mistake (click's),
# 3 a storage fault — the file cannot be used as it is until the owner acts (space, permissions, recover).
EXIT_STORAGE = 3


class StorageFaultExit(click.ClickException):
    """A storage fault as one ``Error:`` line (the file, what is wrong, the way out) and exit status 3."""

    exit_code = EXIT_STORAGE

    def __init__(self, fault: StorageError, prefix: str = "") -> None:
        super().__init__(f"{prefix}{fault}")
        self.fault = fault


def run_command(coro: Coroutine[Any, Any, R]) -> R:
    """Run one command's coroutine; a memory error becomes a clear CLI error, never a traceback."""
    try:
        return asyncio.run(coro)
    except StorageError as exc:
        raise StorageFaultExit(exc) from exc
    except MemoryStoreError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:  # a file the command writes itself (a mirror file on a full disk, say)
        fault = os_fault(exc)
        if fault is not None:
            raise StorageFaultExit(fault) from exc
        where = f"{exc.filename}: " if exc.filename else ""
        raise click.ClickException(f"{where}{exc.strerror or exc}") from exc
