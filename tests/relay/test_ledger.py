"""The cost ledger in the memory database: rows per run, totals per session, run and engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.settings import MemorySettings
from memory.spend import Spend, record_spend
from relay.events import Usage
from relay.ledger import MEMORY_ENGINE, SESSION_ENGINES, Ledger


async def apply_ledger_migration(eywa: Eywa) -> Ledger:
    """The ledger table arrives with the memory database's schema (migration 3)."""
    ledger = Ledger(eywa)
    assert await ledger.available()
    return ledger


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    settings = MemorySettings(
        home=tmp_path / "mhome", claude_config_dir=tmp_path / "claude", codex_home=tmp_path / "codex", llm_enabled=False
    )
    async with await Eywa.open(settings) as eywa:
        yield await apply_ledger_migration(eywa)


async def test_totals_by_session_run_and_engine(ledger: Ledger) -> None:
    await ledger.record(
        engine="claude",
        usage=Usage(100, 20, cost_usd=0.01),
        model="claude-x",
        session_id="s1",
        run_id="r1",
        stage="research",
        duration_s=2.0,
    )
    await ledger.record(
        engine="codex",
        usage=Usage(300, 50, cache_read_tokens=10, cost_usd=None),
        model="gpt-x",
        session_id="s1",
        thread_id="t1",
        run_id="r1",
        stage="plan",
        duration_s=5.0,
        rollout_path="/tmp/rollout-1-t1.jsonl",
    )
    await ledger.record(engine="claude", usage=Usage(1, 1, cost_usd=0.5), session_id="s2")

    by_session = {t.key: t for t in await ledger.totals("session")}
    assert by_session["s1"].runs == 2 and by_session["s1"].tokens == 480
    assert by_session["s1"].cost_usd == pytest.approx(0.01) and by_session["s1"].priced == 1
    assert [t.key for t in await ledger.totals("session")] == ["s2", "s1"]  # largest cost first

    by_run = await ledger.totals("run")
    assert [(t.key, t.runs, t.duration_s) for t in by_run] == [("r1", 2, 7.0)]

    by_engine = {t.key: t for t in await ledger.totals("engine")}
    assert by_engine["codex"].cost_usd is None  # no price known: not a made-up zero
    assert by_engine["claude"].cost_usd == pytest.approx(0.51)


async def test_codex_rollouts_are_linked_to_their_session(ledger: Ledger) -> None:
    for path in ("/r/a.jsonl", "/r/b.jsonl", "/r/a.jsonl"):
        await ledger.record(engine="codex", usage=Usage(), session_id="s1", thread_id="t", rollout_path=path)
    assert [str(p) for p in await ledger.linked_rollouts("s1")] == ["/r/a.jsonl", "/r/b.jsonl"]
    assert await ledger.linked_rollouts("other") == []


async def test_unknown_engine_or_grouping_is_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="engine"):
        await ledger.record(engine="gemini", usage=Usage())
    with pytest.raises(ValueError, match="totals"):
        await ledger.totals("day")  # type: ignore[arg-type]


async def test_memory_spend_is_an_engine_of_its_own_and_kept_out_of_the_sessions(ledger: Ledger) -> None:
    await ledger.record(engine="claude", usage=Usage(100, 20, cost_usd=0.01), session_id="s1")
    assert isinstance(ledger.memory, Eywa)
    async with ledger.memory.db.write() as conn:  # what memory's extraction writes (memory.spend)
        await record_spend(conn, "s1", Spend("claude-haiku-4-5", 5000, 300, cost_usd=0.0065))

    engines = {t.key: t for t in await ledger.totals("engine")}
    sessions = {t.key: t for t in await ledger.totals("session", engines=SESSION_ENGINES)}

    assert engines[MEMORY_ENGINE].cost_usd == pytest.approx(0.0065) and engines[MEMORY_ENGINE].tokens == 5300
    assert sessions["s1"].runs == 1 and sessions["s1"].cost_usd == pytest.approx(0.01)
    assert await ledger.memory_spent_today("UTC") == pytest.approx(0.0065)
