"""Talking to the chat within Telegram's limits: flood-safe sends, one progress message edited in place, answers.

Every call goes through :class:`Sender`, which keeps one chat's messages in order (a per-chat lock), honours
``retry_after`` on a 429 and falls back to plain text when Telegram refuses the HTML. :class:`Progress` is the
one message a run edits (stage, tool, elapsed, tokens, cost), at most once per ``min_edit_interval_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import html
import io
import logging
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, WebAppInfo
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from bot.telegram_format import markdown_to_html, plain_text
from bot.telegram_split import TELEGRAM_LIMIT, split_message, utf16_len

__all__ = [
    "DOCUMENT_THRESHOLD",
    "Button",
    "Progress",
    "Sender",
    "escape",
    "format_usage",
    "ptb_seconds",
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

        async def go(body: str, parse_mode: str | None) -> Message:
            return await self._call(
                chat_id,
                lambda: self.bot.send_message(
                    chat_id, body, parse_mode=parse_mode, reply_markup=markup, reply_to_message_id=reply_to
                ),
            )

        try:
            return await go(text, mode)
        except BadRequest as exc:
            if not (html_text and _is_parse_error(exc)):
                raise
            logger.warning("Telegram refused our HTML (%s); sending plain text", exc.message)
            return await go(_strip_tags(text), None)

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

    async def document(self, chat_id: int, data: bytes, filename: str, caption: str = "") -> Message:
        return await self._call(
            chat_id,
            lambda: self.bot.send_document(
                chat_id, io.BytesIO(data), filename=filename, caption=escape(caption[:1000]) or None, parse_mode="HTML"
            ),
        )

    async def photo(self, chat_id: int, data: bytes, caption: str = "") -> Message:
        return await self._call(
            chat_id,
            lambda: self.bot.send_photo(
                chat_id, io.BytesIO(data), caption=escape(caption[:1000]) or None, parse_mode="HTML"
            ),
        )

    async def voice(self, chat_id: int, ogg: bytes, duration_s: int) -> Message:
        """A voice note (OGG/Opus, as Telegram clients record them), shown with its length in seconds."""
        return await self._call(
            chat_id,
            lambda: self.bot.send_voice(chat_id, io.BytesIO(ogg), duration=duration_s, filename="answer.ogg"),
        )

    @contextlib.asynccontextmanager
    async def showing(self, chat_id: int, action: str) -> AsyncIterator[None]:
        """The chat shows ``action`` ("typing…", "recording a voice message…") while the block runs, so a
        phone sees at once that a note was heard. Best effort, beside the chat's ordered calls (not behind
        them): each try is bounded, a failure is logged and never raised, and the block never waits for it."""

        async def keep() -> None:
            while True:
                try:
                    async with asyncio.timeout(_ACTION_TIMEOUT_S):
                        await self.bot.send_chat_action(chat_id, action)
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


class Progress:
    """One status message edited in place; edits are coalesced to one per ``min_edit_interval_s``."""

    def __init__(
        self,
        sender: Sender,
        chat_id: int,
        title: str,
        *,
        min_edit_interval_s: float = 1.5,
        heartbeat_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sender = sender
        self.chat_id = chat_id
        self.title = title
        self.stage = "starting"
        self.tool = ""
        self.tokens = 0
        self.cost_usd: float | None = None
        self.lines: list[str] = []  # per-stage lines (RPA)
        self.footer = ""
        self.message_id: int | None = None
        self._interval = min_edit_interval_s
        self._heartbeat = heartbeat_s
        self._clock = clock
        self._started = clock()
        self._last_edit = 0.0
        self._shown = ""
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._done = False

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def render(self) -> str:
        icon = {"done": "✅", "failed": "❌", "stopped": "⏹", "interrupted": "⏹"}.get(self.stage, "⏳")
        head = f"{icon} <b>{escape(self.title)}</b>"
        parts = [head, f"Stage: {escape(self.stage)} · {self.elapsed_s:.0f} s"]
        if self.tool and not self._done:
            parts.append(f"Tool: {escape(self.tool)}")
        parts.extend(escape(line) for line in self.lines)
        if self.tokens or self.cost_usd is not None:
            parts.append(escape(format_usage(self.tokens, self.cost_usd)))
        if self.footer:
            parts.append(f"<i>{escape(self.footer)}</i>")
        text = "\n".join(parts)
        return text if len(text) <= TELEGRAM_LIMIT else text[: TELEGRAM_LIMIT - 1] + "…"

    async def start(self) -> None:
        message = await self.sender.send(self.chat_id, self.render())
        self.message_id = message.message_id
        self._last_edit = self._clock()
        self._shown = self.render()
        self._task = asyncio.create_task(self._flusher(), name=f"progress-{self.chat_id}")

    def update(self, *, stage: str | None = None, tool: str | None = None, line: str | None = None) -> None:
        """Change what the message shows; the edit follows within the throttle."""
        if stage is not None:
            self.stage = stage
        if tool is not None:
            self.tool = tool
        if line is not None:
            self.lines.append(line)
        self._dirty.set()

    def add_usage(self, tokens: int, cost_usd: float | None) -> None:
        self.tokens += tokens
        if cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost_usd
        self._dirty.set()

    async def finish(self, stage: str, footer: str = "") -> None:
        """The final state, edited at once (after the throttle's remaining wait)."""
        self._done = True
        self.stage, self.footer = stage, footer
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TelegramError):
                await self._task
            self._task = None
        try:
            await self._flush(final=True)
        except (NetworkError, RetryAfter, TimedOut) as exc:  # the answer still goes out after this
            logger.warning("final progress edit failed: %s", exc)

    async def _flush(self, *, final: bool = False) -> None:
        if self.message_id is None:
            return
        text = self.render()
        if text == self._shown:
            return
        wait = self._last_edit + self._interval - self._clock()
        if wait > 0:
            await asyncio.sleep(wait)
            text = self.render()
        try:
            await self.sender.edit(self.chat_id, self.message_id, text)
        except BadRequest as exc:
            if final:
                raise
            logger.debug("progress edit failed: %s", exc)
        self._shown = text
        self._last_edit = self._clock()

    async def _flusher(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._heartbeat):
                    await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._flush()
            except TelegramError as exc:  # progress is cosmetic: a failed edit must not fail the run
                logger.warning("progress edit failed: %s", exc)
