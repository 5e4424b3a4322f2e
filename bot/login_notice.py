"""A refused login said in the chat once: which engine, what its API said, and the fix (``macupos doctor``'s).

Every queued instruction after an expired login fails the same way; the owner needs the line once, not once
per instruction. It is said again only after a turn of that engine went through in the chat (mended, then broken again).
"""

from __future__ import annotations

import logging

from telegram.error import TelegramError

from bot.progress import Sender

__all__ = ["LoginNotices"]

logger = logging.getLogger(__name__)


class LoginNotices:
    def __init__(self, sender: Sender) -> None:
        self.sender = sender
        self._told: set[tuple[int, str]] = set()  # (chat, engine) told since the chat's last good run

    async def tell(self, chat_id: int, engine: str, message: str) -> bool:
        """Say ``message`` (a LoginError's text) unless this chat was already told about ``engine``."""
        if (chat_id, engine) in self._told:
            return False
        self._told.add((chat_id, engine))
        try:
            await self.sender.send(chat_id, f"🔑 {message}, then send the instruction again.", html_text=False)
        except TelegramError as exc:
            logger.warning("could not tell chat %s about the %s login: %s", chat_id, engine, exc)
        return True

    def clear(self, chat_id: int, engine: str) -> None:
        """A turn of ``engine`` in the chat went through: a later refusal is news again."""
        self._told.discard((chat_id, engine))
