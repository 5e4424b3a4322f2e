"""One progress message a run edits in place (stage, tool, elapsed, tokens, cost), at most once per
``min_edit_interval_s``; the sending itself is :mod:`bot.sender` (re-exported here)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from bot.sender import DOCUMENT_THRESHOLD, Button, Sender, escape, format_usage, ptb_seconds
from bot.telegram_split import TELEGRAM_LIMIT

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
