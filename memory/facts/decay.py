"""Derived decay and the lifecycle it drives. Pure functions of (clock start, access count, now).

Decay is computed on read and never stored, so time passing never mutates the world. Following
MemEcsy, the clock starts at creation (reset by an explicit revive), not at the last access:
reinforcement comes only from ``access_count``, which stretches the half-life by 50 % per access.
"""

from __future__ import annotations

from memory.facts.model import State

__all__ = [
    "ARCHIVED_BELOW",
    "DAY_MS",
    "DEFAULT_HALF_LIFE_DAYS",
    "DORMANT_BELOW",
    "effective",
    "next_state",
    "state_for",
]

DAY_MS = 86_400_000
DEFAULT_HALF_LIFE_DAYS = 30.0
DORMANT_BELOW = 0.25
ARCHIVED_BELOW = 0.05
_ORDER = {State.ACTIVE: 0, State.DORMANT: 1, State.ARCHIVED: 2}


def effective(ts_ms: int, access_count: int, now_ms: int, half_life_ms: float) -> float:
    """``0.5 ** (age / (half_life * (1 + 0.5 * access_count)))``; a memory from the future counts as new."""
    age = max(0, now_ms - ts_ms)
    return float(0.5 ** (age / (half_life_ms * (1 + 0.5 * access_count))))


def state_for(decay: float) -> State:
    if decay < ARCHIVED_BELOW:
        return State.ARCHIVED
    if decay < DORMANT_BELOW:
        return State.DORMANT
    return State.ACTIVE


def next_state(current: State, decay: float) -> State | None:
    """The state consolidate moves to, or None: transitions only go forward (revive is explicit)."""
    target = state_for(decay)
    return target if _ORDER[target] > _ORDER[current] else None
