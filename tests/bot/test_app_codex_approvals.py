"""Codex asking on the phone, end to end: Claude (Anthropic double) hands a task to Codex through the relay
tools, the real Codex app-server (OpenAI double) asks to run a command, and the owner's button decides."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.approvals import card_text
from relay.approvals import ApprovalRequest
from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.doubles.anthropic import ToolUse
from tests.doubles.openai import API_KEY_VAR, ExecCommand, OpenAIDouble, write_codex_config
from tests.doubles.telegram import TelegramDouble

ASKING = {"execute": {"approval_policy": "untrusted"}}


@pytest.fixture
async def openai_double() -> AsyncIterator[OpenAIDouble]:
    async with OpenAIDouble() as double:
        yield double


Asked = Callable[..., AbstractAsyncContextManager[tuple[Harness, Path, dict[str, Any]]]]


@pytest.fixture
def asked(tmp_path: Path, telegram_double: TelegramDouble, openai_double: OpenAIDouble) -> Asked:
    """Runs the bot while its Codex run asks to create a file in the project: ``async with asked(name,
    approval_timeout_s) as (h, that file, the owner's card)``."""

    @asynccontextmanager
    async def run(name: str, approval_timeout_s: str) -> AsyncIterator[tuple[Harness, Path, dict[str, Any]]]:
        env = {"MACUPOS_APPROVAL_TIMEOUT_S": approval_timeout_s, API_KEY_VAR: "double-key"}
        async with harness(tmp_path, telegram_double, **env) as h:
            target = h.project / name
            write_codex_config(h.tmp / "codex", openai_double.base_url)
            task = ToolUse("mcp__relay__codex", {"task": "make the file", "stage": "execute"})
            h.claude.enqueue(task, "Codex is done.")
            openai_double.enqueue(ExecCommand(f"touch {target}"), "done")
            await h.start(stages=ASKING)
            h.tg.push_message(OWNER, OWNER, "have codex make the file")
            yield h, target, await h.wait_message(lambda m: "🔐" in str(m.get("text", "")))

    return run


async def test_codex_asks_with_buttons_and_an_allowed_command_runs(asked: Asked) -> None:
    async with asked("codex.txt", approval_timeout_s="30") as (h, target, card):
        assert "Codex (execute) asks to run" in card["text"] and f"touch {target}" in card["text"]
        assert not target.exists()

        h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "Allow"))
        await h.wait_text(lambda t: "Codex is done." in t)
        assert target.exists()
        assert "allowed" in h.tg.messages(OWNER)[card["message_id"]]["text"]


async def test_an_unanswered_codex_request_is_denied_after_the_approval_timeout(
    asked: Asked, openai_double: OpenAIDouble
) -> None:
    async with asked("late.txt", approval_timeout_s="1") as (h, target, card):
        await h.wait_text(lambda t: "Codex is done." in t)
        assert "no answer in time" in h.tg.messages(OWNER)[card["message_id"]]["text"]
        assert not target.exists()
        assert any("rejected by user" in str(body) for body in openai_double.bodies)


def test_a_file_change_card_shows_the_files_and_a_preview_of_the_diff() -> None:
    request = ApprovalRequest(
        "thread-1",
        "file change",
        {"paths": ["app.py"], "diff": "--- app.py\n-x = 1\n+x = <2>"},
        engine="codex",
        stage="execute",
        diff_summary="M app.py (+1 −1)",
        reason="needs to write outside the sandbox",
    )
    text = card_text(request)
    assert text.startswith("🔐 Codex (execute) asks to change files:")
    assert "<code>M app.py (+1 −1)</code>" in text and "<i>needs to write outside the sandbox</i>" in text
    assert "<pre>--- app.py\n-x = 1\n+x = &lt;2&gt;</pre>" in text  # the diff is quoted, never markup
    claude = card_text(ApprovalRequest("s", "Bash", {"command": "ls"}))
    assert claude == "🔐 Claude asks to use <b>Bash</b>:\n<code>ls</code>"
