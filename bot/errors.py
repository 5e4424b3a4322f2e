"""One rooted error hierarchy for the Telegram front; every error carries the fields a caller needs."""

from __future__ import annotations

__all__ = ["BotError", "ChatBusyError", "VoiceError", "VoiceModelError"]


class BotError(Exception):
    """Base of every error the bot raises on purpose."""


class VoiceError(BotError):
    """A voice note could not be turned into text (undecodable audio, unreadable file).

    The message is phrased for the chat: the bot may send ``str(error)`` to the owner as is.
    """


class VoiceModelError(VoiceError):
    """The speech model could not be loaded (bad path or name, missing optional backend)."""


class ChatBusyError(BotError):
    """A chat already has a running session; one at a time per chat."""

    def __init__(self, chat_id: int) -> None:
        super().__init__(f"chat {chat_id} already has a running session")
        self.chat_id = chat_id
