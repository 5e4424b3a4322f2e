"""One Codex turn's event stream (``openai-codex`` notifications) read into what the engine records: the last
agent message, the status, the first error that will not be retried, and the tokens summed over the turn.
File changes are handed to the approval bridge as they start, since their approval requests name only the item.
"""

from __future__ import annotations

from dataclasses import dataclass

from openai_codex import AsyncTurnHandle
from openai_codex.generated.v2_all import AgentMessageThreadItem, FileChangeThreadItem
from openai_codex.models import (
    ErrorNotification,
    ItemCompletedNotification,
    ItemStartedNotification,
    ThreadTokenUsageUpdatedNotification,
    TurnCompletedNotification,
)
from openai_codex.types import TurnStatus

from relay.codex_approvals import ApprovalBridge
from relay.login import is_codex_unauthorized

__all__ = ["Collected", "collect"]


@dataclass(slots=True)
class Collected:
    """What one turn said and spent; ``status``: completed | interrupted | failed."""

    answer: str = ""
    status: str = "failed"
    error: str = ""
    unauthorized: bool = False  # the model API refused the login (see relay.login)
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0


async def collect(handle: AsyncTurnHandle, bridge: ApprovalBridge) -> Collected:
    """Read the turn's events to its end (the caller bounds the wait)."""
    collected = Collected()
    agent_texts: list[str] = []
    async for event in handle.stream():
        payload = event.payload
        if isinstance(payload, ItemStartedNotification):
            started = payload.item.root
            if isinstance(started, FileChangeThreadItem):  # its approval request names only the item
                changes = [(c.path, c.kind.root.type, c.diff) for c in started.changes]
                bridge.file_change(payload.thread_id, started.id, changes)
        elif isinstance(payload, ItemCompletedNotification):
            item = payload.item.root
            if isinstance(item, AgentMessageThreadItem):
                agent_texts.append(item.text)
        elif isinstance(payload, ThreadTokenUsageUpdatedNotification):
            last = payload.token_usage.last  # one model response; summed over the turn
            collected.input_tokens += last.input_tokens
            collected.cached_tokens += last.cached_input_tokens
            collected.output_tokens += last.output_tokens
        elif isinstance(payload, ErrorNotification) and not payload.will_retry:
            collected.error = _error_text(payload.error.message, payload.error.codex_error_info)
            collected.unauthorized = is_codex_unauthorized(payload.error.codex_error_info)
        elif isinstance(payload, TurnCompletedNotification):
            turn = payload.turn
            collected.status = {TurnStatus.completed: "completed", TurnStatus.interrupted: "interrupted"}.get(
                turn.status, "failed"
            )
            if turn.error is not None and not collected.error:
                collected.error = _error_text(turn.error.message, turn.error.codex_error_info)
                collected.unauthorized = is_codex_unauthorized(turn.error.codex_error_info)
    collected.answer = agent_texts[-1] if agent_texts else ""
    return collected


def _error_text(message: str, info: object) -> str:
    kind = getattr(getattr(info, "root", None), "value", None)
    return f"{message} [{kind}]" if kind else message
