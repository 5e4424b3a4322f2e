"""Memory's own model spend: each handoff extraction's tokens and USD, kept as ``memory`` rows of the cost
ledger (memory.storage.ledger, beside the sessions' Claude and Codex rows), and the daily budget that caps
it (``MACUPOS_MEMORY_DAILY_BUDGET_USD``).

A day is the owner's (``MACUPOS_TIMEZONE``). The budget is checked before each extraction, so extractions
that run side by side (``MACUPOS_MEMORY_CONCURRENCY``) may pass it by the price of the ones already started.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from memory.render.markdown import zone
from memory.storage import ledger
from memory.storage.ledger import CostEntry

__all__ = ["EXTRACT_STAGE", "MEMORY_ENGINE", "Spend", "day_start", "record_spend", "spend_of", "spent_today"]

MEMORY_ENGINE = "memory"  # the ledger's engine column for memory's rows
EXTRACT_STAGE = "extract"


@dataclass(frozen=True, slots=True)
class Spend:
    """One model call memory made (an extraction attempt), as the Claude Code CLI reported it."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None  # None when the CLI reported no price
    duration_s: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


def spend_of(model: str, usage: Mapping[str, Any] | None, cost_usd: float | None, duration_ms: int) -> Spend:
    """A result message's spend (the CLI's usage field names)."""
    u = usage or {}
    return Spend(
        model=model,
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0),
        cost_usd=cost_usd,
        duration_s=max(0, duration_ms) / 1000.0,
    )


async def record_spend(
    conn: aiosqlite.Connection, session_id: str, spend: Spend, *, now: datetime | None = None
) -> None:
    """Append one ``memory`` row for the extraction of ``session_id``'s handoff (inside ``db.write()``)."""
    # A Spend's fields are all CostEntry fields, under the same names.
    usage = {f.name: getattr(spend, f.name) for f in fields(spend)}
    entry = CostEntry(engine=MEMORY_ENGINE, session_id=session_id, stage=EXTRACT_STAGE, **usage)
    await ledger.append(conn, entry, now=now)


def day_start(timezone: str, now: datetime | None = None) -> datetime:
    """Midnight of the owner's day that holds ``now`` (default: now), in UTC."""
    local = (now or datetime.now(UTC)).astimezone(zone(timezone))
    return local.replace(hour=0, minute=0, second=0, microsecond=0).astimezone(UTC)


async def spent_today(conn: aiosqlite.Connection, timezone: str, *, now: datetime | None = None) -> float:
    """USD memory spent since the owner's midnight (rows without a price count as nothing)."""
    return await ledger.spent_since(conn, MEMORY_ENGINE, day_start(timezone, now))
