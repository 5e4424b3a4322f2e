"""How a Claude Code run ends, as the owner and the ledger see it: its ``SessionResult`` (the CLI's running cost
made this run's), the ledger's rows for it and for the Codex turns it caused, and the error a failed run raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import claude_agent_sdk as sdk

from relay.errors import LoginError, RelayError, SessionError, SessionNotFoundError
from relay.events import SessionResult
from relay.ledger import Ledger
from relay.sdk_events import usage_of

__all__ = ["CostCount", "record_codex_turn", "record_result", "run_failure", "session_result"]

_SEE_STDERR = "Check stderr output for details"  # what the SDK says of a CLI that exited with an error
# What the CLI says (stderr, and the errors of its result) when asked to resume a session it does not have:
# a UUID it has no transcript of, or an id that is no UUID (a handoff imported into memory under another name).
_NOT_FOUND = ("No conversation found with session ID", "is not a UUID and does not match any session")


class CostCount:
    """The CLI reports a session's running cost total (restored on --resume); a run's cost is what it added."""

    def __init__(self, seen: float = 0.0) -> None:
        self.seen = seen

    def this_run(self, total: float | None) -> float | None:
        if total is None:
            return None
        cost = total - self.seen if total >= self.seen else total  # a fresh count starts from zero
        self.seen = total
        return cost


def session_result(
    message: sdk.ResultMessage, texts: list[str], session_id: str, costs: CostCount, interrupted: bool
) -> SessionResult:
    """Our result of a run the CLI ended with ``message``; ``texts``: the run's streamed text, when the
    message carries no answer of its own."""
    answer = message.result if isinstance(message.result, str) and message.result else "\n".join(texts)
    return SessionResult(
        session_id=session_id,
        answer=answer,
        turns=message.num_turns,
        duration_s=message.duration_ms / 1000.0,
        usage=usage_of(message.usage, costs.this_run(message.total_cost_usd)),
        subtype="interrupted" if interrupted else message.subtype,
        is_error=bool(message.is_error) and not interrupted,
    )


async def record_result(
    ledger: Ledger, result: SessionResult, message: sdk.ResultMessage, *, model: str | None, run_id: str, stage: str
) -> None:
    """The run's row in the ledger; ``model``: the configured one, else the first the CLI reported."""
    models = list((message.model_usage or {}).keys())
    await ledger.record(
        engine="claude",
        usage=result.usage,
        model=model or (models[0] if models else ""),
        session_id=result.session_id,
        run_id=run_id,
        stage=stage,
        duration_s=result.duration_s,
    )


async def record_codex_turn(ledger: Ledger, turn: Any, *, session_id: str, run_id: str, stage: str) -> None:
    """The ledger's row for a Codex turn (a relay-tools turn) the session caused; the turn's own stage first."""
    await ledger.record(
        engine="codex",
        usage=turn.usage,
        model=str(turn.model),
        session_id=session_id,
        thread_id=str(turn.thread_id),
        run_id=run_id,
        stage=str(getattr(turn, "stage", "") or stage),
        duration_s=float(turn.duration_s),
        rollout_path=getattr(turn, "rollout_path", None) or "",
    )


def run_failure(
    message: str,
    exc: BaseException | None,
    *,
    login: LoginError | None,
    resume: str | None,
    stderr_tail: str,
    session_id: str,
    redact: Callable[[str], str],
) -> RelayError:
    """The error for a failed run; a resume the CLI could not find and a refused login are typed, so callers
    need no stderr."""
    if login is not None:
        return login
    said = f"{stderr_tail}\n{exc or ''}"
    if resume and any(marker in said for marker in _NOT_FOUND):
        return SessionNotFoundError(resume, stderr_tail=stderr_tail)
    last = stderr_tail.strip().splitlines()[-1:]
    if last and _SEE_STDERR in message:  # the owner reads this on a phone: say what the CLI said
        message = message.replace(_SEE_STDERR, f"its last output: {redact(last[0])[:300]}")
    return SessionError(message, session_id=session_id, stderr_tail=stderr_tail)
