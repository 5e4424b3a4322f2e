"""Command-line value types shared by the memory commands."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

__all__ = ["ISO_INSTANT", "parse_instant"]


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
