"""Talking to the chat within Telegram's limits: flood-safe sends and answers.

Every call goes through :class:`Sender`, which keeps one chat's messages in order (a per-chat lock), honours
``retry_after`` on a 429 and falls back to plain text when Telegram refuses the HTML. A message sent for a
lane (bot.lanes.LANE) goes to the lane's forum topic and is remembered as the lane's, for reply routing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import html
import io
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, WebAppInfo
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from bot.lanes import LANE
from bot.telegram_format import markdown_to_html, plain_text
from bot.telegram_split import TELEGRAM_LIMIT, split_message, utf16_len

__all__ = [
    "DOCUMENT_THRESHOLD",
    "Button",
    "Sender",
    "escape",
    "format_usage",
    "ptb_seconds",
    "send_cards",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
DOCUMENT_THRESHOLD = 12_000  # longer answers go as a file: a phone scrolls one message, not five
_MAX_ATTEMPTS = 6
# Telegram shows a chat action for 5 s or until the bot's next message: renewed every 4 s while work lasts.
_ACTION_EVERY_S = 4.0
_ACTION_TIMEOUT_S = 5.0
_MAX_RETRY_AFTER_S = 120.0
Button = tuple[str, str]  # (label, callback_data)


def escape(text: str) -> str:
    """Text for a ``parse_mode="HTML"`` message."""
    return html.escape(text, quote=False)


def format_usage(tokens: int, cost_usd: float | None) -> str:
    cost = "cost unknown" if cost_usd is None else f"${cost_usd:.4f}"
    return f"{tokens:,} tokens · {cost}"


def ptb_seconds(obj: object, attribute: str) -> float:
    """A python-telegram-bot duration (a voice note's length, a 429's retry_after) in seconds.

    PTB 22 returns int seconds and warns that its next major version returns a timedelta (or returns one
    already when PTB_TIMEDELTA is set): both forms are read, and the migration warning is not shown.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        value: Any = getattr(obj, attribute)
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value or 0)


def _retry_seconds(exc: RetryAfter) -> float:
    return min(max(ptb_seconds(exc, "retry_after"), 0.0), _MAX_RETRY_AFTER_S)


def _markup(rows: Sequence[Sequence[Button]] | None) -> InlineKeyboardMarkup | None:
    if not rows:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(label, callback_data=data) for label, data in row] for row in rows]
    )


def _is_parse_error(exc: BadRequest) -> bool:
    return "can't parse entities" in exc.message.lower() or "unsupported start tag" in exc.message.lower()


class Sender:
    """Flood-safe calls to the Bot API for one bot; one chat's calls are made one at a time, in order."""

    def __init__(self, bot: Bot, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.bot = bot
        self._sleep = sleep
        self._locks: dict[int, asyncio.Lock] = {}
        # Remembers (chat, message id, branch) of each message sent for a lane (bot.lanes.LANE), so a reply
        # to any of them continues that lane's session. Set by the composition root.
        self.recorder: Callable[[int, int, str], Awaitable[None]] | None = None

    @staticmethod
    def _thread(chat_id: int) -> int | None:
        """The forum topic of the lane being worked for, when this message goes to its chat."""
        tag = LANE.get()
        return tag.thread_id if tag is not None and tag.chat_id == chat_id else None

    async def _sent(self, chat_id: int, message: Message) -> Message:
        tag = LANE.get()
        if self.recorder is not None and tag is not None and tag.chat_id == chat_id:
            await self.recorder(chat_id, message.message_id, tag.branch)
        return message

    def _lock(self, chat_id: int) -> asyncio.Lock:
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        return lock

    async def _call(self, chat_id: int, fn: Callable[[], Awaitable[T]]) -> T:
        async with self._lock(chat_id):
            for attempt in range(1, _MAX_ATTEMPTS + 1):
                try:
                    return await fn()
                except RetryAfter as exc:
                    if attempt == _MAX_ATTEMPTS:
                        raise
                    await self._sleep(_retry_seconds(exc))
                except (TimedOut, NetworkError) as exc:
                    if isinstance(exc, BadRequest) or attempt == _MAX_ATTEMPTS:
                        raise
                    logger.debug("telegram call failed (%s), retrying", exc)
                    await self._sleep(min(2.0**attempt / 4, 5.0))
            raise AssertionError("unreachable")

    async def send(
        self,
        chat_id: int,
        text: str,
        *,
        html_text: bool = True,
        buttons: Sequence[Sequence[Button]] | None = None,
        reply_to: int | None = None,
    ) -> Message:
        """Send one message (≤ 4,096 characters); HTML refused by Telegram is resent as plain text."""
        markup = _markup(buttons)
        mode = ParseMode.HTML if html_text else None
        visible = _strip_tags(text) if html_text else text
        if utf16_len(visible) > TELEGRAM_LIMIT:
            # Too long for one message (a long argument echoed back): cut, as plain text, rather than have
            # Telegram refuse it and the owner hear nothing. Long answers go through split_message instead.
            text, mode, html_text = _fit(visible), None, False

        thread = self._thread(chat_id)

        async def go(body: str, parse_mode: str | None) -> Message:
            return await self._call(
                chat_id,
                lambda: self.bot.send_message(
                    chat_id,
                    body,
                    parse_mode=parse_mode,
                    reply_markup=markup,
                    reply_to_message_id=reply_to,
                    message_thread_id=thread,
                ),
            )

        try:
            sent = await go(text, mode)
        except BadRequest as exc:
            if not (html_text and _is_parse_error(exc)):
                raise
            logger.warning("Telegram refused our HTML (%s); sending plain text", exc.message)
            sent = await go(_strip_tags(text), None)
        return await self._sent(chat_id, sent)

    async def edit(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        *,
        html_text: bool = True,
        buttons: Sequence[Sequence[Button]] | None = None,
    ) -> None:
        """Edit a message's text; "not modified" is not an error, a refused HTML falls back to plain text."""
        markup = _markup(buttons)

        async def go(body: str, parse_mode: str | None) -> None:
            await self._call(
                chat_id,
                lambda: self.bot.edit_message_text(
                    body, chat_id=chat_id, message_id=message_id, parse_mode=parse_mode, reply_markup=markup
                ),
            )

        try:
            await go(text, ParseMode.HTML if html_text else None)
        except BadRequest as exc:
            if "not modified" in exc.message.lower():
                return
            if not (html_text and _is_parse_error(exc)):
                raise
            await go(_strip_tags(text), None)

    async def _upload(self, chat_id: int, send: Callable[[int | None], Awaitable[Message]]) -> Message:
        """A file sent by ``send`` (given the lane's forum topic) in the chat's order, then recorded for its lane."""
        thread = self._thread(chat_id)
        return await self._sent(chat_id, await self._call(chat_id, lambda: send(thread)))

    async def document(self, chat_id: int, data: bytes, filename: str, caption: str = "") -> Message:
        html_caption = escape(caption[:1000]) or None
        return await self._upload(
            chat_id,
            lambda thread: self.bot.send_document(
                chat_id,
                io.BytesIO(data),
                filename=filename,
                caption=html_caption,
                parse_mode="HTML",
                message_thread_id=thread,
            ),
        )

    async def photo(self, chat_id: int, data: bytes, caption: str = "") -> Message:
        html_caption = escape(caption[:1000]) or None
        return await self._upload(
            chat_id,
            lambda thread: self.bot.send_photo(
                chat_id, io.BytesIO(data), caption=html_caption, parse_mode="HTML", message_thread_id=thread
            ),
        )

    async def voice(self, chat_id: int, ogg: bytes, duration_s: int) -> Message:
        """A voice note (OGG/Opus, as Telegram clients record them), shown with its length in seconds."""
        return await self._upload(
            chat_id,
            lambda thread: self.bot.send_voice(
                chat_id, io.BytesIO(ogg), duration=duration_s, filename="answer.ogg", message_thread_id=thread
            ),
        )

    @contextlib.asynccontextmanager
    async def showing(self, chat_id: int, action: str) -> AsyncIterator[None]:
        """The chat shows ``action`` ("typing…", "recording a voice message…") while the block runs, so a
        phone sees at once that a note was heard. Best effort, beside the chat's ordered calls (not behind
        them): each try is bounded, a failure is logged and never raised, and the block never waits for it."""
        thread = self._thread(chat_id)  # shown in the lane's forum topic, where its answer will come

        async def keep() -> None:
            while True:
                try:
                    async with asyncio.timeout(_ACTION_TIMEOUT_S):
                        await self.bot.send_chat_action(chat_id, action, message_thread_id=thread)
                except (TelegramError, TimeoutError) as exc:
                    logger.debug("chat %s: chat action %s not shown: %s", chat_id, action, exc)
                await self._sleep(_ACTION_EVERY_S)

        task = asyncio.create_task(keep(), name=f"action-{chat_id}")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def notice(self, chat_id: int, text: str, about: str) -> None:
        """Plain ``text`` beside the work it reports on, which goes on: a failure to send is logged (the chat could
        not be told ``about``: "about the memory fault"), never raised."""
        try:
            await self.send(chat_id, text, html_text=False)
        except TelegramError as exc:
            logger.warning("could not tell chat %s %s: %s", chat_id, about, exc)

    async def send_web_app(self, chat_id: int, text: str, label: str, url: str) -> Message:
        """An HTML message with one button that opens ``url`` as a Telegram Mini App (private chats only)."""
        markup = InlineKeyboardMarkup([[InlineKeyboardButton(label, web_app=WebAppInfo(url))]])
        return await self._call(
            chat_id, lambda: self.bot.send_message(chat_id, text, parse_mode=ParseMode.HTML, reply_markup=markup)
        )

    async def answer_callback(self, query_id: str, text: str = "", *, alert: bool = False) -> None:
        with contextlib.suppress(BadRequest):  # a query older than Telegram keeps cannot be answered: harmless
            await self.bot.answer_callback_query(query_id, text=text[:190] or None, show_alert=alert)

    async def send_markdown(self, chat_id: int, markdown: str, *, document_threshold: int = DOCUMENT_THRESHOLD) -> int:
        """An agent's Markdown answer: HTML chunks under the limit, or a ``.md`` document when long.

        Returns the number of messages sent. Each chunk falls back to plain text on its own if refused.
        """
        if not markdown.strip():
            await self.send(chat_id, "(no answer text)", html_text=False)
            return 1
        if len(markdown) > document_threshold:
            preview = plain_text(markdown)[:600].rstrip()
            await self.document(chat_id, markdown.encode("utf-8"), "answer.md", caption=f"{preview}…")
            return 1
        chunks = split_message(markdown_to_html(markdown), TELEGRAM_LIMIT)
        sent = 0
        for chunk in chunks:
            try:
                await self.send(chat_id, chunk)
            except BadRequest as exc:
                if "too long" not in exc.message.lower():
                    raise
                for part in split_message(_strip_tags(chunk), TELEGRAM_LIMIT, html=False):
                    await self.send(chat_id, part, html_text=False)
            sent += 1
        return sent


async def send_cards(
    sender: Sender,
    chat_id: int,
    items: Sequence[T],
    empty: str,
    card: Callable[[T], Awaitable[tuple[str, Sequence[Sequence[Button]]]]],
) -> None:
    """A list as plain-text messages, one per item with its buttons (``card``), or ``empty`` when it has none."""
    if not items:
        await sender.send(chat_id, empty, html_text=False)
        return
    for item in items:
        text, buttons = await card(item)
        await sender.send(chat_id, text, html_text=False, buttons=buttons)


def _fit(text: str, limit: int = TELEGRAM_LIMIT) -> str:
    """``text`` cut to ``limit`` UTF-16 units, an ellipsis marking the cut."""
    if utf16_len(text) <= limit:
        return text
    cut = limit - 1
    while utf16_len(text[:cut]) > limit - 1:
        cut -= max(1, (utf16_len(text[:cut]) - (limit - 1)) // 2)
    return text[:cut] + "…"


def _strip_tags(text: str) -> str:
    """Plain text of our own HTML (tags dropped, entities decoded): the fallback Telegram always accepts."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "<":
            end = text.find(">", i)
            if end < 0:
                out.append(text[i:])
                break
            i = end + 1
            continue
        out.append(ch)
        i += 1
    return html.unescape("".join(out)) or " "
