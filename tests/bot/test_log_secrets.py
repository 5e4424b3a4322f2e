"""The running bot's log never contains its token: the whole log of a run with an API error, Telegram's flood
control, an instruction that quotes the token, a restart and a kill, read at debug level."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest

from relay.process import kill_marked
from tests.bot.app_harness import OWNER, Harness, harness
from tests.cli_env import MACUPOS
from tests.doubles.anthropic import ErrorReply
from tests.doubles.telegram import TelegramDouble

# A token of the real shape (made up): the redactor knows it, and the bot masks it exactly too.
TOKEN = "7412365890:AAHf3kQ9zX_ab-CDefGhIjKlMnOpQrStUvW"


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with TelegramDouble(token=TOKEN) as tg, harness(tmp_path, tg) as hh:
        hh.write_config_toml()
        yield hh


async def _start(h: Harness, log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as out:  # the child keeps its own descriptor
        return await asyncio.create_subprocess_exec(
            str(MACUPOS), "-vv", "bot", env=h.env, cwd=str(h.tmp), stdout=out, stderr=out
        )


@pytest.mark.slow
async def test_the_bot_s_log_never_holds_its_token_through_errors_retries_and_restarts(h: Harness) -> None:
    log = h.tmp / "bot.log"
    h.claude.enqueue(ErrorReply(529, "overloaded_error", "Overloaded"))  # the first run fails on the API
    h.claude.default = "Rotated, and the deploy is green."
    h.tg.set_flood(1, retry_after=1)  # every burst of sends and edits meets Telegram's 429

    bot = await _start(h, log)
    h.tg.push_message(OWNER, OWNER, "deploy the billing service")
    await h.wait_text(lambda t: t.startswith("❌"), timeout=120)
    # The owner pastes the token into an instruction: it reaches the agent (their choice), never the log.
    h.tg.push_message(OWNER, OWNER, f"rotate the bot token {TOKEN} tonight")
    await h.wait_text(lambda t: "Rotated, and the deploy is green." in t, timeout=120)
    bot.terminate()  # a restart: graceful stop, then a new process
    assert await asyncio.wait_for(bot.wait(), 120) == 0

    bot = await _start(h, log)
    h.claude.hold = 1
    h.tg.push_message(OWNER, OWNER, "run the nightly import")
    await asyncio.wait_for(h.claude.held.wait(), 120)
    bot.kill()  # and a crash mid-run
    await bot.wait()
    kill_marked("CLAUDE_CONFIG_DIR", str(h.tmp / "claude-home" / ".claude"))
    h.claude.release.set()

    bot = await _start(h, log)
    await h.wait_message(lambda m: "restarted while working on" in str(m.get("text", "")), timeout=120)
    h.tg.push_message(OWNER, OWNER, "/status")
    await h.wait_text(lambda t: t.startswith("📁 Project"), timeout=120)
    bot.terminate()
    assert await asyncio.wait_for(bot.wait(), 120) == 0

    text = log.read_text(encoding="utf-8", errors="replace")
    # The scenario happened, and the log saw it: three starts, the API error, debug lines of the Bot API calls.
    assert any(c.status == 429 for c in h.tg.requests), "flood control never answered 429"
    assert "run in chat 42 failed: Claude Code run failed: API Error: 529" in text
    assert text.count("getMe") >= 3 and "DEBUG" in text
    secret = TOKEN.split(":", 1)[1]
    for form in (TOKEN, quote(TOKEN, safe=""), quote(TOKEN), secret, secret[:16]):
        assert form not in text, f"the log holds {form[:12]}…"
