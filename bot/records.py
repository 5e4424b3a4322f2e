"""The rows bot state keeps, as values: updates, chats, queued instructions, runs, callbacks, reviews."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Branch",
    "Callback",
    "ChatState",
    "HandoffReview",
    "QueueStatus",
    "QueuedInstruction",
    "ReviewState",
    "Run",
    "RunStatus",
    "SpeechMode",
    "StoredUpdate",
    "UpdateStatus",
]

UpdateStatus = Literal["received", "handling", "done", "failed", "interrupted"]
# "held": waiting when the process died; it runs only if the owner presses Resume.
QueueStatus = Literal["queued", "running", "done", "failed", "cancelled", "interrupted", "held"]
RunStatus = Literal["running", "done", "failed", "stopped", "interrupted", "resumed", "dismissed"]
ReviewState = Literal["pending", "kept", "forgotten", "corrected"]
# /speak: "voice" (the default) speaks the answers to voice notes, "on" every answer, "off" none.
SpeechMode = Literal["voice", "on", "off"]


@dataclass(frozen=True, slots=True)
class StoredUpdate:
    update_id: int
    chat_id: int | None
    user_id: int | None
    kind: str
    payload: dict[str, Any]
    status: UpdateStatus
    received_at: float
    handled_at: float | None


@dataclass(frozen=True, slots=True)
class ChatState:
    chat_id: int
    project: str = ""  # "": the default project
    session_id: str = ""  # what a follow-up continues; "" after /new
    last_session_id: str = ""  # the latest session, kept across /new for "continue that one"
    pending_transcript: str = ""
    pending_correction: str = ""  # session id of a handoff whose correction the next reply is
    last_branch: str = ""  # the lane the owner last talked to ("" the main checkout)
    last_branch_at: float = 0.0


@dataclass(frozen=True, slots=True)
class QueuedInstruction:
    id: int
    chat_id: int
    text: str
    source: str
    status: QueueStatus
    created_at: float
    images: tuple[str, ...] = ()  # paths of the images sent with it (in the project's inbox)
    branch: str = ""  # its lane: "" the main checkout, else a branch's worktree
    profile: str = ""  # permission profile of an unattended run ("" asks the owner)
    budget_usd: float | None = None  # its spending cap (None: the default)
    origin: str = ""  # "", "schedule:<id>", "trigger:<delivery>"
    project: str = ""  # the project a main-lane instruction runs in ("" the chat's)
    user_id: int | None = None  # who sent it (None: queued by a version that did not record it)


@dataclass(frozen=True, slots=True)
class Run:
    id: int
    chat_id: int
    instruction: str
    session_id: str
    project: str
    status: RunStatus
    started_at: float
    finished_at: float | None
    branch: str = ""  # its lane: "" the main checkout, else a branch's worktree
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class Callback:
    token: str
    chat_id: int
    user_id: int
    action: str
    payload: dict[str, Any]
    expires_at: float
    used_at: float | None


@dataclass(frozen=True, slots=True)
class HandoffReview:
    session_id: str
    chat_id: int
    message_id: int | None
    state: ReviewState
    correction: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class Branch:
    """A chat's branch: its worktree, the base it merges into, and its session."""

    chat_id: int
    branch: str
    project: str
    base: str
    path: str
    session_id: str
    thread_id: int | None
    created_at: float
    updated_at: float
