"""A damaged memory database while the bot runs: said once in the chat, and the runs go on without memory."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble
from tests.memory.test_storage_faults import damage_root_pages

NOTICE = "Memory is unavailable"


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


async def _seed_then_damage(h: Harness) -> Path:
    """One remembered handoff (grounding would quote it), standing rules, then damaged pages under it all."""
    settings = h.settings()
    handoff = Handoff(
        session_id="earlier-zeppelin-1",
        date=(datetime.now(UTC) - timedelta(days=1)).replace(microsecond=0).isoformat(),
        headline="Zeppelin exporter now streams rows",
        projects=["billing"],
        keywords=["zeppelin", "exporter"],
        substance=2,
        what_happened=["Rewrote the zeppelin exporter to stream rows"],
    )
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "earlier.md").write_text(to_markdown(handoff), encoding="utf-8")
        async with await Eywa.open(settings.memory) as eywa:
            assert (await eywa.import_dir(Path(folder))).imported == 1
    rules = h.relay(settings).rules_path
    rules.parent.mkdir(parents=True, exist_ok=True)
    rules.write_text("# Rules\n\n- Always run `make check` before pushing.\n", encoding="utf-8")
    damage_root_pages(settings.memory.db_path)
    return settings.memory.db_path


async def test_a_damaged_memory_is_said_once_and_runs_go_on_without_it(h: Harness) -> None:
    db = await _seed_then_damage(h)
    h.claude.enqueue("The exporter now skips empty batches.", "Tests added.")
    app = await h.start()

    h.tg.push_message(OWNER, OWNER, "continue the zeppelin exporter work")
    await h.wait_text(lambda t: "skips empty batches" in t)
    notice = await h.wait_text(lambda t: NOTICE in t)
    assert str(db) in notice and "is damaged" in notice and "macupos memory recover" in notice
    system = str(h.claude.bodies[0]["system"])
    assert "make check" in system  # the standing rules still reach the agent
    assert "earlier-zeppelin-1" not in system  # no recalled handoffs: their pages cannot be read

    h.tg.push_message(OWNER, OWNER, "add tests for it")
    await h.wait_text(lambda t: "Tests added." in t)
    assert last_user_text(h.claude.bodies[-1]).endswith("add tests for it")
    await h.wait_handled(app)
    assert sum(NOTICE in t for t in h.texts()) == 1  # said once, not on every message
    assert app.services is not None and app.sessions is not None
    worker = app.sessions.chat(OWNER).worker
    if worker is not None:  # the chat's worker records the run's end after the answer is sent
        await asyncio.wait_for(asyncio.shield(worker), 60)
    runs = await app.services.state.recent_runs(OWNER)
    assert [r.status for r in runs] == ["done", "done"]
