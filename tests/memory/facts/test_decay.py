"""Decay, reinforcement and the lifecycle at fixed as-of times (half-life 30 days)."""

from __future__ import annotations

import pytest

from memory.facts import decay
from memory.facts.api import FactsApi
from memory.facts.model import State

from .conftest import days, ok

HL = 30 * decay.DAY_MS
REMEMBER = "remember m1 user Fact predicate likes object tea"


def test_effective_decay_halves_every_half_life() -> None:
    assert decay.effective(0, 0, 0, HL) == 1.0
    assert decay.effective(0, 0, HL, HL) == pytest.approx(0.5)
    assert decay.effective(0, 0, 2 * HL, HL) == pytest.approx(0.25)
    assert decay.effective(1000, 0, 0, HL) == 1.0  # a memory from the future counts as new


def test_each_access_stretches_the_half_life_by_half() -> None:
    assert decay.effective(0, 1, int(1.5 * HL), HL) == pytest.approx(0.5)
    assert decay.effective(0, 2, 2 * HL, HL) == pytest.approx(0.5)
    assert decay.effective(0, 2, HL, HL) > decay.effective(0, 0, HL, HL)


def test_state_thresholds() -> None:
    assert decay.state_for(0.25) == State.ACTIVE
    assert decay.state_for(0.2499) == State.DORMANT
    assert decay.state_for(0.05) == State.DORMANT
    assert decay.state_for(0.0499) == State.ARCHIVED
    assert decay.next_state(State.DORMANT, 0.9) is None  # never backwards: revive is explicit


async def test_recall_reports_decay_derived_at_the_as_of_time(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    assert await ok(api, "dict get [lindex [recall m1] 0] decay", days(30)) == "0.500"
    # That recall bumped access_count to 1: the half-life is now 45 days, counted from creation.
    assert await ok(api, "dict get [lindex [recall m1] 0] decay", days(45)) == "0.500"


async def test_consolidate_makes_each_transition_once_and_counts_only_real_ones(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    assert await ok(api, "consolidate", days(59)) == "transitions 0 dormant 0 archived 0"
    assert await ok(api, "consolidate", days(61)) == "transitions 1 dormant 1 archived 0"
    assert await ok(api, "consolidate", days(61)) == "transitions 0 dormant 0 archived 0"
    assert (await api.get("m1")).state == State.DORMANT  # type: ignore[union-attr]
    assert await ok(api, "consolidate", days(129)) == "transitions 0 dormant 0 archived 0"
    assert await ok(api, "consolidate", days(130)) == "transitions 1 dormant 0 archived 1"
    assert (await api.get("m1")).state == State.ARCHIVED  # type: ignore[union-attr]


async def test_active_goes_straight_to_archived_when_long_unconsolidated(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    assert await ok(api, "consolidate", days(200)) == "transitions 1 dormant 0 archived 1"


async def test_archived_memories_leave_recall_but_stay_reachable_by_id(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    await ok(api, "consolidate", days(200))
    assert await ok(api, "recall user", days(200)) == ""
    assert await ok(api, "recall all", days(200)) == ""
    assert "state Archived" in await ok(api, "recall m1", days(200))


async def test_revive_restores_active_and_restarts_the_decay_clock(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    await ok(api, "consolidate", days(200))
    await ok(api, "revive m1", days(200))
    text = await ok(api, "recall user", days(200))
    assert "state Active" in text and "decay 1.000" in text
    assert await ok(api, "consolidate", days(210)) == "transitions 0 dormant 0 archived 0"


async def test_concepts_are_anchors_that_cannot_be_forgotten(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    result = await api.run_script("forget user", as_of=days(0))
    assert not result.ok and "concept" in (result.error or "")
    assert "concepts 1" in await ok(api, "world", days(1000))


async def test_sweep_marks_first_and_deletes_only_after_the_grace_period(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    await ok(api, "consolidate", days(200))
    assert await ok(api, "sweep", days(200)) == "marked 1 deleted 0 dry_run 0"
    assert await ok(api, "sweep", days(203)) == "marked 0 deleted 0 dry_run 0"
    assert await api.get("m1") is not None
    assert await ok(api, "sweep", days(207)) == "marked 0 deleted 1 dry_run 0"
    assert await api.get("m1") is None


async def test_sweep_grace_option_and_revive_clears_the_mark(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    await ok(api, "consolidate", days(200))
    await ok(api, "sweep", days(200))
    await ok(api, "revive m1", days(201))
    await ok(api, "consolidate", days(500))
    assert await ok(api, "sweep -grace 1", days(500)) == "marked 1 deleted 0 dry_run 0"
    assert await ok(api, "sweep -grace 1", days(501)) == "marked 0 deleted 1 dry_run 0"


async def test_sweep_dry_run_reports_without_changing_anything(api: FactsApi) -> None:
    await ok(api, REMEMBER, days(0))
    await ok(api, "consolidate", days(200))
    assert await ok(api, "sweep -dry-run", days(200)) == "marked 1 deleted 0 dry_run 1"
    assert (await api.get("m1")).sweep_marked_ms is None  # type: ignore[union-attr]
    await ok(api, "sweep", days(200))
    assert await ok(api, "sweep -dry-run", days(300)) == "marked 0 deleted 1 dry_run 1"
    assert await api.get("m1") is not None


async def test_sweep_max_bounds_the_deletions_per_pass(api: FactsApi) -> None:
    await ok(api, "\n".join(f"remember m{i} user Fact predicate p{i} object o" for i in range(5)), days(0))
    await ok(api, "consolidate", days(200))
    await ok(api, "sweep", days(200))
    assert await ok(api, "sweep -max 2", days(210)) == "marked 0 deleted 2 dry_run 0"
    assert (await api.world())["memories"] == 3
    assert await ok(api, "sweep -max 0", days(210)) == "marked 0 deleted 0 dry_run 0"
    assert await ok(api, "sweep", days(210)) == "marked 0 deleted 3 dry_run 0"
