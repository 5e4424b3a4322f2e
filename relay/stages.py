"""Per-stage settings for Codex turns: sandbox, reasoning effort, model, timeout and approval policy of each
RPA stage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

__all__ = [
    "APPROVAL_POLICIES",
    "DEFAULT_STAGES",
    "EFFORTS",
    "HIGHEST",
    "SANDBOXES",
    "STAGES",
    "STAGE_BRIEFS",
    "ApprovalPolicy",
    "Sandbox",
    "StageConfig",
    "StageName",
    "stage_configs",
]

StageName = Literal["research", "plan", "audit", "execute", "review", "fix"]
Sandbox = Literal["read-only", "workspace-write"]
# Codex's own approval policies. "never": nothing waits for a person (the sandbox is the limit);
# "on-request": Codex asks when it wants to go past the sandbox; "untrusted": it asks before any command
# it does not know to be safe, and before file changes. The owner answers on the phone (relay.codex).
ApprovalPolicy = Literal["never", "on-request", "untrusted"]

STAGES: tuple[str, ...] = get_args(StageName)
SANDBOXES: tuple[str, ...] = get_args(Sandbox)
APPROVAL_POLICIES: tuple[str, ...] = get_args(ApprovalPolicy)

# "highest" is resolved per turn to the top effort the installed Codex lists for the thread's model (its
# catalog differs between Codex releases and models), so the plan stage always thinks as hard as allowed.
HIGHEST = "highest"
# The values of openai_codex's ReasoningEffort enum (0.163), plus HIGHEST.
EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra", HIGHEST)


@dataclass(frozen=True)
class StageConfig:
    """How one stage runs a Codex turn. ``effort`` / ``model`` None: the owner's Codex config decides."""

    sandbox: Sandbox
    effort: str | None
    model: str | None
    timeout_s: float
    approval_policy: ApprovalPolicy = "never"

    @property
    def asks(self) -> bool:
        """Whether Codex may ask the owner for approval during this stage's turns."""
        return self.approval_policy != "never"


DEFAULT_STAGES: Mapping[str, StageConfig] = MappingProxyType(
    {
        "research": StageConfig(sandbox="read-only", effort="medium", model=None, timeout_s=600.0),
        "plan": StageConfig(sandbox="read-only", effort=HIGHEST, model=None, timeout_s=1200.0),
        "audit": StageConfig(sandbox="read-only", effort="high", model=None, timeout_s=900.0),
        "execute": StageConfig(sandbox="workspace-write", effort="medium", model=None, timeout_s=1800.0),
        "review": StageConfig(sandbox="read-only", effort="high", model=None, timeout_s=900.0),
        "fix": StageConfig(sandbox="workspace-write", effort="medium", model=None, timeout_s=1200.0),
    }
)

# What each stage asks of Codex, sent as the thread's developer instructions.
STAGE_BRIEFS: Mapping[str, str] = MappingProxyType(
    {
        "research": "trace the code and its dependencies and report facts with file paths; change nothing.",
        "plan": "write a concrete, numbered implementation plan with acceptance criteria; change nothing.",
        "audit": "audit the given plan or change against the code; list findings with severity; change nothing.",
        "execute": "carry out the given plan in the workspace, then report what changed and how it was checked.",
        "review": "review the change for bugs, risks and missed acceptance criteria; change nothing.",
        "fix": "fix the listed review findings in the workspace, then report what changed.",
    }
)

_FIELDS = ("sandbox", "effort", "model", "timeout_s", "approval_policy")


def stage_configs(overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, StageConfig]:
    """Every stage's settings: the defaults with ``overrides`` (the ``[relay.stages.<name>]`` TOML tables)
    applied field by field. An empty string for ``effort`` / ``model`` means "the owner's Codex default".

    Raises ValueError for an unknown stage, field or value, so a typo in config.toml fails at startup.
    """
    configs = dict(DEFAULT_STAGES)
    for stage, fields in overrides.items():
        if stage not in configs:
            raise ValueError(f"unknown relay stage {stage!r} (known: {', '.join(STAGES)})")
        unknown = sorted(set(fields) - set(_FIELDS))
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown} for relay stage {stage!r} (known: {', '.join(_FIELDS)})")
        configs[stage] = replace(configs[stage], **{name: _check(stage, name, value) for name, value in fields.items()})
    return configs


def _check(stage: str, name: str, value: Any) -> Any:
    where = f"relay stage {stage!r}: {name}"
    if name == "sandbox":
        if value not in SANDBOXES:
            raise ValueError(f"{where} must be one of {SANDBOXES}, not {value!r}")
        return cast(Sandbox, value)
    if name == "approval_policy":
        if value not in APPROVAL_POLICIES:
            raise ValueError(f"{where} must be one of {APPROVAL_POLICIES}, not {value!r}")
        return cast(ApprovalPolicy, value)
    if name == "timeout_s":
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError(f"{where} must be a positive number of seconds, not {value!r}")
        return float(value)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, not {value!r}")
    if name == "effort" and value not in EFFORTS:
        raise ValueError(f"{where} must be one of {EFFORTS}, not {value!r}")
    return value
