"""One rooted error hierarchy for the Telegram front; every error carries the fields a caller needs.

Every error the bot raises on purpose is a :class:`BotError`. The tree (a class defined in another module
names it)::

    BotError
        VoiceError
            VoiceModelError
        SpeechError
            SpeechUnavailableError
        ChatBusyError
        InboxError
        LaneError
        ConfigError
        ScheduleSpecError  (bot.schedule_cron)
        SpendCapReached  (bot.spend_caps: also a RelayError, so the relay ends the stage it is raised in)
        KeysError  (bot.keys_command: the memory service refused /key or /keys, or did not answer)
"""

from __future__ import annotations

__all__ = [
    "BotError",
    "ChatBusyError",
    "ConfigError",
    "InboxError",
    "LaneError",
    "SpeechError",
    "SpeechUnavailableError",
    "VoiceError",
    "VoiceModelError",
]


class BotError(Exception):
    """Base of every error the bot raises on purpose."""


class VoiceError(BotError):
    """A voice note could not be turned into text (undecodable audio, unreadable file).

    The message is phrased for the chat: the bot may send ``str(error)`` to the owner as is.
    """


class VoiceModelError(VoiceError):
    """The speech model could not be loaded (bad path or name, missing optional backend)."""


class SpeechError(BotError):
    """A spoken answer could not be made (the text-to-speech voice failed or could not be encoded).

    The message is phrased for the chat, like ``VoiceError``'s.
    """


class SpeechUnavailableError(SpeechError):
    """Spoken answers need the optional ``speech`` extra, which is not installed.

    ``install_hint`` is the command that enables them.
    """

    install_hint = "pip install 'macupos[speech]'"

    def __init__(self, missing: str) -> None:
        super().__init__(f"spoken answers are not installed (no {missing}); enable them with: {self.install_hint}")
        self.missing = missing


class ChatBusyError(BotError):
    """A chat already has a running session; one at a time per chat."""

    def __init__(self, chat_id: int) -> None:
        super().__init__(f"chat {chat_id} already has a running session")
        self.chat_id = chat_id


class InboxError(BotError):
    """A sent file could not be saved in the project's inbox (a link or a file where a folder belongs, a full
    disk). Nothing runs; the message is phrased for the chat."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"cannot save into {path}: {reason}")
        self.path = path
        self.reason = reason


class LaneError(BotError):
    """A branch's lane cannot run (discarded, or its project gone); said in the chat."""

    def __init__(self, branch: str, reason: str) -> None:
        super().__init__(f"branch {branch}: {reason}")
        self.branch = branch
        self.reason = reason


class ConfigError(BotError):
    """A setting is missing or malformed; the message names the variable and says what to do."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable
