"""Spending caps: a run's, a day's, a project's. End to end (the real CLI against the Anthropic double, whose
replies report expensive usage), and the arithmetic and settings on their own."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.app import BotApp
from bot.settings import BotSettings, ConfigError
from bot.spend_caps import Breach, RunMeter, SpendBook, cost_lines, refusal_text, stop_text
from bot.state import BotState
from relay.claude_prices import claude_cost
from relay.events import SessionResult, SpendTick, StageEnd, Usage
from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.anthropic import Reply, ToolUse
from tests.doubles.openai import API_KEY_VAR, OpenAIDouble, write_codex_config
from tests.doubles.telegram import TelegramDouble

MODEL = "claude-opus-5-5"  # what the bundled CLI asks for by default ($4 / $20 per million tokens)
# One model call that costs $0.82 and asks to run a command the owner must approve: the session would make a
# second request once the command ran (or was denied), unless the run is stopped after this one.
EXPENSIVE = Reply(
    ("Cleaning up first.", ToolUse("Bash", {"command": "rm -f build.log"})), input_tokens=200_000, output_tokens=1_000
)
EXPENSIVE_USD = 0.82


async def _runs(app: BotApp) -> list[tuple[str, float]]:
    assert app.services is not None
    return [(r.status, r.cost_usd) for r in reversed(await app.services.state.recent_runs(OWNER))]


async def _cli_reported(app: BotApp) -> float:
    """What Claude Code reported for the sessions' turns (its ResultMessage cost, kept in the cost ledger)."""
    assert app.services is not None and app.services.ledger is not None
    totals = await app.services.ledger.totals("engine")
    return sum(t.cost_usd or 0.0 for t in totals if t.key == "claude")


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_RUN_BUDGET_USD="0.5") as hh:
        yield hh


async def test_a_run_cap_stops_a_run_whose_model_calls_are_expensive(h: Harness) -> None:
    # One turn of several model calls: a harmless command ($0.32, under the $0.50 cap), then one that crosses it
    # while asking to run a command the owner must approve; the third call is never made.
    check = ToolUse("Bash", {"command": "echo checking"})
    h.claude.enqueue(
        Reply(("Checking first.", check), input_tokens=75_000, output_tokens=1_000),
        Reply(
            ("Cleaning up.", ToolUse("Bash", {"command": "rm -f build.log"})), input_tokens=75_000, output_tokens=1_000
        ),
        "Done, build.log removed.",
    )
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "remove build.log")

    told = await h.wait_text(lambda t: t.startswith("💸"))
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)
    assert len(h.claude.requests) == 2  # interrupted after the call that crossed the cap: nothing more asked
    assert "checking" in str(h.claude.bodies[1]["messages"])  # the first command ran: one turn, two calls
    assert "MACUPOS_RUN_BUDGET_USD=0.5" in told and "raise" in told
    # The card names what was spent when the cap fired: Claude Code's own figure ($0.6400) or, when the card is
    # written before that arrives (a loaded machine), the estimate without the last call's output ($0.6201).
    spent = float(re.search(r"spent \$([0-9.]+)", told).group(1))  # type: ignore[union-attr]
    assert 0.5 < spent <= 0.64 + 1e-9, told
    assert [t for t in h.texts() if t.startswith("💸")] == [told]  # told once
    # bot.db has what Claude Code reported for the turn (not the estimate, which knew no output tokens yet).
    [(status, cost)] = await _runs(app)
    assert status == "stopped" and cost == pytest.approx(0.64) == pytest.approx(await _cli_reported(app))
    assert cost == pytest.approx(2 * (claude_cost(MODEL, {"input_tokens": 75_000, "output_tokens": 1_000}) or 0))


async def test_a_daily_cap_stops_the_run_and_refuses_the_queued_follow_up(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_DAILY_BUDGET_USD="0.75") as h:
        h.claude.enqueue(EXPENSIVE, "never asked")
        h.claude.hold = 1  # the first call waits until the follow-up is queued behind it
        app = await h.start()
        h.tg.push_message(OWNER, OWNER, "remove build.log")
        await h.claude.held.wait()
        h.tg.push_message(OWNER, OWNER, "then rebuild the docs")
        await h.wait_text(lambda t: t.startswith("📥"))
        h.claude.release.set()

        stopped = await h.wait_text(lambda t: t.startswith("💸"))
        refused = await h.wait_text(lambda t: t.startswith("⛔"))
        await h.wait_handled(app)
        await h.wait_sessions_idle(app)
        assert len(h.claude.requests) == 1  # the follow-up never reached the model
        assert "MACUPOS_DAILY_BUDGET_USD=0.75" in stopped and "$0.8200" in stopped
        assert "MACUPOS_DAILY_BUDGET_USD=0.75" in refused and "«then rebuild the docs»" in refused
        assert await _runs(app) == [("stopped", pytest.approx(EXPENSIVE_USD))]
        assert app.services is not None
        assert await app.services.state.queued(OWNER) == []  # not left waiting: marked failed, the owner told

        h.tg.push_message(OWNER, OWNER, "just one more thing")  # a new instruction the same day: refused too
        await h.tg.wait_for(lambda: [t for t in h.texts() if t.startswith("⛔")][1:], timeout=60)
        await h.wait_handled(app)
        await h.wait_sessions_idle(app)
        assert len(h.claude.requests) == 1


async def test_a_queued_runs_own_budget_wins_over_the_default_and_cost_shows_it(h: Harness) -> None:
    h.claude.enqueue(
        Reply(("Reading.", ToolUse("Bash", {"command": "rm -f old.log"})), input_tokens=100_000, output_tokens=10), "ok"
    )
    app = await h.start()  # MACUPOS_RUN_BUDGET_USD=0.5: this run's $0.40 stays under it…
    assert app.services is not None and app.sessions is not None
    await app.services.state.enqueue(OWNER, "nightly clean-up", "text", budget_usd=0.25, origin="schedule:7")
    assert await app.sessions.run_queued(OWNER, OWNER)

    told = await h.wait_text(lambda t: t.startswith("💸"))  # …but its own budget ($0.25) stops it
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)
    assert len(h.claude.requests) == 1
    assert "schedule 7's budget=0.25" in told and "MACUPOS_RUN_BUDGET_USD" not in told
    [(status, cost)] = await _runs(app)
    assert status == "stopped" and cost == pytest.approx(0.4002) == pytest.approx(await _cli_reported(app))

    lines = "\n".join(await cost_lines(app.sessions.spend))
    assert "all sessions: $0.4002 (no daily cap)" in lines and "billing: $0.4002" in lines
    assert "a run's cap: $0.50 (MACUPOS_RUN_BUDGET_USD)" in lines
    assert "schedule 7: 1 run · $0.4002 · cap $0.25 a run" in lines


async def test_a_run_cap_ends_an_rpa_run_in_its_stage_and_no_later_stage_runs(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with OpenAIDouble() as openai:
        write_codex_config(tmp_path / "codex", openai.base_url)
        extra = {
            API_KEY_VAR: "double-key",
            "OPENAI_API_KEY": "",
            "OPENAI_BASE_URL": "",
            "MACUPOS_RUN_BUDGET_USD": "0.5",
        }
        async with harness(tmp_path, telegram_double, **extra) as h:
            h.claude.enqueue(Reply(("Researched the repo.",), input_tokens=200_000, output_tokens=10))
            app = await h.start()
            h.tg.push_message(OWNER, OWNER, "/rpa add greet.txt")

            told = await h.wait_text(lambda t: t.startswith("💸"), timeout=120)
            await h.wait_sessions_idle(app)
            assert len(h.claude.requests) == 1 and openai.requests == []  # Codex never asked to plan
            assert "MACUPOS_RUN_BUDGET_USD=0.5" in told and "$0.8000" in told
            # Cut in its turn, the research session never reported: the run keeps the estimate of its one call.
            assert await _runs(app) == [("stopped", pytest.approx(0.8))]


async def test_a_run_under_its_cap_is_not_touched(h: Harness) -> None:
    h.claude.enqueue(Reply(("All clean.",), input_tokens=1_000, output_tokens=100))
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "is the tree clean?")
    await h.wait_text(lambda t: "All clean." in t)
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)
    assert not [t for t in h.texts() if t.startswith("💸")]
    [(status, cost)] = await _runs(app)
    assert status == "done" and cost == pytest.approx(0.006) == pytest.approx(await _cli_reported(app))


# -- the arithmetic --------------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _settings(tmp_path: Path, **env: str) -> BotSettings:
    base = {"TELEGRAM_BOT_TOKEN": "1:x", "MACUPOS_ALLOWED_USERS": "1", "MACUPOS_HOME": str(tmp_path / "home")}
    projects = {"MACUPOS_PROJECTS": f"billing={tmp_path},other={tmp_path}", "MACUPOS_TIMEZONE": "Europe/Berlin"}
    return BotSettings.from_env({**base, **projects, **env}, cwd=tmp_path)


async def test_a_days_spend_is_its_finished_runs_and_the_runs_in_flight(tmp_path: Path) -> None:
    noon = datetime(2026, 3, 10, 11, 0, tzinfo=UTC).timestamp()  # 12:00 in Berlin
    clock = Clock(noon - 13 * 3600)  # 23:00 the day before, in Berlin
    settings = _settings(
        tmp_path,
        MACUPOS_RUN_BUDGET_USD="0.3",
        MACUPOS_DAILY_BUDGET_USD="1",
        MACUPOS_PROJECT_BUDGETS="billing=0.5",
    )
    state = await BotState.open(tmp_path / "bot.db", clock=clock)
    try:
        yesterday = await state.start_run(1, "old", project="billing")
        await state.finish_run(yesterday, "done", 5.0)
        clock.now = noon
        today = await state.start_run(1, "new", project="billing")
        await state.finish_run(today, "done", 0.2)
        book = SpendBook(state, settings, clock=clock)
        assert await book.refusal("billing") is None
        assert (book.today(), book.today("billing"), book.today("other")) == (0.2, 0.2, 0.0)

        meter = book.open(await state.start_run(1, "now", project="billing"), "billing")
        assert meter.add(SpendTick("s", "claude", "m", 0.25, 10)) and book.breach(meter) is None
        assert book.today() == pytest.approx(0.45)
        assert meter.add(SessionResult("s", "", 1, 1.0, Usage(cost_usd=0.31)))  # replaces the 0.25 estimate
        breach = book.breach(meter)
        assert breach == Breach("project", 0.5, pytest.approx(0.51), "billing")
        await state.finish_run(meter.run_id, "stopped", meter.spent)
        book.close(meter, meter.spent)
        assert book.today() == pytest.approx(0.51)
        assert await book.refusal("billing") == breach
        assert await book.refusal("other") is None

        clock.now = noon + 12 * 3600  # midnight has passed in Berlin: a new day
        assert book.today() == 0.0 and await book.refusal("billing") is None
    finally:
        await state.close()


def test_a_runs_meter_counts_reported_turns_and_replaces_their_estimates() -> None:
    m = RunMeter(1, "billing", 0.0, cap=1.0)
    assert m.add(SpendTick("s", "claude", "m", 0.4, 100)) and m.unsettled == 0.4
    assert not m.add(SpendTick("s", "claude", "claude-double", None, 100))  # unpriced: nothing to count
    assert not m.add(SessionResult("s", "", 1, 1.0, Usage()))  # no cost reported: the estimate stands
    assert m.spent == 0.4
    codex = StageEnd("r", "plan", "codex", "gpt-5", 1.0, Usage(cost_usd=0.1))
    assert m.add(codex) and m.spent == pytest.approx(0.5)
    assert not m.add(StageEnd("r", "plan", "claude", "m", 1.0, Usage(cost_usd=9.0)))  # its SessionResult counts
    assert m.add(SessionResult("s", "", 1, 1.0, Usage(cost_usd=0.45)))
    assert (m.settled, m.unsettled) == (pytest.approx(0.55), 0.0)


def test_the_owner_is_told_the_spend_the_cap_and_how_to_raise_it() -> None:
    run = Breach("run", 0.5, 0.82)
    text = stop_text(run, 0.82, "🌿 fix · ")
    assert "🌿 fix · " in text and "$0.8200" in text and "MACUPOS_RUN_BUDGET_USD=0.5" in text
    assert "raise MACUPOS_RUN_BUDGET_USD" in text and "budget=USD" in text
    project = Breach("project", 5.0, 5.1, "billing")
    assert "MACUPOS_PROJECT_BUDGETS billing=5" in stop_text(project, 1.0) and "$5.1000" in stop_text(project, 1.0)
    scheduled = Breach("run", 2.0, 2.2, origin="schedule:3", own_budget=True)
    assert "schedule 3's budget=2" in stop_text(scheduled, 2.2) and "/every" in stop_text(scheduled, 2.2)
    refused = refusal_text(Breach("day", 10.0, 10.5), "run   the\nnightly build")
    assert "MACUPOS_DAILY_BUDGET_USD=10" in refused and "«run the nightly build»" in refused


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MACUPOS_RUN_BUDGET_USD": "0"}, "MACUPOS_RUN_BUDGET_USD"),
        ({"MACUPOS_RUN_BUDGET_USD": "-1"}, "MACUPOS_RUN_BUDGET_USD"),
        ({"MACUPOS_DAILY_BUDGET_USD": "ten"}, "MACUPOS_DAILY_BUDGET_USD"),
        ({"MACUPOS_DAILY_BUDGET_USD": "inf"}, "MACUPOS_DAILY_BUDGET_USD"),
        ({"MACUPOS_PROJECT_BUDGETS": "billing"}, "MACUPOS_PROJECT_BUDGETS"),
        ({"MACUPOS_PROJECT_BUDGETS": "billing=nan"}, "MACUPOS_PROJECT_BUDGETS"),
        ({"MACUPOS_PROJECT_BUDGETS": "elsewhere=2"}, "MACUPOS_PROJECT_BUDGETS"),
    ],
)
def test_a_malformed_cap_is_refused_naming_its_variable(tmp_path: Path, env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _settings(tmp_path, **env)
    assert raised.value.variable == variable


def test_caps_are_read_in_dollars_and_projects_by_their_names(tmp_path: Path) -> None:
    s = _settings(tmp_path, MACUPOS_RUN_BUDGET_USD="$2.50", MACUPOS_PROJECT_BUDGETS=" Billing=5 , other=0.25")
    assert (s.run_budget_usd, s.daily_budget_usd, dict(s.project_budgets)) == (2.5, None, {"billing": 5, "other": 0.25})
    assert _settings(tmp_path).project_budgets == {}
