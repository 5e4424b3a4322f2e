"""The cost ledger table (``ledger``, migration 3): its one writer and its reads.

One row per model run: a Claude turn or a Codex turn (the relay's, through :meth:`memory.facade.Eywa.record_cost`)
and each handoff extraction (memory's own, engine ``memory``: memory.spend). Every row goes in through
:func:`append`, so the columns, the timestamp format and the defaults are decided once.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiosqlite

__all__ = [
    "SESSION_ENGINES",
    "CostEntry",
    "CostRow",
    "CostTotal",
    "CostView",
    "GroupBy",
    "append",
    "check_session_engine",
    "cost_view",
    "has_ledger",
    "ledger_ts",
    "linked_rollouts",
    "spent_since",
    "totals",
]

GroupBy = Literal["session", "run", "engine"]
_COLUMN: dict[str, str] = {"session": "session_id", "run": "run_id", "engine": "engine"}
SESSION_ENGINES = ("claude", "codex")  # what sessions and RPA runs spend (memory's own rows aside)


@dataclass(frozen=True, slots=True)
class CostEntry:
    """One model run to put in the ledger."""

    engine: str
    model: str = ""
    session_id: str = ""
    thread_id: str = ""
    run_id: str = ""
    stage: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None  # None when the engine reported no price
    duration_s: float = 0.0
    rollout_path: str = ""  # a Codex rollout file, linked to session_id


@dataclass(frozen=True, slots=True)
class CostTotal:
    key: str  # the session id, run id or engine
    runs: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None  # sum of the known prices; None when no row had one
    priced: int  # how many rows carried a price
    duration_s: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True, slots=True)
class CostRow:
    """A ledger row as the cost page lists it."""

    ts: str
    engine: str
    session_id: str
    stage: str
    model: str
    tokens: int
    cost_usd: float | None
    duration_s: float


@dataclass(frozen=True, slots=True)
class CostView:
    """The cost page: totals per engine (by name), the costliest sessions, the latest rows."""

    engines: list[CostTotal] = field(default_factory=list)
    sessions: list[CostTotal] = field(default_factory=list)
    recent: list[CostRow] = field(default_factory=list)


def ledger_ts(now: datetime | None = None) -> str:
    # UTC ISO 8601 with milliseconds, so rows sort and compare as text.
    return (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="milliseconds")


_INSERT = (
    "INSERT INTO ledger(ts, engine, session_id, thread_id, run_id, stage, model, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, cost_usd, duration_s, rollout_path) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def check_session_engine(entry: CostEntry) -> None:
    """ValueError unless ``entry`` is a session's run (memory's own rows come from memory.spend)."""
    if entry.engine not in SESSION_ENGINES:
        raise ValueError(f"ledger engine must be 'claude' or 'codex', not {entry.engine!r}")


async def append(conn: aiosqlite.Connection, entry: CostEntry, *, now: datetime | None = None) -> int:
    """Append one row (inside ``db.write()``); its id."""
    cur = await conn.execute(
        _INSERT,
        (
            ledger_ts(now),
            entry.engine,
            entry.session_id,
            entry.thread_id,
            entry.run_id,
            entry.stage,
            entry.model,
            entry.input_tokens,
            entry.output_tokens,
            entry.cache_read_tokens,
            entry.cache_write_tokens,
            entry.cost_usd,
            float(entry.duration_s),
            entry.rollout_path,
        ),
    )
    return int(cur.lastrowid or 0)


_HAS_LEDGER = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger'"


async def has_ledger(conn: aiosqlite.Connection) -> bool:
    """Whether the database has the ledger table (the migration has run)."""
    async with conn.execute(_HAS_LEDGER) as cur:
        return await cur.fetchone() is not None


def _totals_sql(by: str, engines: tuple[str, ...], *, by_key: bool = False, limit: int | None = None) -> str:
    if by not in _COLUMN:
        raise ValueError(f"ledger totals by 'session', 'run' or 'engine', not {by!r}")
    column = _COLUMN[by]
    only = f" AND engine IN ({','.join('?' * len(engines))})" if engines else ""
    order = column if by_key else f"coalesce(sum(cost_usd), 0) DESC, {column}"
    return (
        f"SELECT {column}, count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
        f"sum(cache_write_tokens), sum(cost_usd), count(cost_usd), sum(duration_s) "
        f"FROM ledger WHERE {column} != ''{only} GROUP BY {column} ORDER BY {order}"
        + (f" LIMIT {int(limit)}" if limit is not None else "")
    )


def _total(r: Any) -> CostTotal:
    return CostTotal(
        key=str(r[0]),
        runs=int(r[1]),
        input_tokens=int(r[2] or 0),
        output_tokens=int(r[3] or 0),
        cache_read_tokens=int(r[4] or 0),
        cache_write_tokens=int(r[5] or 0),
        cost_usd=float(r[6]) if r[6] is not None else None,
        priced=int(r[7]),
        duration_s=float(r[8] or 0.0),
    )


async def totals(conn: aiosqlite.Connection, by: GroupBy = "session", engines: tuple[str, ...] = ()) -> list[CostTotal]:
    """Sums per session, run or engine, largest cost first (rows without a key are left out); ``engines``
    keeps only those engines' rows."""
    async with conn.execute(_totals_sql(by, engines), engines) as cur:
        return [_total(r) for r in await cur.fetchall()]


async def spent_since(conn: aiosqlite.Connection, engine: str, since: datetime) -> float:
    """USD ``engine``'s rows priced since ``since`` (rows without a price count as nothing)."""
    async with conn.execute(
        "SELECT coalesce(sum(cost_usd), 0) FROM ledger WHERE engine = ? AND ts >= ?", (engine, ledger_ts(since))
    ) as cur:
        row = await cur.fetchone()
    return float(row[0]) if row else 0.0


async def linked_rollouts(conn: aiosqlite.Connection, session_id: str) -> list[Path]:
    """The Codex rollout files a session caused, in the order they were recorded."""
    async with conn.execute(
        "SELECT DISTINCT rollout_path FROM ledger WHERE session_id = ? AND engine = 'codex' "
        "AND rollout_path != '' ORDER BY id",
        (session_id,),
    ) as cur:
        return [Path(str(r[0])) for r in await cur.fetchall()]


def cost_view(conn: sqlite3.Connection, recent: int) -> CostView:
    """For ``Database.read``: totals per engine, the 20 costliest sessions, the ``recent`` latest rows."""
    if conn.execute(_HAS_LEDGER).fetchone() is None:
        return CostView()
    engines = [_total(r) for r in conn.execute(_totals_sql("engine", (), by_key=True)).fetchall()]
    sessions = [_total(r) for r in conn.execute(_totals_sql("session", (), limit=20)).fetchall()]
    rows = conn.execute(
        "SELECT ts, engine, session_id, stage, model, input_tokens + output_tokens + cache_read_tokens"
        " + cache_write_tokens, cost_usd, duration_s FROM ledger ORDER BY id DESC LIMIT ?",
        (recent,),
    ).fetchall()
    latest = [
        CostRow(
            ts=str(r[0]),
            engine=str(r[1]),
            session_id=str(r[2]),
            stage=str(r[3]),
            model=str(r[4]),
            tokens=int(r[5] or 0),
            cost_usd=float(r[6]) if r[6] is not None else None,
            duration_s=float(r[7] or 0.0),
        )
        for r in rows
    ]
    return CostView(engines, sessions, latest)
