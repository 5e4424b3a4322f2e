"""Permission profiles of unattended runs: a scheduled or triggered run cannot wait for a tap, so what its
agent may do is chosen when the schedule (or trigger) is made, and anything else is denied at once and
listed in the run's result.

- ``read``: nothing that asks (Claude Code reads and searches without asking; edits and commands are denied).
- ``tests`` (the default): ``read`` plus commands that run tests or checks (pytest, make test, npm test, go
  test, cargo test, tox, ruff, mypy, scripts/test …), one plain command each, no shell chaining.
- ``edit``: ``tests`` plus file edits (Edit, Write, MultiEdit, NotebookEdit; Codex file changes).
- ``full``: everything is allowed. Say it only for a run you would approve blindly.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from relay.approvals import ApprovalDecision, ApprovalRequest

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Denial", "ProfileGate", "check_profile"]

PROFILES = ("read", "tests", "edit", "full")
DEFAULT_PROFILE = "tests"

_EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "file change"})
_COMMAND_TOOLS = frozenset({"Bash", "command"})
# One plain command: no chaining, pipes, redirections, substitutions or backgrounding.
_SHELL_META = re.compile(r"[;&|<>`$\n\\(){}]")
_TEST_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("pytest",),
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
    ("uv", "run", "pytest"),
    ("make", "test"),
    ("make", "check"),
    ("make", "lint"),
    ("npm", "test"),
    ("npm", "run", "test"),
    ("npm", "run", "lint"),
    ("yarn", "test"),
    ("pnpm", "test"),
    ("go", "test"),
    ("go", "vet"),
    ("cargo", "test"),
    ("cargo", "check"),
    ("cargo", "clippy"),
    ("tox",),
    ("nox",),
    ("ruff",),
    ("mypy",),
    ("scripts/test",),
    ("./scripts/test",),
    ("git", "status"),
    ("git", "diff"),
    ("git", "log"),
)


def check_profile(name: str) -> str:
    """The profile's canonical name; ValueError naming the known ones otherwise."""
    wanted = name.strip().lower()
    if wanted not in PROFILES:
        raise ValueError(f"unknown permission profile {name!r} (known: {', '.join(PROFILES)})")
    return wanted


def _runs_tests(command: str) -> bool:
    if _SHELL_META.search(command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return any(tuple(words[: len(prefix)]) == prefix for prefix in _TEST_COMMANDS)


@dataclass(frozen=True, slots=True)
class Denial:
    tool: str
    what: str  # the command or the files, shortened

    def __str__(self) -> str:
        return f"{self.tool} {self.what}" if self.what else self.tool


@dataclass
class ProfileGate:
    """Answers a run's tool requests by its profile; remembers what it denied for the run's result."""

    profile: str
    denied: list[Denial] = field(default_factory=list)

    def allows(self, request: ApprovalRequest) -> bool:
        p = self.profile
        if p == "full":
            return True
        if request.tool_name in _COMMAND_TOOLS and p in ("tests", "edit"):
            return _runs_tests(str(request.input.get("command", "")))
        if request.tool_name in _EDIT_TOOLS:
            return p == "edit"
        return False

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.allows(request):
            return ApprovalDecision.allow()
        what = " ".join(request.summary.split())
        self.denied.append(Denial(request.tool_name, what if len(what) <= 80 else what[:79] + "…"))
        return ApprovalDecision.deny(
            f"{request.tool_name} is outside this unattended run's permission profile ({self.profile}); "
            "nobody is there to approve it. Do without it and say in your answer what you could not do."
        )
