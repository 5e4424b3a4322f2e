"""The Bot API double under the real python-telegram-bot: polling, files, commands and Telegram's limits."""

from __future__ import annotations

import asyncio
import datetime as dtm
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest, InvalidToken, RetryAfter
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

from tests.doubles.telegram import MAX_DOWNLOAD, HtmlError, TelegramDouble, check_html

OWNER = 1001
CHAT = 1001


def make_bot(tg: TelegramDouble, token: str | None = None) -> Bot:
    return Bot(token or tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url)


@pytest.fixture
async def bot(telegram_double: TelegramDouble) -> AsyncIterator[Bot]:
    async with make_bot(telegram_double) as b:
        yield b


@asynccontextmanager
async def echo_running(tg: TelegramDouble) -> AsyncIterator[list[str]]:
    """A real PTB application polling the double, replying "echo: …" to each text: the texts it has seen."""
    seen: list[str] = []

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None and update.effective_message.text is not None
        seen.append(update.effective_message.text)
        await update.effective_message.reply_text(f"echo: {update.effective_message.text}")

    app = ApplicationBuilder().token(tg.token).base_url(tg.base_url).base_file_url(tg.base_file_url).build()
    app.add_handler(MessageHandler(filters.TEXT, echo))
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(timeout=10)
    try:
        yield seen
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()


async def test_real_ptb_application_polls_and_replies_through_the_double(telegram_double: TelegramDouble) -> None:
    tg = telegram_double
    async with echo_running(tg) as seen:
        tg.push_message(OWNER, CHAT, "hello")
        tg.push_message(OWNER, CHAT, "/status now")
        await tg.wait_for(lambda: len(tg.texts(CHAT)) == 2)
    assert tg.texts(CHAT) == ["echo: hello", "echo: /status now"]
    assert seen == ["hello", "/status now"]
    assert tg.pending == []  # the updater confirmed both by offset on its way out
    assert [c.method for c in tg.requests[:1]] == ["getMe"]
    assert any(c.method == "deleteWebhook" for c in tg.requests)


async def test_unconfirmed_update_reaches_a_restarted_application(telegram_double: TelegramDouble) -> None:
    tg = telegram_double
    update = tg.push_message(OWNER, CHAT, "before the crash")
    url = f"{tg.base_url}{tg.token}/getUpdates"
    # a first bot fetched it but died before confirming
    async with aiohttp.ClientSession() as http, http.post(url, data={"timeout": "0"}) as r:
        assert [u["update_id"] for u in (await r.json())["result"]] == [update["update_id"]]
    async with echo_running(tg) as seen:
        await tg.wait_for(lambda: seen)
    assert seen == ["before the crash"]
    assert tg.deliveries(update["update_id"]) == 2


async def test_deliver_again_redelivers_a_confirmed_update(telegram_double: TelegramDouble) -> None:
    tg = telegram_double
    async with echo_running(tg) as seen:
        update = tg.push_message(OWNER, CHAT, "once")
        await tg.wait_for(lambda: len(seen) == 1)
        tg.deliver_again(update["update_id"])
        tg.deliver_again(update["update_id"])
        await tg.wait_for(lambda: len(seen) == 3)
    assert tg.deliveries(update["update_id"]) == 3


async def test_long_poll_waits_for_a_push_and_honours_offset_and_allowed_updates(
    telegram_double: TelegramDouble,
) -> None:
    tg = telegram_double
    url = f"{tg.base_url}{tg.token}/getUpdates"
    async with aiohttp.ClientSession() as http:

        async def poll(**data: str) -> list[dict[str, Any]]:
            async with http.post(url, data=data) as r:
                body = await r.json()
                assert body["ok"] is True
                return list(body["result"])

        assert await poll(timeout="0") == []
        waiting = asyncio.ensure_future(poll(timeout="30"))
        await tg.wait_for(lambda: tg.requests or None)  # the poll has not answered: nothing to log yet
        assert not waiting.done()
        first = tg.push_message(OWNER, CHAT, "wake up")
        got = await asyncio.wait_for(waiting, 5)
        assert [u["update_id"] for u in got] == [first["update_id"]]
        # not confirmed yet: delivered again; an offset past it confirms and drops it
        assert [u["update_id"] for u in await poll(timeout="0")] == [first["update_id"]]
        assert await poll(timeout="0", offset=str(first["update_id"] + 1)) == []
        tg.push_update({"my_chat_member": {"chat": {"id": 5, "type": "private"}}})
        kept = tg.push_message(OWNER, CHAT, "a message")
        assert [u["update_id"] for u in await poll(timeout="0", allowed_updates='["message"]')] == [kept["update_id"]]


async def test_voice_file_downloads_and_oversized_file_is_refused_before_download(
    telegram_double: TelegramDouble, bot: Bot
) -> None:
    tg = telegram_double
    small = tg.push_voice(OWNER, CHAT, b"OggS-bytes", 3)["message"]["voice"]
    f = await bot.get_file(small["file_id"])
    assert bytes(await f.download_as_bytearray()) == b"OggS-bytes"
    big = tg.push_voice(OWNER, CHAT, b"OggS", 900, file_size=MAX_DOWNLOAD + 1)["message"]["voice"]
    assert big["file_size"] == MAX_DOWNLOAD + 1
    with pytest.raises(BadRequest, match=r"(?i)file is too big"):
        await bot.get_file(big["file_id"])
    with pytest.raises(BadRequest, match=r"(?i)invalid file_id"):
        await bot.get_file("nope")


async def test_message_longer_than_4096_characters_is_refused(telegram_double: TelegramDouble, bot: Bot) -> None:
    await bot.send_message(CHAT, "x" * 4096)
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(CHAT, "x" * 4097)
    # the limit counts text after entity parsing: markup does not count
    await bot.send_message(CHAT, "<b>" + "y" * 4096 + "</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(CHAT, "<b> </b>", parse_mode="HTML")
    assert len(telegram_double.texts(CHAT)) == 2


@pytest.mark.parametrize(
    "html",
    ["<b>bold", "<b><i>x</b></i>", "<div>x</div>", "a < b", "a & b", "<a>no href</a>", "<pre><b>x</b></pre>"],
)
async def test_malformed_html_is_refused_with_cant_parse_entities(
    telegram_double: TelegramDouble, bot: Bot, html: str
) -> None:
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(CHAT, html, parse_mode="HTML")
    await bot.send_message(CHAT, html)  # the same text without parse_mode is fine
    assert telegram_double.texts(CHAT) == [html]


def test_check_html_accepts_telegram_markup_and_returns_the_visible_text() -> None:
    html = (
        "<b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><ins>n</ins><s>s</s><strike>k</strike><del>d</del>"
        '<a href="https://x.org/?a=1&amp;b=2">l</a><code>c</code><pre><code class="language-py">p</code></pre>'
        '<blockquote expandable>q <b>q</b></blockquote><tg-spoiler>t</tg-spoiler><span class="tg-spoiler">x</span>'
        "&lt;&gt;&amp;&quot;&#33;&#x41;"
    )
    assert check_html(html) == 'bsieunskdlcpq qtx<>&"!A'
    with pytest.raises(HtmlError, match="byte offset 3"):
        check_html("é <x>")  # offsets are in UTF-8 bytes, as Telegram reports them


async def test_flood_control_answers_429_with_retry_after(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    tg.set_flood(2, retry_after=3)
    await bot.send_message(CHAT, "one")
    await bot.send_message(CHAT, "two")
    await bot.send_message(CHAT + 1, "another chat has its own budget")
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(CHAT, "three")
    retry = caught.value.retry_after
    assert (retry.total_seconds() if isinstance(retry, dtm.timedelta) else retry) == 3
    tg.advance_clock(1.5)
    with pytest.raises(RetryAfter):  # still blocked until retry_after has passed
        await bot.send_message(CHAT, "three")
    tg.advance_clock(1.6)
    await bot.send_message(CHAT, "three")
    assert tg.texts(CHAT) == ["one", "two", "three"]
    assert [c.status for c in tg.calls("sendMessage")].count(429) == 2


async def test_edits_markup_deletes_and_not_modified(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Allow", callback_data="allow:1")]])
    msg = await bot.send_message(CHAT, "working…", reply_markup=keyboard)
    await bot.edit_message_text("step 2", CHAT, msg.message_id, reply_markup=keyboard)
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("step 2", CHAT, msg.message_id, reply_markup=keyboard)
    await bot.edit_message_reply_markup(CHAT, msg.message_id, reply_markup=None)
    assert "reply_markup" not in tg.messages(CHAT)[msg.message_id]
    assert tg.messages(CHAT)[msg.message_id]["text"] == "step 2"
    await bot.delete_message(CHAT, msg.message_id)
    assert tg.messages(CHAT) == {}
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("gone", CHAT, msg.message_id)
    await bot.send_chat_action(CHAT, "typing")
    assert [c.method for c in tg.sent] == [
        "sendMessage",
        "editMessageText",
        "editMessageReplyMarkup",
        "deleteMessage",
        "sendChatAction",
    ]


async def test_callback_query_is_answered_once(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    msg = await bot.send_message(CHAT, "approve?")
    query = tg.push_callback(OWNER, CHAT, msg.message_id, "allow:1")["callback_query"]
    assert query["message"]["text"] == "approve?"
    assert await bot.answer_callback_query(query["id"], text="allowed")
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query(query["id"])


async def test_documents_and_photos_upload_as_multipart(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    doc = await bot.send_document(CHAT, b"# the long answer\n", filename="answer.md", caption="full answer")
    assert doc.document is not None and doc.document.file_name == "answer.md"
    stored = tg.files[doc.document.file_id]
    assert stored.data == b"# the long answer\n"
    photo = await bot.send_photo(CHAT, b"\x89PNG fake")
    assert photo.photo and tg.files[photo.photo[-1].file_id].data == b"\x89PNG fake"
    with pytest.raises(BadRequest, match=r"(?i)caption is too long"):
        await bot.send_document(CHAT, b"x", filename="x.txt", caption="c" * 1025)


async def test_commands_are_stored_and_validated(telegram_double: TelegramDouble, bot: Bot) -> None:
    await bot.set_my_commands([("recall", "Search memory"), ("new", "Start fresh")])
    assert [(c.command, c.description) for c in await bot.get_my_commands()] == [
        ("recall", "Search memory"),
        ("new", "Start fresh"),
    ]
    with pytest.raises(BadRequest, match=r"(?i)bot_command_invalid"):
        await bot.set_my_commands([("Not-Valid", "x")])


async def test_unknown_method_is_404_and_wrong_token_is_unauthorized(telegram_double: TelegramDouble) -> None:
    tg = telegram_double
    async with aiohttp.ClientSession() as http, http.post(f"{tg.base_url}{tg.token}/sendDice") as r:
        assert r.status == 404
        assert await r.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
    with pytest.raises(InvalidToken):
        async with make_bot(tg, token="999:WRONG"):
            pass
    assert tg.calls("sendDice")[0].status == 404


async def test_pushed_updates_parse_in_ptb(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    tg.push_forwarded(OWNER, CHAT, "quoted text", origin_user_id=42)
    tg.push_edited_message(OWNER, CHAT, 7, "edited")
    tg.push_document(OWNER, CHAT, b"data", "notes.txt", caption="see")
    updates = await bot.get_updates(timeout=0)
    assert updates[0].message is not None and updates[0].message.forward_origin is not None
    assert updates[1].edited_message is not None and updates[1].edited_message.text == "edited"
    assert updates[2].message is not None and updates[2].message.document is not None
    assert updates[2].message.document.file_name == "notes.txt"


# --- forum topics ---

FORUM = -1001234567890
OPUS = b"OggS" + bytes(24) + b"OpusHead" + bytes(16)


async def test_bot_creates_a_topic_and_sends_into_it(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    assert tg.make_forum(FORUM, title="Macupos dev") == {
        "id": FORUM,
        "type": "supergroup",
        "title": "Macupos dev",
        "is_forum": True,
    }
    topic = await bot.create_forum_topic(FORUM, "feature/login")
    tid = topic.message_thread_id
    assert (topic.name, topic.icon_color) == ("feature/login", 0x6FB9F0)
    assert tg.topics(FORUM) == {
        tid: {"message_thread_id": tid, "name": "feature/login", "icon_color": 0x6FB9F0, "is_closed": False}
    }
    # the topic is the thread of its forum_topic_created service message, which has the topic's id
    root = tg.messages(FORUM)[tid]
    assert root["forum_topic_created"] == {"name": "feature/login", "icon_color": 0x6FB9F0}
    assert (root["message_thread_id"], root["is_topic_message"], "reply_to_message" in root) == (tid, True, False)

    msg = await bot.send_message(FORUM, "hello topic", message_thread_id=tid)
    assert (msg.message_thread_id, msg.is_topic_message) == (tid, True)
    assert msg.chat.type == "supergroup" and msg.chat.is_forum and msg.chat.title == "Macupos dev"
    # Telegram's implicit reply: a topic message with no reply of its own replies to the topic's root
    assert msg.reply_to_message is not None and msg.reply_to_message.message_id == tid
    assert msg.reply_to_message.forum_topic_created is not None
    general = await bot.send_message(FORUM, "in General")
    assert (general.message_thread_id, general.is_topic_message, general.reply_to_message) == (None, None, None)

    doc = await bot.send_document(FORUM, b"log", filename="run.log", message_thread_id=tid)
    photo = await bot.send_photo(FORUM, b"\x89PNG fake", message_thread_id=tid)
    voice = await bot.send_voice(FORUM, OPUS, duration=1, message_thread_id=tid)
    assert voice.voice is not None
    assert [(m.message_thread_id, m.is_topic_message) for m in (doc, photo, voice)] == [(tid, True)] * 3
    assert await bot.send_chat_action(FORUM, "typing", message_thread_id=tid)
    # a reply lands in the replied message's topic, and quotes it
    reply = await bot.send_message(FORUM, "follow-up", reply_to_message_id=msg.message_id)
    assert reply.message_thread_id == tid
    assert reply.reply_to_message is not None and reply.reply_to_message.text == "hello topic"

    assert tg.texts_in(FORUM, tid) == ["hello topic", "follow-up"]
    assert tg.texts_in(FORUM, None) == ["in General"]
    assert tg.texts(FORUM) == ["hello topic", "in General", "follow-up"]
    in_topic = {tid} | {m.message_id for m in (msg, doc, photo, voice, reply)}
    assert set(tg.messages_in(FORUM, tid)) == in_topic
    assert set(tg.messages(FORUM)) == in_topic | {general.message_id}
    assert tg.messages(FORUM)[msg.message_id]["is_topic_message"] is True
    chat = await bot.get_chat(FORUM)
    assert chat.is_forum and chat.type == "supergroup" and chat.title == "Macupos dev"


async def test_topic_errors_are_telegrams(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    for chat_id in (CHAT, -1009999):  # a private chat, an ordinary supergroup
        with pytest.raises(BadRequest, match=r"(?i)^the chat is not a forum$"):
            await bot.create_forum_topic(chat_id, "main")
    tg.make_forum(FORUM)
    with pytest.raises(BadRequest, match=r"(?i)title must be non-empty"):
        await bot.create_forum_topic(FORUM, "  \n ")
    with pytest.raises(BadRequest, match=r"(?i)invalid icon color"):
        await bot.create_forum_topic(FORUM, "main", icon_color=0x123456)
    # longer names are cut to 128 characters (TDLib's clean_name), and runs of spaces become one
    long = await bot.create_forum_topic(FORUM, "b" * 130)
    assert long.name == "b" * 128
    spaced = await bot.create_forum_topic(FORUM, " fix   the\nbug ", icon_color=0xFB6F5F)
    assert (spaced.name, spaced.icon_color) == ("fix the bug", 0xFB6F5F)
    with pytest.raises(BadRequest, match=r"(?i)^message thread not found$"):
        await bot.send_message(FORUM, "x", message_thread_id=999)
    with pytest.raises(BadRequest, match=r"(?i)^message thread not found$"):
        await bot.send_message(FORUM, "x", message_thread_id=1)  # General is no topic
    with pytest.raises(BadRequest, match=r"(?i)^message thread not found$"):
        await bot.send_document(FORUM, b"x", filename="x.txt", message_thread_id=999)
    with pytest.raises(BadRequest, match=r"(?i)^message thread not found$"):
        await bot.send_chat_action(FORUM, "typing", message_thread_id=999)
    with pytest.raises(BadRequest, match=r"(?i)^message thread not found$"):
        await bot.send_message(CHAT, "x", message_thread_id=5)  # a private chat has no topics here
    plain = await bot.send_message(-1009999, "x", message_thread_id=5)  # an ordinary group: a reply thread, ignored
    assert plain.message_thread_id is None
    assert tg.texts(FORUM) == []


async def test_edit_close_reopen_and_delete_a_topic(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    tg.make_forum(FORUM)
    tid = (await bot.create_forum_topic(FORUM, "feature/a")).message_thread_id
    other = (await bot.create_forum_topic(FORUM, "feature/b")).message_thread_id
    kept = await bot.send_message(FORUM, "in b", message_thread_id=other)
    await bot.send_message(FORUM, "in a", message_thread_id=tid)

    assert await bot.edit_forum_topic(FORUM, tid, name="feature/a ✓")
    assert tg.topics(FORUM)[tid]["name"] == "feature/a ✓"
    edited = [m for m in tg.messages_in(FORUM, tid).values() if "forum_topic_edited" in m]
    assert [m["forum_topic_edited"] for m in edited] == [{"name": "feature/a ✓"}]
    with pytest.raises(BadRequest, match=r"(?i)TOPIC_NOT_MODIFIED"):
        await bot.edit_forum_topic(FORUM, tid, name="feature/a ✓")

    assert await bot.close_forum_topic(FORUM, tid)
    assert tg.topics(FORUM)[tid]["is_closed"] is True
    with pytest.raises(BadRequest, match=r"(?i)TOPIC_NOT_MODIFIED"):
        await bot.close_forum_topic(FORUM, tid)
    await bot.send_message(FORUM, "the bot, an admin, may still post", message_thread_id=tid)
    assert await bot.reopen_forum_topic(FORUM, tid)
    with pytest.raises(BadRequest, match=r"(?i)TOPIC_NOT_MODIFIED"):
        await bot.reopen_forum_topic(FORUM, tid)
    service = [k for m in tg.messages_in(FORUM, tid).values() for k in m if k.startswith("forum_topic_")]
    assert service == ["forum_topic_created", "forum_topic_edited", "forum_topic_closed", "forum_topic_reopened"]

    with pytest.raises(BadRequest, match=r"(?i)message can't be deleted"):
        await bot.delete_message(FORUM, tid)  # the topic's creation message
    assert await bot.delete_forum_topic(FORUM, tid)
    assert list(tg.topics(FORUM)) == [other]
    assert tg.messages_in(FORUM, tid) == {}  # the topic went with all its messages
    assert kept.message_id in tg.messages(FORUM)
    with pytest.raises(BadRequest, match=r"(?i)^message thread not found$"):
        await bot.send_message(FORUM, "too late", message_thread_id=tid)
    with pytest.raises(BadRequest, match=r"(?i)TOPIC_ID_INVALID"):
        await bot.close_forum_topic(FORUM, tid)
    with pytest.raises(BadRequest, match=r"(?i)the chat is not a forum"):
        await bot.delete_forum_topic(CHAT, tid)


async def test_pushed_topic_messages_parse_in_ptb(telegram_double: TelegramDouble, bot: Bot) -> None:
    tg = telegram_double
    tg.make_forum(FORUM)
    tid = (await bot.create_forum_topic(FORUM, "feature/voice")).message_thread_id
    card = await bot.send_message(FORUM, "a card", message_thread_id=tid)
    tg.push_message(OWNER, FORUM, "hello", message_thread_id=tid)
    tg.push_voice(OWNER, FORUM, OPUS, 2, message_thread_id=tid)
    tg.push_document(OWNER, FORUM, b"data", "notes.txt", message_thread_id=tid)
    tg.push_message(OWNER, FORUM, "a correction", reply_to_message=tg.messages(FORUM)[card.message_id])
    tg.push_message(OWNER, FORUM, "in General")
    created = tg.push_forum_topic(OWNER, FORUM, "made by hand")["message"]
    updates = await bot.get_updates(timeout=0)
    msgs = [u.message for u in updates]
    assert all(m is not None for m in msgs)
    text, voice, doc, correction, general, by_hand = (m for m in msgs if m is not None)
    for m in (text, voice, doc):
        assert (m.message_thread_id, m.is_topic_message) == (tid, True)
        assert m.chat.is_forum
        # no reply of the user's own: Telegram shows the implicit reply to the topic's creation message
        assert m.reply_to_message is not None and m.reply_to_message.message_id == tid
        assert m.reply_to_message.forum_topic_created is not None
        assert m.reply_to_message.forum_topic_created.name == "feature/voice"
    assert voice.voice is not None and doc.document is not None
    # a real reply keeps its target, and puts the message in the target's topic
    assert correction.reply_to_message is not None and correction.reply_to_message.message_id == card.message_id
    assert (correction.message_thread_id, correction.is_topic_message) == (tid, True)
    assert (general.message_thread_id, general.is_topic_message, general.reply_to_message) == (None, None, None)
    assert by_hand.forum_topic_created is not None and by_hand.forum_topic_created.name == "made by hand"
    assert by_hand.message_thread_id == by_hand.message_id == created["message_id"]
    assert created["message_id"] in tg.topics(FORUM)
    with pytest.raises(ValueError, match="no topic"):
        tg.push_message(OWNER, FORUM, "nowhere", message_thread_id=999)


async def test_application_replies_in_the_topic_it_was_written_in(telegram_double: TelegramDouble) -> None:
    """PTB's reply_text passes the topic's message_thread_id and quotes the message (a group chat)."""
    tg = telegram_double
    tg.make_forum(FORUM)
    async with make_bot(tg) as b:
        tid = (await b.create_forum_topic(FORUM, "feature/echo")).message_thread_id
    async with echo_running(tg):
        pushed = tg.push_message(OWNER, FORUM, "ping", message_thread_id=tid)["message"]
        await tg.wait_for(lambda: tg.texts(FORUM))
    assert tg.texts_in(FORUM, tid) == ["echo: ping"]
    (reply,) = [c.result for c in tg.calls("sendMessage")]
    assert reply["reply_to_message"]["message_id"] == pushed["message_id"]
