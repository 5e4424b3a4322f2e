"""Private projects and memory's spend, end to end through the bot: ``name=path:private`` and ``/memory off``
keep a project's sessions out of memory.db and out of other projects' recall; handoff extraction's cost shows
in ``/cost`` and its daily budget falls back to the deterministic handoff, said once."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from bot.app import BotApp
from memory.redact.privacy import PRIVATE_FILE
from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.anthropic import Reply, Scripted, structured_output
from tests.doubles.telegram import TelegramDouble

SECRET = "zanzibarquokka"


def memory_rows(h: Harness) -> list[str]:
    """memory.db as SQL text, one line a row, every table (FTS shadow tables included)."""
    with sqlite3.connect(h.home / "memory.db") as conn:
        return list(conn.iterdump())


def cards(h: Harness) -> list[str]:
    return [str(m.get("text", "")) for m in h.tg.messages(OWNER).values() if "📒" in str(m.get("text", ""))]


async def command(h: Harness, app: BotApp, text: str, expect: str) -> str:
    """Send ``text``; the newest reply containing ``expect`` once one more has come."""

    def replies() -> list[str]:
        return [t for t in h.texts() if expect in t]

    before = len(replies())
    h.tg.push_message(OWNER, OWNER, text)
    await h.tg.wait_for(lambda: len(replies()) > before, timeout=60)
    return replies()[-1]


async def run(h: Harness, text: str, answer: str) -> None:
    h.claude.enqueue(answer)
    h.tg.push_message(OWNER, OWNER, text)
    await h.wait_text(lambda t: answer in t)


async def test_a_private_project_leaves_nothing_in_memory_and_says_so(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with harness(tmp_path, telegram_double) as h:
        h.extra_env["MACUPOS_PROJECTS"] = f"billing={h.project}:private,other={tmp_path / 'other'}"
        app = await h.start()
        assert str(h.project) in (h.home / PRIVATE_FILE).read_text()  # for the hooks, from the start

        await run(h, f"fix the {SECRET} export", "Fixed the export.")
        await command(h, app, "/project other", "📁 Project other")
        await run(h, "water the roses", "Watered.")
        await h.tg.wait_for(lambda: len(cards(h)) >= 1, timeout=60)  # other's session ended: billing's did before

        assert len(cards(h)) == 1 and SECRET not in cards(h)[0]
        billing = [r for r in await app.services.state.recent_runs(OWNER) if r.project == "billing"]
        session_id = billing[0].session_id
        rows = memory_rows(h)
        assert not any(SECRET in r or str(h.project) in r for r in rows)
        # Only its cost is kept (tokens and dollars, no words): /cost counts every session.
        assert all(r.startswith('INSERT INTO "ledger"') for r in rows if session_id in r)

        await command(h, app, "/project billing", "📁 Project billing")
        status = await command(h, app, "/memory", "Memory is")
        assert "off" in status and ":private in MACUPOS_PROJECTS" in status
        on = await command(h, app, "/memory on", "Memory stays off")
        assert "MACUPOS_PROJECTS" in on


async def test_memory_off_and_on_in_a_chat_and_recall_from_another_project(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with harness(tmp_path, telegram_double) as h:
        app = await h.start()
        await run(h, f"fix the {SECRET} export", "Fixed the export.")
        await h.tg.wait_for(lambda: len(cards(h)) >= 1, timeout=60)  # remembered while memory was on

        off = await command(h, app, "/memory off", "Memory is")
        assert "off" in off and str(h.project) in (h.home / PRIVATE_FILE).read_text()
        await run(h, f"now the {SECRET} import, part two", "Fixed the import.")
        await command(h, app, "/project other", "📁 Project other")  # ends billing's session
        elsewhere = await command(h, app, f"/recall {SECRET}", SECRET)
        assert "Nothing in memory matches" in elsewhere
        handoffs = await command(h, app, "/handoffs", "handoffs")
        assert SECRET not in handoffs

        await command(h, app, "/project billing", "📁 Project billing")
        own = await command(h, app, f"/recall {SECRET}", SECRET)
        assert "🔎" in own  # its own chat still finds what it remembered before
        assert not any("part two" in r for r in memory_rows(h))
        assert len(cards(h)) == 1

        on = await command(h, app, "/memory on", "Memory is")
        assert "on" in on and str(h.project) not in (h.home / PRIVATE_FILE).read_text()
        await run(h, "add the audit log", "Added the log.")
        await command(h, app, "/project other", "📁 Project other")
        await h.tg.wait_for(lambda: len(cards(h)) >= 2, timeout=60)


def extraction_costs(body: dict[str, Any]) -> Scripted:
    """The Messages double's answers: handoff extraction (the StructuredOutput tool) costs $0.205 of haiku;
    the session's own turns answer in plain text."""
    if any(t.get("name") == "StructuredOutput" for t in body.get("tools") or []):
        handoff = {
            "headline": "Export the billing report",
            "projects": ["billing"],
            "keywords": ["billing-export"],
            "substance": 1,
            "what_happened": ["Exported the report"],
            "insights": [],
            "key_files": [],
            "open_threads": [],
        }
        return Reply((structured_output(handoff),), input_tokens=200_000, output_tokens=1_000)
    return "Done."


async def test_extraction_spend_shows_in_cost_and_its_budget_falls_back_and_tells_once(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_MEMORY_LLM="1", MACUPOS_MEMORY_DAILY_BUDGET_USD="0.10") as h:
        h.claude.default = extraction_costs
        app = await h.start()
        for n in range(3):
            h.tg.push_message(OWNER, OWNER, "/new")
            h.tg.push_message(OWNER, OWNER, f"export report {n}")
            await h.tg.wait_for(lambda n=n: len(cards(h)) >= n + 1, timeout=90)

        told = [t for t in h.texts() if "daily budget" in t]
        assert len(told) == 1 and "$0.10" in told[0]
        assert "Export the billing report" in cards(h)[0]  # the model's handoff, within budget
        assert all("Export the billing report" not in c for c in cards(h)[1:])  # deterministic after
        cost = await command(h, app, "/cost", "Cost")
        assert "Memory</b> (handoff extraction)" in cost
        assert "1 calls" in cost and "today $0.2050 of $0.10" in cost
        assert "claude:" in cost
