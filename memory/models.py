"""The memory core's own data types. SDK and file formats are translated into these at the boundary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Block",
    "BlockKind",
    "Entry",
    "Handoff",
    "LineProblem",
    "SessionKind",
    "Transcript",
]


class SessionKind(StrEnum):
    MAIN = "main"  # a Claude Code session the owner ran
    SUBAGENT = "subagent"  # a Claude Code subagent (Task) run: linked to its parent, never grounding on its own
    CODEX = "codex"  # a Codex rollout


class BlockKind(StrEnum):
    TEXT = "text"
    THINKING = "thinking"
    TOOL_USE = "tool_use"
    TOOL_RESULT = "tool_result"
    IMAGE = "image"


@dataclass(frozen=True, slots=True)
class Block:
    kind: BlockKind
    text: str = ""  # text, thinking, tool result text (already truncated and redacted)
    tool_name: str = ""
    tool_id: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    truncated_chars: int = 0  # how many characters of the original were dropped


@dataclass(frozen=True, slots=True)
class Entry:
    """One conversational line on the live branch of a session."""

    role: str  # "user" | "assistant" | "system"
    timestamp: str  # ISO-8601 as written by the source ("" when absent)
    blocks: tuple[Block, ...]
    uuid: str = ""
    line_no: int = 0
    subtype: str = ""  # system subtype: api_error, compact_boundary, turn_duration, ...
    is_compact_summary: bool = False
    is_meta: bool = False  # injected by the CLI (caveats, command output), not typed by the owner
    model: str = ""
    subagent_ref: str = ""  # session id of the subagent this line launched or summarises


@dataclass(frozen=True, slots=True)
class LineProblem:
    path: str
    line_no: int
    reason: str  # "invalid json", "invalid utf-8", "not an object", "truncated last line", ...


@dataclass(slots=True)
class Transcript:
    """A parsed session: metadata plus the entries on its live branch, in order."""

    session_id: str
    kind: SessionKind
    source_path: str
    entries: list[Entry] = field(default_factory=list)
    parent_id: str = ""
    agent_id: str = ""
    cwd: str = ""
    git_branch: str = ""
    title: str = ""
    summaries: list[str] = field(default_factory=list)
    model: str = ""
    version: str = ""
    started_at: str = ""
    ended_at: str = ""
    problems: list[LineProblem] = field(default_factory=list)
    skipped_types: Counter[str] = field(default_factory=Counter)
    lines_read: int = 0
    bytes_read: int = 0
    subagents: list[Transcript] = field(default_factory=list)  # inline sidechains split out of the main file
    shed_entries: int = 0  # entries let go once rendered (a big transcript's are most of its memory)

    @property
    def entry_count(self) -> int:
        return len(self.entries) + self.shed_entries

    def shed(self) -> None:
        """Let the entries go, keeping their count: an ingest needs only the markdown once rendered."""
        self.shed_entries += len(self.entries)
        self.entries = []


@dataclass(slots=True)
class Handoff:
    """The structured summary of one session; memory.handoffs.format writes it as markdown with YAML frontmatter."""

    session_id: str
    date: str  # ISO-8601 with offset, the session's start
    headline: str
    duration_min: float = 0.0
    model: str = ""
    projects: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    substance: int = 1  # 0 no work, 1 single task, 2 multi-step
    what_happened: list[str] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)
    key_files: list[str] = field(default_factory=list)
    open_threads: list[str] = field(default_factory=list)
    kind: SessionKind = SessionKind.MAIN
    parent_id: str = ""
    source: str = "fallback"  # "llm" | "fallback" | "import" | "correction"
    extra: dict[str, Any] = field(default_factory=dict)  # unknown frontmatter keys, kept on round trips
