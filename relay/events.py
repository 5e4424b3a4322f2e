"""The relay's own event types. SDK messages are translated into these at the boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HandoffReady",
    "LoginRefused",
    "PermissionRequest",
    "RelayEvent",
    "SessionResult",
    "SpendTick",
    "StageEnd",
    "StageStart",
    "TextDelta",
    "ToolEnd",
    "ToolStart",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None  # None when the engine does not report a price

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Assistant text (a whole text block of one assistant message)."""

    session_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ToolStart:
    session_id: str
    tool_use_id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolEnd:
    session_id: str
    tool_use_id: str
    is_error: bool = False
    summary: str = ""  # the first line of the result, for a progress line


@dataclass(frozen=True, slots=True)
class StageStart:
    run_id: str
    stage: str  # research | plan | audit | execute | review | fix
    engine: str  # claude | codex
    model: str
    round: int = 1


@dataclass(frozen=True, slots=True)
class StageEnd:
    run_id: str
    stage: str
    engine: str
    model: str
    duration_s: float
    usage: Usage
    artifact: str = ""  # path of the stage's markdown artifact
    thread_id: str = ""  # Codex thread or Claude session id
    ok: bool = True
    round: int = 1


@dataclass(frozen=True, slots=True)
class SpendTick:
    """A model call of a running Claude turn, priced from its token usage as it comes (relay.claude_prices):
    Claude Code reports a turn's cost only at its end, and that figure (SessionResult) replaces these."""

    session_id: str
    engine: str  # claude
    model: str
    cost_usd: float | None  # what this call added; None when the price table does not know the model
    tokens: int


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    session_id: str
    tool_name: str
    input: dict[str, Any]
    request_id: str


@dataclass(frozen=True, slots=True)
class SessionResult:
    session_id: str
    answer: str
    turns: int
    duration_s: float
    usage: Usage
    subtype: str = "success"  # success | error_during_execution | error_max_turns | interrupted | timeout
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class HandoffReady:
    session_id: str
    headline: str
    markdown: str
    budget_capped: bool = False  # deterministic: memory's daily budget for the extraction model was spent


@dataclass(frozen=True, slots=True)
class LoginRefused:
    """An engine's API refused its login in a turn the relay reported to the model rather than raised (a
    Codex tool call of a Claude session): the owner still needs to hear it, with the fix."""

    engine: str  # claude | codex
    message: str  # LoginError's text: which login, what the API said, the fix


RelayEvent = (
    TextDelta
    | ToolStart
    | ToolEnd
    | StageStart
    | StageEnd
    | SpendTick
    | PermissionRequest
    | SessionResult
    | HandoffReady
    | LoginRefused
)
