"""Fixtures for the structured facts: a FactsApi on a private home, and helpers for fixed times."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.facts.api import FactsApi, ScriptLimits

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LIMITS = ScriptLimits(time_s=2.0, max_commands=200_000)


def days(n: float) -> datetime:
    return T0 + timedelta(days=n)


def facts_rows(db_path: Path) -> list[tuple[Any, ...]]:
    """The whole facts table, for state comparisons (rebuild, round trips)."""
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(
            "SELECT id, subject, ctype, fields, target, via_link, created_ms, ts_ms, last_access_ms, access_count, "
            "state, sweep_marked_ms, provenance FROM facts ORDER BY id"
        ).fetchall()
    finally:
        conn.close()


async def open_api(home: Path, **kw: Any) -> FactsApi:
    return await FactsApi.open(home, home / "memory.db", limits=kw.pop("limits", LIMITS), **kw)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[FactsApi]:
    facts = await open_api(tmp_path / "home")
    try:
        yield facts
    finally:
        await facts.close()


async def ok(api: FactsApi, script: str, when: datetime | None = T0) -> str:
    result = await api.run_script(script, as_of=when)
    assert result.ok, result.text
    return result.text
