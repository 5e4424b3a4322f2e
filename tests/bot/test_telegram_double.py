"""The Bot API double under the real python-telegram-bot: polling, files, commands and Telegram's limits."""

from __future__ import annotations

import asyncio
import datetime as dtm
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest, InvalidToken, RetryAfter
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters

from tests.doubles.telegram import MAX_DOWNLOAD, HtmlError, TelegramDouble, check_html

OWNER = 1001
CHAT = 1001


def make_bot(tg: TelegramDouble, token: str | None = None) -> Bot:
    return Bot(token or tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url)


@pytest.fixture
async def bot(telegram_double: TelegramDouble) -> AsyncIterator[Bot]:
    async with make_bot(telegram_double) as b:
        yield b


async def running(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(timeout=10)


async def stopped(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    assert app.updater is not None
    await app.updater.stop()
    await app.stop()
    await app.shutdown()


def echo_app(tg: TelegramDouble, seen: list[str]) -> Application[Any, Any, Any, Any, Any, Any]:
    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None and update.effective_message.text is not None
        seen.append(update.effective_message.text)
        await update.effective_message.reply_text(f"echo: {update.effective_message.text}")

    app = ApplicationBuilder().token(tg.token).base_url(tg.base_url).base_file_url(tg.base_file_url).build()
    app.add_handler(MessageHandler(filters.TEXT, echo))
    return app


async def test_real_ptb_application_polls_and_replies_through_the_double(telegram_double: TelegramDouble) -> None:
    tg = telegram_double
    seen: list[str] = []
    app = echo_app(tg, seen)
    await running(app)
    try:
        tg.push_message(OWNER, CHAT, "hello")
        tg.push_message(OWNER, CHAT, "/status now")
        await tg.wait_for(lambda: len(tg.texts(CHAT)) == 2)
    finally:
        await stopped(app)
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
    seen: list[str] = []
    app = echo_app(tg, seen)
    await running(app)
    try:
        await tg.wait_for(lambda: seen)
    finally:
        await stopped(app)
    assert seen == ["before the crash"]
    assert tg.deliveries(update["update_id"]) == 2


async def test_deliver_again_redelivers_a_confirmed_update(telegram_double: TelegramDouble) -> None:
    tg = telegram_double
    seen: list[str] = []
    app = echo_app(tg, seen)
    await running(app)
    try:
        update = tg.push_message(OWNER, CHAT, "once")
        await tg.wait_for(lambda: len(seen) == 1)
        tg.deliver_again(update["update_id"])
        tg.deliver_again(update["update_id"])
        await tg.wait_for(lambda: len(seen) == 3)
    finally:
        await stopped(app)
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
