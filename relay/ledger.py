"""The cost ledger: one row per model run (a Claude turn or a Codex turn), kept in the memory database.

Rows carry the Claude session they belong to (a Codex turn caused by a session names that session: the
ledger is also where a session's Codex rollouts are linked to it until memory stores the link itself),
the RPA run and stage, the engine and model, tokens and USD where the engine reports a price. Memory writes
its own rows beside them (engine ``memory``: each handoff extraction, memory.spend), so they can be shown
apart from the sessions' spend.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from memory import MEMORY_ENGINE, StorageError, spent_today
from memory.storage import Database
from relay.events import Usage

__all__ = ["MEMORY_ENGINE", "SESSION_ENGINES", "Ledger", "LedgerTotal"]

logger = logging.getLogger(__name__)


GroupBy = Literal["session", "run", "engine"]
_COLUMN: dict[str, str] = {"session": "session_id", "run": "run_id", "engine": "engine"}
SESSION_ENGINES = ("claude", "codex")  # what sessions and RPA runs spend (memory's own rows aside)


@dataclass(frozen=True, slots=True)
class LedgerTotal:
    key: str  # the session id, run id or engine
    runs: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None  # sum of the known prices; None when no row had one
    priced_runs: int  # how many rows carried a price
    duration_s: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


class Ledger:
    """Over the memory core's :class:`~memory.storage.Database` (``eywa.db``); writes go through ``db.write()``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def available(self) -> bool:
        """Whether the database has the ledger table (the migration has run)."""
        async with self.db.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger'") as cur:
            return await cur.fetchone() is not None

    async def record(
        self,
        *,
        engine: str,
        usage: Usage,
        model: str = "",
        session_id: str = "",
        thread_id: str = "",
        run_id: str = "",
        stage: str = "",
        duration_s: float = 0.0,
        rollout_path: Path | str = "",
    ) -> int:
        """Append one row; returns its id (0 when a storage fault kept it out: logged, not raised)."""
        if engine not in {"claude", "codex"}:
            raise ValueError(f"ledger engine must be 'claude' or 'codex', not {engine!r}")
        try:
            async with self.db.write() as conn:
                cur = await conn.execute(
                    "INSERT INTO ledger(ts, engine, session_id, thread_id, run_id, stage, model, input_tokens, "
                    "output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, duration_s, rollout_path) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        datetime.now(UTC).isoformat(timespec="milliseconds"),
                        engine,
                        session_id,
                        thread_id,
                        run_id,
                        stage,
                        model,
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cache_read_tokens,
                        usage.cache_write_tokens,
                        usage.cost_usd,
                        float(duration_s),
                        str(rollout_path),
                    ),
                )
                row_id = cur.lastrowid
        except StorageError as exc:  # a full or damaged disk costs this row, never the run's answer
            logger.warning("cost of %s %s not recorded: %s", engine, session_id or thread_id, exc)
            return 0
        return int(row_id or 0)

    async def totals(self, by: GroupBy = "session", *, engines: tuple[str, ...] = ()) -> list[LedgerTotal]:
        """Sums per session, run or engine, largest cost first (rows without a key are left out); ``engines``
        keeps only those engines' rows (e.g. :data:`SESSION_ENGINES`)."""
        if by not in _COLUMN:
            raise ValueError(f"ledger totals by 'session', 'run' or 'engine', not {by!r}")
        column = _COLUMN[by]
        only = f" AND engine IN ({','.join('?' * len(engines))})" if engines else ""
        sql = (
            f"SELECT {column}, count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
            f"sum(cache_write_tokens), sum(cost_usd), count(cost_usd), sum(duration_s) "
            f"FROM ledger WHERE {column} != ''{only} GROUP BY {column} "
            f"ORDER BY coalesce(sum(cost_usd), 0) DESC, {column}"
        )
        async with self.db.conn.execute(sql, engines) as cur:
            rows = await cur.fetchall()
        return [
            LedgerTotal(
                key=str(r[0]),
                runs=int(r[1]),
                input_tokens=int(r[2] or 0),
                output_tokens=int(r[3] or 0),
                cache_read_tokens=int(r[4] or 0),
                cache_write_tokens=int(r[5] or 0),
                cost_usd=float(r[6]) if r[6] is not None else None,
                priced_runs=int(r[7]),
                duration_s=float(r[8] or 0.0),
            )
            for r in rows
        ]

    async def memory_spent_today(self, timezone: str) -> float:
        """USD memory's extractions spent since the owner's midnight (what its daily budget caps)."""
        return await spent_today(self.db.conn, timezone)

    async def linked_rollouts(self, session_id: str) -> list[Path]:
        """The Codex rollout files a session caused, in the order they were recorded."""
        async with self.db.conn.execute(
            "SELECT DISTINCT rollout_path FROM ledger WHERE session_id = ? AND engine = 'codex' "
            "AND rollout_path != '' ORDER BY id",
            (session_id,),
        ) as cur:
            return [Path(str(r[0])) for r in await cur.fetchall()]
