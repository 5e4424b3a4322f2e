"""Who made a memory decision, kept in memory itself (issue 33): keep and correct name their decider on the
handoff's row (a re-extraction keeps it, the handoff file never carries it), forget names it on the forgotten
record, and a memory database of the schema before it opens with every earlier decision unattributed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memory.facade import Eywa
from memory.handoffs import review
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from memory.settings import MemorySettings
from memory.storage.database import SCHEMA_VERSION, Database
from memory.storage.migrations import MIGRATIONS


async def test_keep_and_correct_record_who_and_when_and_a_later_keep_changes_neither(
    eywa: Eywa, settings: MemorySettings, tmp_path: Path
) -> None:
    waiting = await review.pending(eywa, limit=100)
    first, second = waiting[0].session_id, waiting[1].session_id
    assert waiting[0].reviewed_by == "" and waiting[0].reviewed_at == ""  # nobody has decided yet

    assert await review.keep(eywa, first, by="  @alice \n")
    kept = await eywa.handoff(first)
    assert kept is not None and kept.review == "kept" and kept.reviewed_by == "@alice"
    assert kept.reviewed_at.startswith("20") and kept.reviewed_at.endswith("+00:00")
    assert await review.keep(eywa, first, by="@bob")  # already decided: the first decider stands
    again = await eywa.handoff(first)
    assert again is not None and (again.reviewed_by, again.reviewed_at) == ("@alice", kept.reviewed_at)

    note = await review.correct(eywa, second, "it was staging", scratch=tmp_path / "s", by="telegram Ann")
    assert note.startswith("Correction from the owner (") and ", by telegram Ann): it was staging" in note
    fixed = await eywa.handoff(second)
    assert fixed is not None and fixed.source == "correction" and fixed.review == "kept"
    assert fixed.reviewed_by == "telegram Ann" and fixed.reviewed_at
    assert "telegram Ann" in fixed.markdown  # the note names who; the frontmatter does not
    front = fixed.markdown.split("\n---", 1)[0]
    assert "reviewed" not in front and "telegram Ann" not in front

    # Re-extracting the kept handoff (a re-ingest, a new extraction model) keeps who decided.
    await eywa.extract(first, use_llm=False)
    redone = await eywa.handoff(first)
    assert redone is not None and (redone.review, redone.reviewed_by) == ("kept", "@alice")
    mirrored = next(settings.handoffs_dir.rglob(f"{first}.md")).read_text(encoding="utf-8")
    assert "@alice" not in mirrored  # the readable tree holds the handoff, not the review


async def test_a_keep_without_a_name_records_when_and_the_unnamed_keep_can_be_claimed(eywa: Eywa) -> None:
    sid = (await review.pending(eywa, limit=1))[0].session_id
    assert await review.keep(eywa, sid)  # existing callers pass no one
    row = await eywa.handoff(sid)
    assert row is not None and row.reviewed_by == "" and row.reviewed_at
    assert await review.keep(eywa, sid, by="owner")
    row = await eywa.handoff(sid)
    assert row is not None and row.reviewed_by == "owner"


async def test_forget_records_who_on_the_forgotten_record(eywa: Eywa) -> None:
    first, second = [h.session_id for h in await review.pending(eywa, limit=2)]
    removed = await review.forget(eywa, first, by="@carol")
    assert first in removed and await eywa.is_forgotten(first)
    gone = await review.forgotten(eywa, first)
    assert gone is not None and gone.by == "@carol" and gone.at.startswith("20")
    await eywa.forget(second)  # the facade's own forget, as the CLI calls it: nobody named
    unnamed = await review.forgotten(eywa, second)
    assert unnamed is not None and unnamed.by == ""
    assert await review.forgotten(eywa, "never-here") is None


async def test_a_memory_database_of_the_schema_before_opens_with_earlier_decisions_unattributed(
    settings: MemorySettings, tmp_path: Path
) -> None:
    settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    old = await Database.open(settings.db_path, migrations=MIGRATIONS[:6])  # memory as it was before issue 33
    async with old.write() as conn:
        await conn.execute(
            "INSERT INTO handoffs(session_id, kind, ts, date, substance, headline, projects, keywords, markdown,"
            " source, review, updated_at) VALUES ('old-kept', 'main', 0, '2025-01-02', 1, 'h', '[]', '[]',"
            " ?, 'import', 'kept', '2025-01-02')",
            (to_markdown(Handoff(session_id="old-kept", date="2025-01-02", headline="h", substance=1)),),
        )
        await conn.execute("INSERT INTO forgotten(session_id, at) VALUES ('old-gone', '2025-01-03T00:00:00+00:00')")
    await old.close()
    plain = sqlite3.connect(settings.db_path)
    assert plain.execute("PRAGMA user_version").fetchone() == (6,)
    plain.close()

    async with await Eywa.open(settings) as eywa:
        assert await eywa.db.schema_version() == SCHEMA_VERSION
        row = await eywa.handoff("old-kept")
        assert row is not None and (row.review, row.reviewed_by, row.reviewed_at) == ("kept", "", "")
        gone = await review.forgotten(eywa, "old-gone")
        assert gone is not None and (gone.at, gone.by) == ("2025-01-03T00:00:00+00:00", "")
        assert await review.keep(eywa, "old-kept", by="@dave")  # kept by nobody known: this keep names someone
        claimed = await eywa.handoff("old-kept")
        assert claimed is not None and claimed.reviewed_by == "@dave"
