"""The one atomic file writer: all or nothing, no temp file left behind, mode and links kept when asked."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from memory.storage.files import write_atomic, write_atomic_bytes


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_write_replaces_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "notes.md"
    write_atomic(path, "first version, rather long\n" * 10)
    write_atomic(path, "second\n")
    assert path.read_text(encoding="utf-8") == "second\n"
    assert _leftovers(path.parent) == []


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("kept\n", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "a lone surrogate \ud800 cannot be UTF-8")  # fails before the temp file is written
    assert path.read_text(encoding="utf-8") == "kept\n"

    # A failure after the temp file is written (the rename target is a folder): still no temp file left.
    target = tmp_path / "folder"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(OSError):
        write_atomic_bytes(target, b"data")
    assert _leftovers(tmp_path) == []
    assert (target / "inside").read_text() == "x"


def test_keep_mode_keeps_a_private_file_private(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}\n")
    os.chmod(path, 0o640)
    write_atomic(path, '{"a": 1}\n', keep_mode=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    write_atomic(path, '{"a": 2}\n')  # without keep_mode: the new file's own (private) mode
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_follow_symlink_writes_where_the_link_points_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    write_atomic(link, "new\n", follow_symlink=True)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text() == "new\n"
    assert _leftovers(real.parent) == [] and _leftovers(tmp_path) == []


def test_without_follow_symlink_the_link_is_replaced_by_a_file(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("untouched\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, "replaced\n")
    assert not link.is_symlink() and link.read_text() == "replaced\n"
    assert real.read_text() == "untouched\n"


def test_concurrent_writers_use_their_own_temp_files(tmp_path: Path) -> None:
    """Eight threads rewrite one file at once: every write lands whole (one writer's full text), none fails
    on another's temp file, and no temp file is left."""
    path = tmp_path / "shared.md"
    texts = [f"writer {n}\n" * (2000 + n) for n in range(8)]
    barrier = threading.Barrier(len(texts))
    errors: list[BaseException] = []

    def writer(text: str) -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(20):
                write_atomic(path, text, sync=False)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert path.read_text() in texts
    assert _leftovers(tmp_path) == []
