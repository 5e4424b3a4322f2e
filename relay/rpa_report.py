"""What an RPA run reports: each stage's outcome, the run's totals, and a few lines for a phone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.events import Usage

__all__ = ["RunReport", "StageOutcome", "phone_summary"]


@dataclass(frozen=True, slots=True)
class StageOutcome:
    index: int  # NN: the order in the run
    stage: str  # research | plan | audit | revise | execute | review | fix
    round: int
    engine: str
    model: str
    duration_s: float
    usage: Usage
    artifact: Path
    thread_id: str
    ok: bool = True
    verdict: str | None = None
    findings: tuple[str, ...] = ()
    answer: str = field(default="", repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "stage": self.stage,
            "round": self.round,
            "engine": self.engine,
            "model": self.model,
            "duration_s": round(self.duration_s, 3),
            "tokens": self.usage.tokens,
            "cost_usd": self.usage.cost_usd,
            "artifact": str(self.artifact),
            "thread_id": self.thread_id,
            "ok": self.ok,
            "verdict": self.verdict,
            "findings": list(self.findings),
        }


@dataclass(frozen=True, slots=True)
class RunReport:
    run_id: str
    approved: bool  # the plan passed the audit (True when no audit stage was asked for)
    rounds: int  # audit rounds run
    stages: list[StageOutcome]
    summary: str  # phone-sized
    cost_usd: float | None  # sum of the known prices; None when no stage reported one
    tokens: int
    duration_s: float
    artifacts_dir: Path
    error: str = ""  # set when a stage failed and the run stopped there

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "approved": self.approved,
            "rounds": self.rounds,
            "stages": [s.to_dict() for s in self.stages],
            "summary": self.summary,
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
            "duration_s": round(self.duration_s, 3),
            "artifacts_dir": str(self.artifacts_dir),
            "error": self.error,
        }


def _clip(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def phone_summary(
    outcomes: Sequence[StageOutcome],
    approved: bool,
    rounds: int,
    error: str,
    cost: float | None,
    tokens: int,
    duration: float,
    run_dir: Path,
) -> str:
    """A few lines for a phone: the outcome, open findings if any, totals, where the artifacts are."""
    by_stage = {o.stage: o for o in outcomes}  # the last of each
    lines: list[str] = []
    if error:
        failed = next((o.stage for o in reversed(outcomes) if not o.ok), "a stage")
        lines.append(f"❌ Stopped at {failed}: {_clip(error, 160)}")
    elif not approved:
        lines.append(f"⛔ Plan not approved after {rounds} audit round(s): stopped before execute.")
        audit = by_stage.get("audit")
        for n, finding in enumerate(audit.findings[:3] if audit else (), 1):
            lines.append(f"{n}. {_clip(finding, 120)}")
    else:
        parts = [f"plan approved in round {rounds}" if rounds else "plan written" if "plan" in by_stage else ""]
        if "execute" in by_stage:
            parts.append(f"executed by {by_stage['execute'].engine}")
        review = by_stage.get("review")
        if review is not None:
            found = f"{len(review.findings)} finding(s)" if review.findings else "no findings"
            parts.append(f"reviewed by {review.engine}: {review.verdict}, {found}")
        if "fix" in by_stage:
            parts.append(f"fixed by {by_stage['fix'].engine}")
        lines.append("✅ " + ("; ".join(p for p in parts if p) or "done").capitalize() + ".")
    price = "cost unknown" if cost is None else f"${cost:.4f}"
    lines.append(f"{len(outcomes)} stages · {duration:.1f} s · {tokens:,} tokens · {price}")
    lines.append(f"Artifacts: {run_dir}")
    return "\n".join(lines)
