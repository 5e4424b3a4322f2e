"""A refused login said in the chat once: which engine, what its API said, and the fix (``macupos doctor``'s).

Every queued instruction after an expired login fails the same way; the owner needs the line once, not once
per instruction. It is said again only after a turn of that engine went through in the chat (mended, then broken again).
"""

from __future__ import annotations

from bot.progress import Sender

__all__ = ["LoginNotices"]


class LoginNotices:
    def __init__(self, sender: Sender) -> None:
        self.sender = sender
        self._told: set[tuple[int, str]] = set()  # (chat, engine) told since the chat's last good run

    async def tell(self, chat_id: int, engine: str, message: str) -> bool:
        """Say ``message`` (a LoginError's text) unless this chat was already told about ``engine``."""
        if (chat_id, engine) in self._told:
            return False
        self._told.add((chat_id, engine))
        await self.sender.notice(
            chat_id, f"🔑 {message}, then send the instruction again.", f"about the {engine} login"
        )
        return True

    def clear(self, chat_id: int, engine: str) -> None:
        """A turn of ``engine`` in the chat went through: a later refusal is news again."""
        self._told.discard((chat_id, engine))
