"""Permission profiles of unattended runs: a scheduled or triggered run cannot wait for a tap, so what its
agent may do is chosen when the schedule (or trigger) is made, and anything else is denied at once and
listed in the run's result.

- ``read``: nothing that asks (Claude Code reads and searches without asking; edits and commands are denied).
- ``tests`` (the default): ``read`` plus commands that run tests or checks (pytest, make test, npm test, go
  test, cargo test, tox, ruff, mypy, scripts/test …), one plain command each, no shell chaining, and none of
  their options that delete, write elsewhere, fix the code or run another program (``_RISKY_OPTION``).
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


# Options of those commands that delete, write files anywhere, edit the code or run another program: pytest
# --basetemp (removes that folder), git log/diff --output, ruff --output-file, --fix / --add-noqa (ruff, cargo
# clippy), mypy --install-types, report files (--junitxml, --log-file), go test -exec / -toolexec / -o FILE /
# -*profile FILE / -outputdir, go vet -vettool.
_RISKY_OPTION = re.compile(
    r"--?(basetemp|output|output-file|fix|fix-only|unsafe-fixes|add-noqa|install-types|junit-?xml|log-file"
    r"|exec|toolexec|vettool|outputdir|\w*profile)(=.*)?",
    re.IGNORECASE,
)
# After make's target: only more targets and harmless flags (no VAR=value overrides, -f FILE, -C DIR, --eval).
_MAKE_WORD = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*|-[jks]\d*")


def _runs_tests(command: str) -> bool:
    if _SHELL_META.search(command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    prefix = next((p for p in _TEST_COMMANDS if tuple(words[: len(p)]) == p), None)
    if prefix is None:
        return False
    rest = words[len(prefix) :]
    if any(_RISKY_OPTION.fullmatch(word) for word in rest) or (prefix[0] == "go" and "-o" in rest):
        return False
    if prefix[0] == "make":
        return all(_MAKE_WORD.fullmatch(word) and "=" not in word for word in rest)
    if prefix == ("ruff",) and "format" in rest:  # it rewrites files unless it only checks or shows
        return "--check" in rest or "--diff" in rest
    return True


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
