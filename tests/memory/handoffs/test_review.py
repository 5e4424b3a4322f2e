"""Handoff review kept in memory: what waits (newest first, subagents aside), keep, and a correction that is
appended as the owner's note and re-imported, so retrieval finds it and the handoff no longer waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.errors import SessionNotFoundError
from memory.facade import Eywa
from memory.handoffs import review
from memory.settings import MemorySettings


async def test_fresh_handoffs_wait_keep_and_correct_take_them_off_the_queue(
    eywa: Eywa, settings: MemorySettings, tmp_path: Path
) -> None:
    waiting = await review.pending(eywa, limit=100)
    assert waiting and all(h.review == "pending" and h.kind != "subagent" for h in waiting)
    assert [h.ts for h in waiting] == sorted((h.ts for h in waiting), reverse=True)
    assert await review.count_pending(eywa) == len(waiting)
    first, second = waiting[0].session_id, waiting[1].session_id

    assert await review.keep(eywa, first)
    note = await review.correct(eywa, second, "  it was the   staging db, not prod ", scratch=tmp_path / "s")
    assert note.endswith("it was the staging db, not prod")
    left = {h.session_id for h in await review.pending(eywa, limit=100)}
    assert first not in left and second not in left and len(left) == len(waiting) - 2

    corrected = (await eywa.show(second)).handoff
    assert corrected is not None and corrected.source == "correction" and corrected.review == "kept"
    assert "staging db, not prod" in corrected.markdown
    mirrored = list(settings.handoffs_dir.rglob(f"{second}.md"))  # the readable tree has it too
    assert mirrored and "staging db, not prod" in mirrored[0].read_text(encoding="utf-8")
    assert not await review.keep(eywa, "no-such-session")


async def test_a_correction_of_nothing_or_of_a_missing_handoff_is_refused(eywa: Eywa, tmp_path: Path) -> None:
    sid = (await review.pending(eywa, limit=1))[0].session_id
    with pytest.raises(review.ReviewError, match="empty"):
        await review.correct(eywa, sid, "   ", scratch=tmp_path)
    with pytest.raises(review.ReviewError, match="longer"):
        await review.correct(eywa, sid, "x" * 5000, scratch=tmp_path)
    with pytest.raises(SessionNotFoundError):
        await review.correct(eywa, "nope", "fix", scratch=tmp_path)
    assert (await eywa.show(sid)).handoff.review == "pending"  # type: ignore[union-attr]


async def test_the_queue_filters_by_project(settings: MemorySettings, transcripts: Path) -> None:
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False)
        every = await review.pending(eywa, limit=1000)
        named = {p for h in every for p in h.projects}
        if not named:
            pytest.fail("the fixtures should name at least one project")
        project = sorted(named)[0]
        some = await review.pending(eywa, limit=1000, project=project.upper())
        assert some and all(project in h.projects for h in some)
        assert await review.count_pending(eywa, project=project) == len(some)
