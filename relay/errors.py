"""One rooted error hierarchy for the relay; every error carries the fields a caller needs.

Every error the relay raises on purpose is a :class:`RelayError`. The tree (a class defined in another
module names it)::

    RelayError
        SessionError
            SessionNotFoundError  (also memory's SessionNotFoundError)
        LoginError
        CodexError
        RelayTimeoutError
        ArtifactError
        WorktreeError  (relay.worktrees.git)
        SpendCapReached  (bot.spend_caps: also a BotError, raised by the bot's event sink inside a run)

There is one "session not found": the relay's is memory's :class:`memory.SessionNotFoundError` too, with the
relay's message and its ``stderr_tail``, so ``except SessionNotFoundError`` from either package catches it
and every ``except SessionError`` / ``except RelayError`` still does.
"""

from __future__ import annotations

from memory import SessionNotFoundError as MemorySessionNotFoundError

__all__ = [
    "ArtifactError",
    "CodexError",
    "LoginError",
    "RelayError",
    "RelayTimeoutError",
    "SessionError",
    "SessionNotFoundError",
]


class RelayError(Exception):
    """Base of every error the relay raises on purpose."""


class SessionError(RelayError):
    """A Claude Code session failed (the CLI died, the API answered garbage, …)."""

    def __init__(self, message: str, *, session_id: str = "", stderr_tail: str = "") -> None:
        super().__init__(message)
        self.session_id = session_id
        self.stderr_tail = stderr_tail


class SessionNotFoundError(SessionError, MemorySessionNotFoundError):
    """The session to resume does not exist for this Claude Code config dir (deleted, or from another machine)."""

    def __init__(self, session_id: str, *, stderr_tail: str = "") -> None:
        # Each base's __init__ builds its own message (and cooperative super() would hand this message to
        # memory's as a session id): set the relay's message and both bases' fields here.
        Exception.__init__(self, f"Claude Code has no session {session_id} to resume")
        self.session_id = session_id
        self.stderr_tail = stderr_tail


class LoginError(RelayError):
    """Claude Code or Codex was refused by its API for its login: expired, revoked or an invalid key.

    ``engine`` is "claude" or "codex"; ``detail`` is what the API said; ``fix`` is the step that mends it
    (the same wording ``macupos doctor`` gives). Retrying cannot help, so callers say it and stop.
    """

    def __init__(self, engine: str, detail: str, *, fix: str, session_id: str = "") -> None:
        name = "Claude Code" if engine == "claude" else "Codex"
        super().__init__(f"{name}'s login has expired or is invalid ({detail}). Fix: {fix}")
        self.engine = engine
        self.detail = detail
        self.fix = fix
        self.session_id = session_id


class CodexError(RelayError):
    """A Codex turn failed."""

    def __init__(self, message: str, *, thread_id: str = "", stage: str = "") -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.stage = stage


class RelayTimeoutError(RelayError):
    """A run passed its deadline or went idle too long; the process group was killed."""

    def __init__(self, message: str, *, kind: str, limit_s: float, session_id: str = "") -> None:
        super().__init__(message)
        self.kind = kind  # "deadline" | "idle"
        self.limit_s = limit_s
        self.session_id = session_id


class ArtifactError(RelayError):
    """A run's artifact (a stage's record, the report) could not be written."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"cannot write the run's artifacts to {path}: {reason}")
        self.path = path
        self.reason = reason
