"""The readable handoff tree: one file per session, wherever its id and date put it."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.storage.mirror import handoff_relpath, legacy_relpath, remove_handoff, sync_folders, write_handoff

DAY = "2026-02-03T10:00:00+00:00"


def _handoff(session_id: str) -> str:
    return f"---\nsession_id: '{session_id}'\ndate: '{DAY}'\nheadline: work\n---\n\n# work\n"


@pytest.mark.parametrize(
    ("a", "b"),
    [("notes v1", "notes_v1"), ("team:alpha", "team alpha"), ("../../../escape", "escape"), ("p/agent-1", "p_agent-1")],
)
def test_different_session_ids_never_share_a_file(a: str, b: str) -> None:
    assert handoff_relpath(a, DAY) != handoff_relpath(b, DAY)
    for sid in (a, b):
        rel = handoff_relpath(sid, DAY)
        assert rel.parent == Path("2026/02/03") and ".." not in rel.parts and "/" not in rel.name


def test_a_safe_id_keeps_its_own_name_and_a_long_one_stays_a_valid_file_name() -> None:
    assert handoff_relpath("0b4c-uuid_like.1", DAY).name == "0b4c-uuid_like.1.md"
    assert legacy_relpath("0b4c-uuid_like.1", DAY) is None
    assert len(handoff_relpath("x" * 300, DAY).name) < 255 and handoff_relpath("x" * 300, DAY) != handoff_relpath(
        "x" * 301, DAY
    )


def test_a_moved_handoff_leaves_no_copy_at_its_old_date(tmp_path: Path) -> None:
    write_handoff(tmp_path, "s3", "2026-01-03T00:00:00+00:00", _handoff("s3"))
    write_handoff(tmp_path, "s3", DAY, _handoff("s3"), old_date="2026-01-03T00:00:00+00:00")
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")] == ["2026/02/03/s3.md"]


def test_an_old_style_name_is_removed_only_when_it_is_this_sessions_file(tmp_path: Path) -> None:
    folder = tmp_path / "2026" / "02" / "03"
    folder.mkdir(parents=True)
    (folder / "notes_v1.md").write_text(_handoff("notes v1"))  # written by an earlier version
    write_handoff(tmp_path, "notes v1", DAY, _handoff("notes v1"))
    assert not (folder / "notes_v1.md").exists() and (tmp_path / handoff_relpath("notes v1", DAY)).is_file()

    (folder / "notes_v1.md").write_text(_handoff("notes_v1"))  # another session's own file
    remove_handoff(tmp_path, "notes v1", DAY)
    assert (folder / "notes_v1.md").is_file() and not (tmp_path / handoff_relpath("notes v1", DAY)).exists()


def test_a_batch_written_without_fsync_is_whole_after_sync_folders(tmp_path: Path) -> None:
    folders: set[Path] = set()
    for i, day in enumerate(["2026-01-01", "2026-01-02", "2027-05-06", ""]):
        folders.update(write_handoff(tmp_path, f"s{i}", day, _handoff(f"s{i}"), sync=False))
    assert folders == {tmp_path / "2026/01/01", tmp_path / "2026/01/02", tmp_path / "2027/05/06", tmp_path / "unknown"}
    sync_folders(tmp_path, folders)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["2026/01/01/s0.md", "2026/01/02/s1.md", "2027/05/06/s2.md", "unknown/s3.md"]
    assert (tmp_path / "unknown" / "s3.md").read_text() == _handoff("s3")


def test_a_moved_handoff_names_both_folders_it_touched(tmp_path: Path) -> None:
    write_handoff(tmp_path, "s3", "2026-01-03T00:00:00+00:00", _handoff("s3"))
    touched = write_handoff(tmp_path, "s3", DAY, _handoff("s3"), old_date="2026-01-03T00:00:00+00:00", sync=False)
    assert touched == [tmp_path / "2026/02/03", tmp_path / "2026/01/03"]
