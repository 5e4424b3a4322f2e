"""What every part of the bot's durable state shares: the database, the clock and small helpers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from memory.storage import Database

__all__ = ["StateBase", "check_value", "dumps"]


def check_value(value: str, allowed: Any, what: str) -> None:
    if value not in get_args(allowed):
        raise ValueError(f"unknown {what} {value!r} (known: {', '.join(get_args(allowed))})")


def dumps(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


class StateBase:
    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self._db.conn.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        async with self._db.conn.execute(sql, params) as cur:
            return await cur.fetchone()

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement in its own write transaction; the rows it changed."""
        async with self._db.write() as conn:
            cur = await conn.execute(sql, params)
            return int(cur.rowcount)
