"""Who may use the bot, end to end: strangers never reach an agent, redeliveries are handled once, approvals
act only for the owner who may press them."""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.auth import REFUSAL_TEXT
from tests.bot.app_harness import FRIEND, OWNER, STRANGER, Harness, button, harness
from tests.doubles.anthropic import ToolUse
from tests.doubles.telegram import TelegramDouble

# `MACUPOS_TEST_STRANGER_UPDATES=10000 pytest -k stranger` runs the full flood.
STRANGER_UPDATES = int(os.environ.get("MACUPOS_TEST_STRANGER_UPDATES", "2000"))


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_APPROVAL_TIMEOUT_S="30") as hh:
        yield hh


def _stranger_update(tg: TelegramDouble, n: int) -> None:
    user = 10_000 + n % 50
    chat = user if n % 3 else -1001  # private chats, and one group full of strangers
    kind = n % 12
    if kind == 0:
        tg.push_message(user, chat, f"run rm -rf / please {n}")
    elif kind == 1:
        tg.push_message(user, chat, "/status")
    elif kind == 2:
        tg.push_voice(user, chat, b"OggS-not-really", 3)
    elif kind == 3:
        tg.push_document(user, chat, b"payload", "x.sh", caption="run this")
    elif kind == 4:
        tg.push_callback(user, chat, 1, "forged-token")
    elif kind == 5:
        tg.push_edited_message(user, chat, 1, "edited instruction")
    elif kind == 6:
        tg.push_forwarded(user, chat, "forwarded instruction", origin_user_id=OWNER)
    elif kind == 7:
        tg.push_update(
            {"channel_post": {"message_id": n, "date": 1, "chat": {"id": -2002, "type": "channel"}, "text": "x"}}
        )
    elif kind == 8:
        q = {"id": str(n), "from": {"id": user, "is_bot": False, "first_name": "s"}, "query": "x", "offset": ""}
        tg.push_update({"inline_query": q})
    elif kind == 9:
        tg.push_update({"poll": {"id": str(n), "question": "q", "options": [], "total_voter_count": 0,
                                  "is_closed": False, "is_anonymous": True, "type": "regular",
                                  "allows_multiple_answers": False}})  # fmt: skip
    elif kind == 10:
        tg.push_message(user, chat, "/new")
    else:
        tg.push_message(user, chat, "removed; push")


def _refusals(h: Harness) -> Counter[int]:
    per_chat: Counter[int] = Counter()
    for call in h.tg.sent:
        if call.method == "sendMessage" and call.params.get("text") == REFUSAL_TEXT:
            per_chat[int(call.params["chat_id"])] += 1
    return per_chat


async def test_a_flood_of_strangers_updates_of_every_kind_runs_nothing_and_is_refused_once_per_chat(h: Harness) -> None:
    app = await h.start()
    assert app.services is not None and app.intake is not None
    for n in range(STRANGER_UPDATES):
        _stranger_update(h.tg, n)
    await h.wait_handled(app)
    assert h.claude.arrivals == 0  # no agent run at all
    assert h.tg.calls("getFile") == []  # no stranger's voice note was even downloaded
    assert await app.services.state.last_update_id() is None  # strangers cost no database writes
    refusals = _refusals(h)
    assert refusals and max(refusals.values()) == 1
    answered = [c for c in h.tg.sent if c.method == "answerCallbackQuery"]
    assert all(c.params.get("text") == REFUSAL_TEXT for c in answered)
    assert app.intake.admitted == 0


async def test_each_update_delivered_three_times_is_handled_once(h: Harness) -> None:
    h.claude.enqueue("Ran it once.")
    app = await h.start()
    assert app.services is not None
    status = h.tg.push_message(OWNER, OWNER, "/status")["update_id"]
    work = h.tg.push_message(OWNER, OWNER, "run the migration")["update_id"]
    for seen in (1, 2):
        await h.tg.wait_for(lambda n=seen: min(h.tg.deliveries(status), h.tg.deliveries(work)) == n)
        h.tg.deliver_again(status)
        h.tg.deliver_again(work)
    await h.tg.wait_for(lambda: min(h.tg.deliveries(status), h.tg.deliveries(work)) == 3)
    await h.wait_text(lambda t: "Ran it once" in t)
    await h.wait_handled(app)
    assert len([t for t in h.texts() if t.startswith("📁 Project")]) == 1
    assert h.claude.arrivals == 1
    assert len(await app.services.state.recent_runs(OWNER)) == 1
    stored = await app.services.state.get_update(work)
    assert stored is not None and stored.status == "done"


async def _approval(h: Harness) -> dict[str, Any]:
    return await h.wait_message(lambda m: "🔐" in str(m.get("text", "")))


async def test_only_the_owner_can_answer_an_approval_and_an_allowed_tool_runs(h: Harness) -> None:
    h.claude.enqueue(ToolUse("Bash", {"command": "touch approved.txt", "description": "make a file"}), "Made it.")
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "make the file")
    card = await _approval(h)
    allow = button(card, "Allow")

    h.tg.push_callback(FRIEND, OWNER, card["message_id"], allow)  # on the allowlist, but not this run's owner
    h.tg.push_callback(STRANGER, OWNER, card["message_id"], allow)
    await h.wait_handled(app)
    toasts = [str(c.params.get("text")) for c in h.tg.sent if c.method == "answerCallbackQuery"]
    assert any("not for you" in t for t in toasts) and REFUSAL_TEXT in toasts
    assert not (h.project / "approved.txt").exists()
    assert "🔐" in h.tg.messages(OWNER)[card["message_id"]]["text"]  # still waiting

    h.tg.push_callback(OWNER, OWNER, card["message_id"], allow)
    await h.wait_text(lambda t: "Made it." in t)
    assert (h.project / "approved.txt").exists()
    assert "allowed" in h.tg.messages(OWNER)[card["message_id"]]["text"]


async def test_allow_for_this_session_lets_the_same_tool_run_again_without_asking(h: Harness) -> None:
    h.claude.enqueue(
        ToolUse("Bash", {"command": "touch first.txt", "description": "make a file"}),
        ToolUse("Bash", {"command": "touch second.txt", "description": "make another"}),
        "Made both.",
    )
    await h.start()
    h.tg.push_message(OWNER, OWNER, "make two files")
    card = await _approval(h)
    assert "touch first.txt" in card["text"]
    h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "for this session"))
    await h.wait_text(lambda t: "Made both." in t)
    assert (h.project / "first.txt").exists() and (h.project / "second.txt").exists()
    assert "allowed for this session" in h.tg.messages(OWNER)[card["message_id"]]["text"]
    assert len([m for m in h.tg.messages(OWNER).values() if "🔐" in str(m.get("text", ""))]) == 1


async def test_an_unanswered_approval_is_denied_after_the_timeout(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_APPROVAL_TIMEOUT_S="1") as h:
        h.claude.enqueue(ToolUse("Bash", {"command": "touch denied.txt", "description": "make a file"}), "Skipped it.")
        await h.start()
        h.tg.push_message(OWNER, OWNER, "make the other file")
        card = await _approval(h)
        allow = button(card, "Allow")
        await h.wait_text(lambda t: "Skipped it." in t)
        assert "no answer in time" in h.tg.messages(OWNER)[card["message_id"]]["text"]
        assert not (h.project / "denied.txt").exists()
        tool_result = h.claude.bodies[-1]["messages"][-1]["content"][0]
        assert tool_result["type"] == "tool_result" and tool_result["is_error"] is True
        assert "not approved" in str(tool_result["content"])
        # A late press after the timeout does nothing: it is told so, and Claude hears nothing more.
        arrivals = h.claude.arrivals
        h.tg.push_callback(OWNER, OWNER, card["message_id"], allow)
        await h.tg.wait_for(lambda: any(c.method == "answerCallbackQuery" for c in h.tg.sent))
        toasts = [str(c.params.get("text")) for c in h.tg.sent if c.method == "answerCallbackQuery"]
        assert toasts == ["This button is not for you, or it has expired."]
        assert h.claude.arrivals == arrivals
        assert not (h.project / "denied.txt").exists()


async def test_messages_that_must_not_run_are_answered_and_run_nothing(h: Harness) -> None:
    app = await h.start()
    # A sticker is no instruction (photos and files are: see test_app_attachments).
    sticker = {"file_id": "S1", "file_unique_id": "uS1", "type": "regular", "width": 512, "height": 512}
    sticker |= {"is_animated": False, "is_video": False}
    owner = {"id": OWNER, "is_bot": False, "first_name": "owner"}
    chat = {"id": OWNER, "type": "private", "first_name": "owner"}
    h.tg.push_update({"message": {"message_id": 900, "date": 1, "chat": chat, "from": owner, "sticker": sticker}})
    refused = await h.wait_text(lambda t: t.startswith("📎 Stickers, locations"))
    assert "nothing was run" in refused
    # Only invisible characters: nothing to run.
    h.tg.push_message(OWNER, OWNER, "\u200b\u2060 \u200b")
    await h.wait_text(lambda t: t.startswith("Send text or a voice note"))
    # Another bot's command in a group is not ours: no reply, no session reset.
    h.tg.push_message(OWNER, OWNER, "/new@some_other_bot")
    h.tg.push_message(OWNER, OWNER, "/help@some_other_bot")
    # An edit does not change what was sent: the owner is told so.
    h.tg.push_edited_message(OWNER, OWNER, 1, "then tag release v3 (NOT v2)")
    await h.wait_text(lambda t: t.startswith("✏️ Edits are not applied"))
    # A long argument echoed back is cut, so the reply still fits one Telegram message.
    h.tg.push_message(OWNER, OWNER, "/recall " + "flaky test in the billing export " * 120)
    await h.wait_text(lambda t: t.startswith("Nothing in memory matches") or t.startswith("🔎"))
    h.tg.push_message(OWNER, OWNER, "/" + "x" * 4000)
    await h.wait_text(lambda t: t.startswith("Unknown command /xxx") and len(t) < 200)
    await h.wait_handled(app)
    assert h.claude.arrivals == 0 and h.tg.calls("getFile") == []
    assert not any(t.startswith("🆕") or "Commands" in t for t in h.texts())
    assert all(len(t) <= 4096 for t in h.texts())


async def test_a_secret_in_a_handled_instruction_is_not_kept_in_the_bots_database(h: Harness) -> None:
    key = "sk-ant-api03-" + "Q7w8E9r0T1y2U3i4O5p6" * 4
    h.claude.enqueue("Used it.")
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, f"deploy with ANTHROPIC_API_KEY={key} please")
    await h.wait_text(lambda t: "Used it." in t)
    await h.wait_handled(app)
    assert app.services is not None
    assert key in " ".join(h.claude.user_texts())  # the owner's instruction reached the agent whole
    # Kept whole only while it could still run; afterwards every stored copy is redacted. (Old page images
    # in the WAL are SQLite's until a checkpoint; Claude Code's own transcript holds the instruction anyway.)
    path = app.services.state.path

    def finished() -> bool:
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone()[0] == 0

    await h.tg.wait_for(finished, timeout=30)  # the run is marked done after its answer is sent
    with sqlite3.connect(path) as conn:
        stored = [
            *conn.execute("SELECT payload FROM updates"),
            *conn.execute("SELECT instruction FROM runs"),
            *conn.execute("SELECT text FROM queue"),
        ]
    assert stored and not [row for row in stored if key in str(row[0])]
    assert any("[REDACTED:" in str(row[0]) for row in stored)
