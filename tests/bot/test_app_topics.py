"""Branches in a forum supergroup: ``@NAME`` in the General topic gives the branch a topic of its own, the
branch's session writes there (progress, answer, approvals), and whatever is written in that topic goes to
the branch without an ``@`` (the real python-telegram-bot and Claude CLI against the doubles, real git)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.app import BotApp
from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.bot.test_app_branches import commit_file, cwd_of, git, worktree
from tests.doubles.anthropic import ToolUse, last_user_text
from tests.doubles.telegram import TelegramDouble

GROUP = -1001234567890  # a forum supergroup; OWNER (allowlisted) writes in it


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        git(hh.project, "init", "-q", "-b", "main")
        commit_file(hh.project, "app.py", "print('hello')\n", "first")
        hh.tg.make_forum(GROUP)
        # Each answer says where it ran and what it was asked: "[fix-login] do X".
        hh.claude.default = lambda body: f"[{Path(cwd_of(body)).name}] {_asked(body)}"
        yield hh


def _asked(body: Mapping[str, Any]) -> str:
    lines = last_user_text(body).strip().splitlines()
    return lines[-1] if lines else ""


async def settled(h: Harness, app: BotApp) -> None:
    """Every update handled and every lane's worker done."""
    await h.wait_handled(app)
    await h.wait_sessions_idle(app)


async def topic_of(h: Harness, branch: str) -> int:
    """The thread id of the topic the bot made for ``branch`` (waits for it)."""

    def find() -> int:
        return next((tid for tid, t in h.tg.topics(GROUP).items() if t["name"] == f"🌿 {branch}"), 0)

    return await h.tg.wait_for(find, timeout=60)


async def answer_in(h: Harness, thread: int | None, text: str) -> str:
    """Wait for the session's answer containing ``text`` among the bot's messages in one topic."""

    def find() -> str:
        return next((t for t in h.tg.texts_in(GROUP, thread) if text in t), "")

    return await h.tg.wait_for(find, timeout=120)


async def test_an_at_branch_in_general_gets_a_topic_and_that_topic_talks_to_the_branch(h: Harness) -> None:
    app = await h.start()
    h.tg.push_message(OWNER, GROUP, "@fix-login do X")
    tid = await topic_of(h, "fix-login")
    # The session's progress card and its answer are in the branch's topic, not in General.
    await answer_in(h, tid, "[fix-login] do X")
    in_topic = h.tg.texts_in(GROUP, tid)
    assert any(t.startswith("⏳") and "fix-login" in t and "do X" in t for t in in_topic), in_topic
    assert cwd_of(h.claude.bodies[-1]) == str(worktree(h, "fix-login"))
    await settled(h, app)
    assert not any("do X" in t for t in h.tg.texts_in(GROUP, None))

    # A plain message written inside the topic goes to the branch: no @, and long enough not to be terse.
    h.tg.push_message(
        OWNER, GROUP, "now make the logout page work the same way as the login page", message_thread_id=tid
    )
    await answer_in(h, tid, "[fix-login] now make the logout page work")
    assert cwd_of(h.claude.bodies[-1]) == str(worktree(h, "fix-login"))
    await settled(h, app)

    # In General, a message without @ goes to the main checkout, and its answer stays in General.
    h.tg.push_message(OWNER, GROUP, "update the readme of the main checkout with a short summary please")
    await answer_in(h, None, "[billing] update the readme")
    assert cwd_of(h.claude.bodies[-1]) == str(h.project)
    assert not any("update the readme" in t for t in h.tg.texts_in(GROUP, tid))
    await settled(h, app)

    # A second branch gets a second topic; its work goes there and not into the first branch's. (Addressed
    # to the bot first, as a group with privacy mode needs: the mention is not a branch.)
    h.tg.push_message(OWNER, GROUP, "@macupos_test_bot @fix-signup do Y")
    tid2 = await topic_of(h, "fix-signup")
    assert tid2 != tid
    await answer_in(h, tid2, "[fix-signup] do Y")
    assert cwd_of(h.claude.bodies[-1]) == str(worktree(h, "fix-signup"))
    assert not any("do Y" in t for t in h.tg.texts_in(GROUP, tid))
    await settled(h, app)
    assert sorted(t["name"] for t in h.tg.topics(GROUP).values()) == ["🌿 fix-login", "🌿 fix-signup"]

    # Naming a branch again from General reuses its topic: no third one. In its topic, a mention of the bot
    # is dropped and the rest goes to the branch.
    h.tg.push_message(OWNER, GROUP, "@fix-login do Z")
    await answer_in(h, tid, "[fix-login] do Z")
    await settled(h, app)
    h.tg.push_message(OWNER, GROUP, "@macupos_test_bot and W", message_thread_id=tid)
    await answer_in(h, tid, "[fix-login] and W")
    await settled(h, app)
    assert last_user_text(h.claude.bodies[-1]).strip().endswith("and W")
    assert "macupos_test_bot" not in last_user_text(h.claude.bodies[-1])
    assert len(h.tg.topics(GROUP)) == 2
    assert h.claude.arrivals == len(h.claude.bodies) == 6  # each instruction ran once


async def test_a_message_in_a_topic_made_by_hand_goes_to_the_main_checkout(h: Harness) -> None:
    app = await h.start()
    made = h.tg.push_forum_topic(OWNER, GROUP, "notes")
    tid = made["message"]["message_id"]
    await settled(h, app)
    h.tg.push_message(OWNER, GROUP, "tidy the changelog of the project and keep it short please", message_thread_id=tid)
    await settled(h, app)
    assert [cwd_of(b) for b in h.claude.bodies] == [str(h.project)]
    assert any("[billing] tidy the changelog" in t for t in h.tg.texts(GROUP))
    assert list(h.tg.topics(GROUP)) == [tid]  # no branch topic was made for it
    # Making a topic is a service message (forum_topic_created), not something sent to the bot to run.
    assert not any("Send text or a voice note" in t for t in h.tg.texts(GROUP))


async def test_a_branch_sessions_approval_is_asked_in_its_topic_and_names_the_branch(h: Harness) -> None:
    h.claude.enqueue(ToolUse("Bash", {"command": "touch approved.txt", "description": "make a file"}), "Made it.")
    await h.start()
    h.tg.push_message(OWNER, GROUP, "@fix-login make the file")
    tid = await topic_of(h, "fix-login")

    def card() -> dict[str, Any] | None:
        return next((m for m in h.tg.messages_in(GROUP, tid).values() if "🔐" in str(m.get("text", ""))), None)

    found = await h.tg.wait_for(card, timeout=120)
    assert not any("🔐" in t for t in h.tg.texts_in(GROUP, None))  # not in General
    assert "touch approved.txt" in found["text"]
    h.tg.push_callback(OWNER, GROUP, found["message_id"], button(found, "Allow"))
    await answer_in(h, tid, "Made it.")
    assert (worktree(h, "fix-login") / "approved.txt").exists()
    assert not (h.project / "approved.txt").exists()
    assert "allowed" in h.tg.messages(GROUP)[found["message_id"]]["text"]
    # Several branches may ask at once: the card should say whose session asks.
    assert "fix-login" in found["text"]
