"""The approval seam: what the relay asks when a tool call needs the owner's consent, and the answer it takes.

A session's caller (the bot's tap-to-approve buttons, a test) gives an :data:`ApprovalHandler`; the relay
turns Claude's permission callback and Codex's approval requests (a command to run, files to change) into an
:class:`ApprovalRequest` and the :class:`ApprovalDecision` back into each engine's answer, so no caller sees
SDK types. "Allow for this session" is kept by the relay (the Claude session's gate, the Codex grants).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ApprovalDecision", "ApprovalHandler", "ApprovalRequest", "Engine", "Verdict", "describe_input"]

Verdict = Literal["allow", "deny", "allow_for_session"]
Engine = Literal["claude", "codex"]


def describe_input(tool_input: Mapping[str, Any]) -> str:
    """The one thing a person needs to judge a tool call: its command, file or URL, else the whole input."""
    shown = tool_input.get("command") or tool_input.get("file_path") or tool_input.get("url")
    return str(shown) if shown else json.dumps(dict(tool_input), ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call of session ``session_id`` that needs the owner's consent.

    Claude: ``tool_name`` is the tool (``Bash``, ``Write``…) and ``input`` its input. Codex: ``session_id`` is
    the Codex thread, ``tool_name`` is ``command`` (``input["command"]``, run in ``input["cwd"]``) or
    ``file change`` (``input["paths"]``, the patch in ``input["diff"]``, one line per file in
    ``diff_summary``), ``stage`` the relay stage whose turn asks and ``reason`` why Codex asks.
    """

    session_id: str
    tool_name: str
    input: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""  # the tool call's id, when the CLI gives one
    engine: Engine = "claude"
    stage: str = ""
    diff_summary: str = ""
    reason: str = ""

    @property
    def summary(self) -> str:
        """What a person judges the request by: the command, the changed files, else the input."""
        return self.diff_summary or describe_input(self.input)


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """The owner's answer. ``message`` tells the model why, on a deny."""

    verdict: Verdict
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.verdict != "deny"

    @classmethod
    def allow(cls) -> ApprovalDecision:
        return cls("allow")

    @classmethod
    def allow_for_session(cls) -> ApprovalDecision:
        """Allow this tool, and every later call of it in the same session, without asking again."""
        return cls("allow_for_session")

    @classmethod
    def deny(cls, message: str) -> ApprovalDecision:
        return cls("deny", message)


ApprovalHandler = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]
