"""Reading a tree of handoff files (memory.handoffs.files): sorted, hidden names passed over, each file bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.errors import SourceUnreadableError
from memory.handoffs.files import read_handoff_file, walk_tree


def test_the_walk_is_in_sorted_path_order_and_passes_over_hidden_names(tmp_path: Path) -> None:
    for rel in ("b.md", "a/x.md", "a.md", "a/b/c.md", ".hidden/x.md", "a/.tmp.md", "a/notes.txt", "Z.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    walked = [p for p, why in walk_tree(tmp_path) if why is None]
    assert walked == sorted(p for p in tmp_path.rglob("*.md") if ".hidden" not in p.parts and p.name != ".tmp.md")


def test_a_file_over_the_limit_or_not_utf8_is_refused_with_the_reason(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_bytes(b"-" * 2000)
    with pytest.raises(SourceUnreadableError, match="2,000 bytes: over the 1,000-byte limit"):
        read_handoff_file(big, limit=1000)
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"---\nheadline: caf\xe9\n---\n")
    with pytest.raises(SourceUnreadableError, match=r"not UTF-8 text \(byte 17\)"):
        read_handoff_file(bad)
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"---\r\na: 1\r\n---\rb\n")
    assert read_handoff_file(crlf) == "---\na: 1\n---\nb\n"  # as Path.read_text reads it


def test_a_file_at_the_limit_is_read_whole_and_one_whose_size_stat_understates_is_read_to_its_end(
    tmp_path: Path,
) -> None:
    exact = tmp_path / "exact.md"
    exact.write_text("x" * 1000)
    assert read_handoff_file(exact, limit=1000) == "x" * 1000
    # /proc files stat as zero bytes yet hold text: the reader goes on past the stat size, and the limit holds
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0
    assert "Name:" in read_handoff_file(status)
    with pytest.raises(SourceUnreadableError, match="over the 100-byte limit"):
        read_handoff_file(status, limit=100)
