"""Memory's own spend: each handoff extraction (the real Claude Code CLI against the Messages double) is a
``memory`` row of the cost ledger, and past the daily budget the deterministic handoff is used."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.errors import SettingsError
from memory.facade import Eywa
from memory.settings import MemorySettings
from memory.spend import Spend, day_start, record_spend, spent_today
from tests.doubles.anthropic import AnthropicDouble, Reply, structured_output

GOOD: dict[str, Any] = {
    "headline": "Add retries to the payment client",
    "projects": ["billing"],
    "keywords": ["payment-retry"],
    "substance": 1,
    "what_happened": ["Added retries"],
    "insights": [],
    "key_files": [],
    "open_threads": [],
}
# 200k input and 1k output tokens of claude-haiku-4-5 ($1 / $5 per million): $0.205 an extraction.
COSTLY = Reply((structured_output(GOOD),), input_tokens=200_000, output_tokens=1_000)


def transcript(folder: Path, session_id: str, text: str) -> Path:
    start = datetime.now(UTC) - timedelta(hours=1)
    lines = [
        {
            "type": role,
            "uuid": f"{session_id}-{n}",
            "parentUuid": f"{session_id}-{n - 1}" if n else None,
            "sessionId": session_id,
            "cwd": "/work/billing",
            "timestamp": (start + timedelta(minutes=n)).isoformat().replace("+00:00", "Z"),
            "message": {"role": role, "content": content},
        }
        for n, (role, content) in enumerate([("user", text), ("assistant", [{"type": "text", "text": "Done."}])])
    ]
    path = folder / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def settings_for(tmp_path: Path, env: dict[str, str], **kw: Any) -> MemorySettings:
    return MemorySettings(
        home=tmp_path / "home",
        claude_config_dir=tmp_path / "claude",
        codex_home=tmp_path / "codex",
        llm_enabled=True,
        claude_env=env,
        llm_timeout_s=60,
        extract_concurrency=1,
        **kw,
    )


async def test_the_extraction_cost_goes_into_the_ledger_as_memory_spend(
    tmp_path: Path, anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str]
) -> None:
    anthropic_double.enqueue(COSTLY)
    settings = settings_for(tmp_path, claude_cli_env)
    async with await Eywa.open(settings) as eywa:
        report = await eywa.ingest([transcript(tmp_path / "t", "s-pay", "add retries to the payment client")])
        today = await spent_today(eywa.db.conn, settings.timezone)
        async with eywa.db.conn.execute(
            "SELECT engine, session_id, stage, model, input_tokens, output_tokens, cost_usd FROM ledger"
        ) as cur:
            rows = [tuple(r) for r in await cur.fetchall()]
    assert report.handoffs_llm == 1
    [(engine, session, stage, model, input_tokens, output_tokens, cost)] = rows
    assert (engine, session, stage, model) == ("memory", "s-pay", "extract", "claude-haiku-4-5")
    assert (input_tokens, output_tokens) == (200_000, 1_000)
    assert cost == pytest.approx(0.205, rel=0.01)
    assert today == pytest.approx(cost)


async def test_past_the_daily_budget_the_deterministic_handoff_is_used(
    tmp_path: Path, anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str]
) -> None:
    anthropic_double.enqueue(COSTLY, COSTLY)
    settings = settings_for(tmp_path, claude_cli_env, memory_daily_budget_usd=0.10)
    async with await Eywa.open(settings) as eywa:
        first = await eywa.ingest([transcript(tmp_path / "t", "s-1", "add retries to the payment client")])
        second = await eywa.ingest([transcript(tmp_path / "t", "s-2", "log the retried payments")])
        view = await eywa.show("s-2")
    assert first.handoffs_llm == 1 and first.budget_capped == []  # under budget when it started
    assert second.handoffs_llm == 0 and second.budget_capped == ["s-2"]
    assert view.handoff is not None and view.handoff.source == "fallback"
    assert len(anthropic_double.requests) == 1


async def test_a_day_is_the_owners_day(tmp_path: Path) -> None:
    settings = MemorySettings(home=tmp_path, claude_config_dir=tmp_path, codex_home=tmp_path)
    late = datetime(2025, 6, 1, 23, 30, tzinfo=UTC)  # already 2 June in Tokyo
    assert day_start("Asia/Tokyo", late) == datetime(2025, 6, 1, 15, 0, tzinfo=UTC)
    async with await Eywa.open(settings) as eywa:
        async with eywa.db.write() as conn:
            await record_spend(conn, "a", Spend("m", cost_usd=0.25), now=late - timedelta(hours=9))
            await record_spend(conn, "b", Spend("m", cost_usd=0.5), now=late)
            await record_spend(conn, "c", Spend("m"), now=late)  # no price: counts as nothing
        assert await spent_today(eywa.db.conn, "Asia/Tokyo", now=late) == pytest.approx(0.5)
        assert await spent_today(eywa.db.conn, "UTC", now=late) == pytest.approx(0.75)


def test_the_budget_is_a_setting(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert MemorySettings.from_env(env).memory_daily_budget_usd is None
    assert MemorySettings.from_env({**env, "MACUPOS_MEMORY_DAILY_BUDGET_USD": "0.5"}).memory_daily_budget_usd == 0.5
    with pytest.raises(SettingsError, match="MACUPOS_MEMORY_DAILY_BUDGET_USD"):
        MemorySettings.from_env({**env, "MACUPOS_MEMORY_DAILY_BUDGET_USD": "-1"})
    with pytest.raises(SettingsError, match="MACUPOS_MEMORY_DAILY_BUDGET_USD"):
        MemorySettings.from_env({**env, "MACUPOS_MEMORY_DAILY_BUDGET_USD": "lots"})
