"""Lanes: a chat runs one session per lane side by side, ``""`` its main checkout, else a git branch whose
session works in its own worktree (``<project>/.macupos/worktrees/<branch>``, relay.worktrees).

This module holds what every part needs to know about lanes without knowing sessions: the lane a piece of
code is working for (a context variable, so the Sender puts a branch's messages in its forum topic and
remembers which lane each message belongs to, for reply routing), the limit on sessions running at once
(:class:`Slots`, ``MACUPOS_MAX_PARALLEL``), and how an instruction names its branch (``@NAME …`` typed,
"branch NAME: …" spoken).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from relay.worktrees import valid_branch_name

__all__ = [
    "LANE",
    "LaneTag",
    "Slots",
    "branch_label",
    "in_lane",
    "split_branch",
    "spoken_branch",
    "terse",
]


@dataclass(frozen=True, slots=True)
class LaneTag:
    """Who a message is for: its chat, its lane and (in a forum group) the lane's topic."""

    chat_id: int
    branch: str = ""
    thread_id: int | None = None


# Set by the session manager for the code it runs for a lane (its worker, its events, its prompts).
LANE: ContextVar[LaneTag | None] = ContextVar("macupos_lane", default=None)


@contextlib.contextmanager
def in_lane(tag: LaneTag) -> Iterator[None]:
    token = LANE.set(tag)
    try:
        yield
    finally:
        LANE.reset(token)


def branch_label(branch: str) -> str:
    """How a card names its lane: "🌿 fix-login · " for a branch; nothing for the main checkout."""
    return f"🌿 {branch} · " if branch else ""


_AT = re.compile(r"^@(\S+)(?:\s+|$)(.*)$", re.DOTALL)


def split_branch(text: str) -> tuple[str | None, str]:
    """``"@fix-login make it pass"`` → ("fix-login", "make it pass"); (None, text) when it names no branch.

    A name git would refuse is returned as it is: the caller says why it cannot be used.
    """
    m = _AT.match(text.strip())
    if m is None:
        return None, text
    return m.group(1).rstrip(":,"), m.group(2).strip()


# "branch fix login: …", "on branch fix-login, …", "at fix login: …" (the last only for a branch that exists).
_SPOKEN = re.compile(
    r"^\s*(?P<lead>on\s+branch|branch|at)\s+(?P<name>[\w./-]+(?:\s+[\w./-]+){0,3}?)\s*[:,.]\s*(?P<rest>.+)$",
    re.IGNORECASE | re.DOTALL,
)


def spoken_branch(transcript: str, known: Callable[[str], bool]) -> tuple[str | None, str]:
    """A voice note's branch: "branch fix login: run the tests" → ("fix-login", "run the tests").

    Spoken words are joined with hyphens and lower-cased. "at NAME: …" is taken only when ``known(NAME)``
    (an existing branch of the chat), so an ordinary "At the end, add logging" stays an instruction.
    """
    m = _SPOKEN.match(transcript)
    if m is None:
        return None, transcript
    name = "-".join(m.group("name").lower().split()).strip(".")
    if not valid_branch_name(name):
        return None, transcript
    if m.group("lead").lower() == "at" and not known(name):
        return None, transcript
    return name, m.group("rest").strip()


def terse(text: str, max_words: int = 8) -> bool:
    """A short one-line follow-up ("removed; push"): it goes to the session the owner last talked to."""
    return "\n" not in text.strip() and len(text.split()) <= max_words


class Slots:
    """At most ``limit`` lanes run an instruction at once; the others wait in arrival order.

    A lane's live session kept between instructions (waiting for a follow-up) holds no slot.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.running: set[Hashable] = set()
        self._waiting: list[tuple[Hashable, asyncio.Future[None]]] = []

    def place(self, key: Hashable) -> int | None:
        """1 for the first in line; None when ``key`` is not waiting."""
        return next((i + 1 for i, (k, _) in enumerate(self._waiting) if k == key), None)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextlib.asynccontextmanager
    async def take(self, key: Hashable, on_wait: Callable[[int], Awaitable[None]]) -> AsyncIterator[None]:
        """Hold a slot for the block; ``on_wait(place)`` is awaited once when the lane has to wait."""
        if len(self.running) < self.limit and not self._waiting:
            self.running.add(key)
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append((key, granted))
            try:
                await on_wait(len(self._waiting))
                await granted
            except BaseException:
                if granted.done() and not granted.cancelled():
                    self._release(key)  # granted as it was cancelled: hand the slot on
                else:
                    granted.cancel()
                    self._waiting = [(k, f) for k, f in self._waiting if f is not granted]
                raise
        try:
            yield
        finally:
            self._release(key)

    def _release(self, key: Hashable) -> None:
        self.running.discard(key)
        while self._waiting and len(self.running) < self.limit:
            k, granted = self._waiting.pop(0)
            if not granted.done():
                self.running.add(k)
                granted.set_result(None)
