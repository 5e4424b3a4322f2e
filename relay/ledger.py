"""The relay's side of the cost ledger: one row per model run (a Claude turn or a Codex turn), kept by memory.

Rows carry the Claude session they belong to (a Codex turn caused by a session names that session: the
ledger is also where a session's Codex rollouts are linked to it until memory stores the link itself),
the RPA run and stage, the engine and model, tokens and USD where the engine reports a price. Memory owns
the table and its one writer (``Memory.record_cost``, memory.storage.ledger) and writes its own rows beside
these (engine ``memory``: each handoff extraction, memory.spend), so they can be shown apart from the
sessions' spend. This module turns the relay's :class:`~relay.events.Usage` into memory's rows.
"""

from __future__ import annotations

import logging
from pathlib import Path

from memory import MEMORY_ENGINE, Memory, StorageError
from memory.storage import SESSION_ENGINES, CostEntry, CostTotal, GroupBy
from relay.events import Usage

__all__ = ["MEMORY_ENGINE", "SESSION_ENGINES", "Ledger", "LedgerTotal"]

logger = logging.getLogger(__name__)

LedgerTotal = CostTotal  # the name the relay and the bot knew it by


class Ledger:
    """Over a memory's cost ledger (the local database: a service client's too, when opened with it)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    async def available(self) -> bool:
        """Whether the memory keeps a cost ledger (a local database whose migration has run)."""
        return await self.memory.keeps_costs()

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
        entry = CostEntry(
            engine=engine,
            model=model,
            session_id=session_id,
            thread_id=thread_id,
            run_id=run_id,
            stage=stage,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=usage.cost_usd,
            duration_s=float(duration_s),
            rollout_path=str(rollout_path),
        )
        try:
            return await self.memory.record_cost(entry)
        except StorageError as exc:  # a full or damaged disk costs this row, never the run's answer
            logger.warning("cost of %s %s not recorded: %s", engine, session_id or thread_id, exc)
            return 0

    async def totals(self, by: GroupBy = "session", *, engines: tuple[str, ...] = ()) -> list[LedgerTotal]:
        """Sums per session, run or engine, largest cost first (rows without a key are left out); ``engines``
        keeps only those engines' rows (e.g. :data:`SESSION_ENGINES`)."""
        return await self.memory.cost_totals(by, engines=engines)

    async def session_spent(self, session_id: str) -> float:
        """USD the ledger holds for one Claude session's turns (0 when it keeps none, or none for it)."""
        try:
            if not await self.available():
                return 0.0
            rows = await self.totals("session", engines=("claude",))
        except StorageError as exc:  # an unreadable ledger costs the subtraction, never the run
            logger.warning("spend of session %s not read: %s", session_id, exc)
            return 0.0
        return next((r.cost_usd or 0.0 for r in rows if r.key == session_id), 0.0)

    async def memory_spent_today(self, timezone: str) -> float:
        """USD memory's extractions spent since the owner's midnight (what its daily budget caps)."""
        return await self.memory.memory_spent_today(timezone)

    async def linked_rollouts(self, session_id: str) -> list[Path]:
        """The Codex rollout files a session caused, in the order they were recorded."""
        return await self.memory.linked_rollouts(session_id)
