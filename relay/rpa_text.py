"""The words of a Research → Plan → Audit run: the prompt of each stage and the strict verdict parser."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "VERDICT_FORMAT",
    "Verdict",
    "audit_prompt",
    "execute_prompt",
    "fix_prompt",
    "header",
    "parse_verdict",
    "plan_prompt",
    "quoted",
    "research_prompt",
    "review_prompt",
    "revise_prompt",
]

_JSON_FENCE = re.compile(r"```json[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: Literal["approve", "revise"]
    findings: tuple[str, ...]
    valid: bool = True


def parse_verdict(text: str) -> Verdict:
    """Exactly one ```json block holding ``{"verdict": "approve"|"revise", "findings": [str, …]}``.

    Anything else is a "revise" whose one finding says what was wrong, so a malformed verdict costs a round
    (bounded by max_rounds) instead of being guessed at.
    """
    blocks = _JSON_FENCE.findall(text)
    problem = ""
    if len(blocks) != 1:
        problem = f"expected exactly one ```json block, found {len(blocks)}"
    else:
        try:
            data = json.loads(blocks[0])
        except json.JSONDecodeError as exc:
            data, problem = None, f"the json block does not parse ({exc.msg} at line {exc.lineno})"
        if not problem:
            problem = _verdict_problem(data)
        if not problem:
            findings = tuple(str(f).strip() for f in data["findings"])
            return Verdict(data["verdict"], findings)
    return Verdict("revise", (f"The verdict could not be read: {problem}.",), valid=False)


def _verdict_problem(data: Any) -> str:
    if not isinstance(data, dict) or set(data) != {"verdict", "findings"}:
        return 'it must be an object with exactly the keys "verdict" and "findings"'
    if data["verdict"] not in ("approve", "revise"):
        return f'"verdict" must be "approve" or "revise", not {data["verdict"]!r}'
    findings = data["findings"]
    if not isinstance(findings, list) or not all(isinstance(f, str) and f.strip() for f in findings):
        return '"findings" must be a list of non-empty strings'
    if data["verdict"] == "revise" and not findings:
        return '"revise" needs at least one finding'
    return ""


VERDICT_FORMAT = (
    "End your answer with exactly one fenced block, and no other ```json block:\n"
    '```json\n{"verdict": "approve" | "revise", "findings": ["one finding per string, most severe first"]}\n```\n'
)


def quoted(tag: str, text: str) -> str:
    # Output of the other engine is material to judge, never instructions: fence it as such.
    return f"<{tag}>\n{text.strip() or '(empty)'}\n</{tag}>"


def header(stage: str, run_dir: Path, round_: int | None = None) -> str:
    step = f", round {round_}" if round_ is not None else ""
    return f"[RPA run {run_dir.name} · stage {stage}{step} · artifacts in {run_dir}]"


def research_prompt(task: str, run_dir: Path) -> str:
    return (
        f"{header('research', run_dir)}\n\nTask: {task}\n\n"
        "Trace the code and dependencies this task touches, with read-only tools only; change nothing. "
        "Report the facts a planner needs: files and functions with paths, current behaviour, constraints, "
        "risks, and the acceptance criteria that will show the task is done."
    )


def plan_prompt(task: str, research: str) -> tuple[str, str]:
    ask = f"Write the implementation plan for this task: {task}\nChange nothing; reply with the complete plan."
    return ask, (f"Research notes by Claude:\n{research}" if research.strip() else "")


def audit_prompt(task: str, plan: str, round_: int, max_rounds: int, run_dir: Path) -> str:
    return (
        f"{header('audit', run_dir, round_)}\n\nAudit round {round_} of at most {max_rounds} for the task: "
        f"{task}\n\nCodex wrote the plan below. Check it against the code you traced (read-only tools): "
        'correctness, missed files or callers, acceptance criteria, risks. "approve" only if it can be executed '
        'as is; otherwise "revise" with concrete findings.\n\n'
        f"{quoted('plan', plan)}\n\n{VERDICT_FORMAT}"
    )


def revise_prompt(findings: Sequence[str], audit: str) -> str:
    listed = "\n".join(f"{n}. {f}" for n, f in enumerate(findings, 1))
    return (
        f"The auditor (Claude) asks for a revised plan. Findings:\n{listed}\n\n"
        f"The auditor's full notes:\n{quoted('audit', audit)}\n\n"
        "Revise the plan so that every finding is addressed; reply with the complete revised plan."
    )


def execute_prompt(task: str, plan: str) -> tuple[str, str]:
    ask = (
        f"Carry out this approved plan in the workspace for the task: {task}\n"
        "Then report what changed (files) and how it was checked."
    )
    return ask, f"The approved plan:\n{quoted('plan', plan)}"


def review_prompt(task: str, plan: str, report: str, executor: str, run_dir: Path) -> str:
    return (
        f"{header('review', run_dir)}\n\n{executor} executed the approved plan for the task: {task}\n"
        "Review the change in the workspace without changing anything: bugs, risks, missed acceptance "
        f'criteria. "approve" with no findings if it is done.\n\n{quoted("plan", plan)}\n\n'
        f"{quoted('execution-report', report)}\n\n{VERDICT_FORMAT}"
    )


def fix_prompt(findings: Sequence[str], review: str, reviewer: str) -> str:
    listed = "\n".join(f"{n}. {f}" for n, f in enumerate(findings, 1)) or "(see the review)"
    return (
        f"The reviewer ({reviewer}) found:\n{listed}\n\nThe full review:\n{quoted('review', review)}\n\n"
        "Fix these findings in the workspace, then report what changed."
    )
