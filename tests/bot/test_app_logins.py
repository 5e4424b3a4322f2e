"""A refused login, end to end: the API doubles answer 401 as the real APIs do, and the chat says which
login and its fix, once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from relay.login import CLAUDE_LOGIN_FIX, CODEX_LOGIN_FIX
from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles import openai as openai_double
from tests.doubles.anthropic import ToolUse, auth_error
from tests.doubles.openai import API_KEY_VAR, OpenAIDouble, write_codex_config
from tests.doubles.telegram import TelegramDouble


def logins(h: Harness) -> list[str]:
    return [t for t in h.texts() if t.startswith("🔑")]


@pytest.fixture
async def openai() -> AsyncIterator[OpenAIDouble]:
    async with OpenAIDouble() as double:
        yield double


@pytest.fixture
async def codex_refused(
    tmp_path: Path, telegram_double: TelegramDouble, openai: OpenAIDouble
) -> AsyncIterator[Harness]:
    """The bot with the Codex CLI pointed at an OpenAI double that refuses its key (401), as the real API does."""
    async with harness(tmp_path, telegram_double, **{API_KEY_VAR: "double-key"}) as h:
        write_codex_config(h.tmp / "codex", openai.base_url)
        openai.default = openai_double.auth_error()
        yield h


@pytest.mark.parametrize("kind", ["expired", "invalid_key"])
async def test_an_expired_claude_login_is_said_once_with_the_fix(
    tmp_path: Path, telegram_double: TelegramDouble, kind: str
) -> None:
    async with harness(tmp_path, telegram_double) as h:
        h.claude.default = auth_error(kind)
        h.claude.hold = 1
        app = await h.start()
        h.tg.push_message(OWNER, OWNER, "fix the flaky export test")
        await h.tg.wait_for(h.claude.held.is_set, timeout=60)
        h.tg.push_message(OWNER, OWNER, "then bump the version")  # waits, and meets the same refusal
        await h.wait_text(lambda t: t.startswith("📥 Queued"))
        h.claude.release.set()

        def refused() -> list[str]:  # each run's progress message says why it stopped
            return [str(m.get("text")) for m in h.tg.messages(OWNER).values() if "login refused" in str(m.get("text"))]

        await h.tg.wait_for(lambda: len(refused()) == 2, timeout=60)  # the queued one ran too, and failed
        await h.wait_handled(app)
        assert h.claude.arrivals == 2 and all("Claude Code login refused" in t for t in refused())
        said = logins(h)
        assert len(said) == 1, said  # once, not once per instruction
        api_said = "OAuth token has expired" if kind == "expired" else "Invalid API key"
        assert said[0].startswith("🔑 Claude Code's login has expired or is invalid")
        assert api_said in said[0] and CLAUDE_LOGIN_FIX in said[0]
        assert not [t for t in h.texts() if t.startswith("❌")]  # no raw error besides


async def test_a_refused_codex_login_in_a_session_is_said_once_with_the_fix(
    codex_refused: Harness, openai: OpenAIDouble
) -> None:
    h = codex_refused
    plan = ToolUse("mcp__relay__codex", {"task": "plan the fix", "stage": "plan"})
    h.claude.enqueue(plan, "Codex could not run; I planned it myself.", plan, "Again without Codex.")
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "have codex plan the fix")
    await h.wait_text(lambda t: "planned it myself" in t, timeout=120)
    h.tg.push_message(OWNER, OWNER, "try codex once more")
    await h.wait_text(lambda t: "Again without Codex" in t, timeout=120)
    await h.wait_handled(app)
    said = logins(h)
    assert len(said) == 1, said
    assert said[0].startswith("🔑 Codex's login has expired or is invalid (unexpected status 401")
    assert "Incorrect API key provided" in said[0] and CODEX_LOGIN_FIX in said[0]
    assert len(openai.requests) == 2  # one model call per attempt: no retry loop on a refused key


async def test_a_refused_codex_login_stops_an_rpa_run_with_one_line(
    codex_refused: Harness, openai: OpenAIDouble
) -> None:
    h = codex_refused
    h.claude.default = "Research: the export drops empty rows."
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "/rpa fix the empty export")
    await h.wait_text(lambda t: t.startswith("🔑"), timeout=120)
    await h.wait_message(lambda m: "Codex login refused" in str(m.get("text", "")))
    await h.wait_handled(app)
    said = logins(h)
    assert len(said) == 1 and said[0].startswith("🔑 Codex's login") and CODEX_LOGIN_FIX in said[0]
    assert app.services is not None and app.sessions is not None
    worker = app.sessions.chat(OWNER).worker
    if worker is not None:  # the chat's worker records the run's end after the line is said
        await asyncio.wait_for(asyncio.shield(worker), 60)
    (run,) = await app.services.state.recent_runs(OWNER)
    assert run.status == "failed" and run.session_id  # the run's research session, not the chat's
    assert (await app.services.state.chat(OWNER)).session_id == ""
    h.tg.push_message(OWNER, OWNER, "/sessions")  # the relay run is listed by its session
    listing = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🧵"))
    assert f"({run.session_id[:8]})" in str(listing["text"])
