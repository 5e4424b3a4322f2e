"""A chat's lane as the bot holds it while it runs (:class:`ChatSession`), the instruction it runs (:class:`Task`),
and an instruction's one-line title. bot.sessions re-exports them; bot.lane_runner runs a Task in a lane.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from bot.lanes import LaneTag
from bot.profiles import ProfileGate
from bot.progress import Progress
from bot.records import QueuedInstruction
from bot.spend_caps import RunMeter
from relay.session import ClaudeSession

__all__ = ["ChatSession", "Task", "brief_title"]


@dataclass(frozen=True, slots=True)
class Task:
    text: str
    user_id: int
    source: str = "text"  # text | voice | attachment | resume | rpa
    queue_id: int | None = None
    images: tuple[str, ...] = ()  # paths of images (in the project's inbox) shown with the instruction
    profile: str = ""  # an unattended run's permission profile (bot.profiles); "" asks the owner
    budget_usd: float | None = None  # this run's spending cap (None: MACUPOS_RUN_BUDGET_USD)
    origin: str = ""  # "", "schedule:<id>", "trigger:<delivery>"
    project: str = ""  # a main-lane instruction's project when it is not the chat's (a schedule's, a trigger's)

    @classmethod
    def of(cls, q: QueuedInstruction, user_id: int) -> Task:
        sender = q.user_id if q.user_id is not None else user_id  # rows queued before who sent them was kept
        return cls(q.text, sender, q.source, q.id, q.images, q.profile, q.budget_usd, q.origin, q.project)


@dataclass(slots=True)
class ChatSession:
    """One lane of a chat: its worker, its live session, what it runs now."""

    chat_id: int
    branch: str = ""  # "" the main checkout
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    live: ClaudeSession | None = None
    project: str = ""
    worker: asyncio.Task[None] | None = None
    idle: asyncio.Task[None] | None = None
    closing: asyncio.Task[None] | None = None
    progress: Progress | None = None
    user_id: int = 0
    source: str = ""  # the running instruction's Task.source
    instruction: str = ""
    started: float = 0.0
    stopping: bool = False
    run_id: int = 0  # the running instruction's row in bot.db
    queue_id: int | None = None  # the queue row of the instruction the worker has taken (set when taken)
    folder: Path | None = None  # where the live session works (a branch's worktree)
    thread_id: int | None = None  # the branch's forum topic
    asking: bool = False  # a tool approval waits for the owner
    answered: bool = False  # the running instruction's answer is out: the worker only does its bookkeeping
    gate: ProfileGate | None = None  # the running instruction's permission profile, when unattended
    detached: bool = False  # the running instruction works in another project: its session is not the lane's
    last_status: str = ""  # how its last instruction ended
    meter: RunMeter | None = None  # the running instruction's spend against its caps (bot.spend_caps)
    halting: asyncio.Task[None] | None = None  # a spending cap's interrupt of the running turn

    @property
    def busy(self) -> bool:
        return self.worker is not None and not self.worker.done()

    @property
    def tag(self) -> LaneTag:
        return LaneTag(self.chat_id, self.branch, self.thread_id)


def brief_title(text: str) -> str:
    """An instruction in one line of at most 60 characters (a progress card's title, a /status line)."""
    one = " ".join(text.split())
    return one if len(one) <= 60 else one[:59] + "…"
