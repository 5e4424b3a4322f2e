"""`memory import` in batches: the same rows and files as one at a time; a hostile file is reported, never fatal."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench._handoff_tree import hostile_frontmatters, write_hostile_tree, write_tree
from memory.errors import DestinationError
from memory.facade import Eywa
from memory.handoffs.files import MAX_HANDOFF_BYTES
from memory.handoffs.format import to_markdown
from memory.models import Handoff, SessionKind
from memory.settings import MemorySettings
from memory.storage.database import Database

ROOT = Path(__file__).resolve().parents[3]


def _settings(home: Path) -> MemorySettings:
    return MemorySettings(
        home=home,
        claude_config_dir=home / "claude",
        codex_home=home / "codex",
        llm_enabled=False,
        own_secrets=("owner-secret-value",),
    )


def _write(path: Path, h: Handoff) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_markdown(h))


def _corpus(tmp: Path) -> tuple[Path, Path]:
    """(a first tree, imported before; the tree under test): 600 eywa-mcp files (three batches of 256) plus
    the cases where order within a batch matters."""
    first, tree = tmp / "first", tmp / "tree"
    write_tree(tree, 600, seed=21)
    parent = "parent-session"
    _write(first / "moved.md", Handoff(session_id="moved", date="2025-01-03", headline="before the move"))
    _write(first / "gone.md", Handoff(session_id="gone", date="2025-01-03", headline="to be forgotten"))
    _write(first / "again.md", Handoff(session_id="again", date="2025-02-01", headline="imported twice",
                                      keywords=["old-word"], what_happened=["first text"]))  # fmt: skip
    cases = {
        # a subagent before its parent, in one batch: its windows carry the parent's posted date either way
        "0000/a-child.md": Handoff(session_id=f"{parent}/agent-1", date="2025-03-01", headline="child work",
                                   kind=SessionKind.SUBAGENT, parent_id=parent, what_happened=["ran the tests"]),
        "0000/b-parent.md": Handoff(session_id=parent, date="2025-03-02", headline="parent work", substance=2,
                                    keywords=["walrus-index"], duration_min=30.0),
        "0000/c-moved.md": Handoff(session_id="moved", date="2025-06-07", headline="after the move"),
        "0000/d-gone.md": Handoff(session_id="gone", date="2025-01-03", headline="forgotten, imported again"),
        "0000/e-again.md": Handoff(session_id="again", date="2025-02-01", headline="new text",
                                   keywords=["new-word"], insights=["second text"]),
        "9999/z-again.md": Handoff(session_id="again", date="2025-02-02", headline="newest text, last wins",
                                   keywords=["newest-word"]),
        "0000/f-secret.md": Handoff(session_id="secret", date="2025-04-01", headline="key sk-proj-" + "a1B2" * 12,
                                    what_happened=["owner-secret-value leaked"], extra={"api_key": "hunter2!!x"}),
        "0000/g-odd.md": Handoff(session_id="notes v1", date="", headline="🚀 undated, odd id",
                                 extra={"_sections": {"Notes": "free text"}, "_preamble": "under the title"}),
    }  # fmt: skip
    for rel, h in cases.items():
        _write(tree / rel, h)
    (tree / "0000" / "h-junk.md").write_text("no frontmatter here\n")
    return first, tree


def _snapshot(home: Path) -> dict[str, object]:
    conn = sqlite3.connect(home / "memory.db")
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.chunk_terms USING fts5vocab(main, chunk_fts, 'instance')")
        conn.execute("CREATE VIRTUAL TABLE temp.content_terms USING fts5vocab(main, content, 'instance')")
        queries = {
            "handoffs": "SELECT session_id, kind, parent_id, ts, date, duration_min, substance, headline, projects,"
            " keywords, markdown, source, review, indexed FROM handoffs ORDER BY 1",
            "postings": "SELECT * FROM postings ORDER BY 1, 2, 3, 4",
            "term_df": "SELECT * FROM term_df ORDER BY 1, 2",
            "meta": "SELECT * FROM meta ORDER BY 1",
            "content": "SELECT rowid, session_id, kind, parent_id, body FROM content ORDER BY 1",
            "content_rows": "SELECT * FROM content_rows ORDER BY 1",
            "chunks": "SELECT * FROM chunks ORDER BY 1",
            "chunk_terms": "SELECT * FROM temp.chunk_terms ORDER BY 1, 2, 3, 4",
            "content_terms": "SELECT * FROM temp.content_terms ORDER BY 1, 2, 3, 4",
            "forgotten": "SELECT session_id FROM forgotten ORDER BY 1",
        }
        out: dict[str, object] = {name: conn.execute(sql).fetchall() for name, sql in queries.items()}
    finally:
        conn.close()
    mirror = home / "handoffs"
    out["mirror"] = sorted((p.relative_to(mirror).as_posix(), p.read_text()) for p in mirror.rglob("*") if p.is_file())
    return out


async def _import(home: Path, first: Path, tree: Path, **how: int) -> tuple[dict[str, object], object]:
    async with await Eywa.open(_settings(home)) as eywa:
        await eywa.import_dir(first, **how)
        await eywa.forget("gone")
        report = await eywa.import_dir(tree, **how)
    return _snapshot(home), (report.imported, [(Path(p).relative_to(tree).as_posix(), w) for p, w in report.rejected])


async def test_bulk_and_one_at_a_time_imports_store_the_same_rows_and_files(tmp_path: Path) -> None:
    first, tree = _corpus(tmp_path)
    one, one_report = await _import(tmp_path / "one", first, tree, batch_files=1, workers=0)
    bulk, bulk_report = await _import(tmp_path / "bulk", first, tree)  # batches of 256, in this process
    split, split_report = await _import(tmp_path / "split", first, tree, batch_files=7, workers=1)
    assert one_report == bulk_report == split_report
    imported, rejected = one_report  # type: ignore[misc]
    assert imported == 600 + 7 and [p for p, _ in rejected] == ["0000/d-gone.md", "0000/h-junk.md"]
    for name in one:
        assert bulk[name] == one[name], name
        assert split[name] == one[name], name
    handoffs = {row[0]: row for row in one["handoffs"]}  # type: ignore[attr-defined]
    assert handoffs["again"][7] == "newest text, last wins" and "gone" not in handoffs
    assert "sk-proj-" not in str(one) and "owner-secret-value" not in str(one)
    moved = [p for p, _ in one["mirror"] if p.endswith("/moved.md")]  # type: ignore[attr-defined]
    assert moved == ["2025/06/07/moved.md"]


async def test_a_hostile_tree_is_reported_file_by_file_and_the_rest_imported(tmp_path: Path) -> None:
    tree = tmp_path / "hostile"
    write_hostile_tree(tree, good=30, outside=tmp_path / "outside")
    os.mkfifo(tree / "2026" / "01" / "01" / "pipe.md")  # read naively, a FIFO waits forever for a writer
    (tree / "2026" / "01" / "01" / "link-in.md").symlink_to(next((tree / "good").rglob("*.md")))
    settings = _settings(tmp_path / "home")
    async with await Eywa.open(settings) as eywa:
        report = await eywa.import_dir(tree)
        listed = {r.session_id for r in await eywa.list_handoffs(limit=1000)}
    why = {Path(p).relative_to(tree).as_posix(): w for p, w in report.rejected}
    day = "2026/01/01"
    expected = {
        f"{day}/laughs-in-unknown-key.md": "anchor",
        f"{day}/laughs-in-keywords.md": "anchor",
        f"{day}/nested-brackets.md": "nesting",
        f"{day}/tag-float.md": "tag (tag:yaml.org,2002:float)",
        f"{day}/tag-timestamp.md": "tag (tag:yaml.org,2002:timestamp)",
        f"{day}/tag-python.md": "tag (tag:yaml.org,2002:python/object/apply:os.system)",
        f"{day}/anchor-only.md": "anchor (&sid)",
        f"{day}/month-13.md": "not a valid timestamp",
        f"{day}/spaces-duration.md": "invalid duration",
        f"{day}/huge.md": f"over the {MAX_HANDOFF_BYTES:,}-byte limit",
        f"{day}/binary.md": "not UTF-8",
        f"{day}/pipe.md": "not a regular file",
        f"{day}/link-out.md": "symbolic link",
        f"{day}/link-in.md": "symbolic link",
        "linked-folder": "symbolic link to a folder",
    }
    assert set(why) == set(expected)
    for path, words in expected.items():
        assert words in why[path], (path, why[path])
    assert report.imported == 30 and len(listed) == 30
    assert not listed & {"bomb-1", "bomb-2", "deep", "tag-float", "tag-ts", "tag-py", "anchored", "huge", "outside"}
    assert len(hostile_frontmatters()) == 9  # every hostile frontmatter is among the expected rejections


def test_importing_a_hostile_tree_stays_within_300_mb_and_finishes(tmp_path: Path) -> None:
    tree = tmp_path / "hostile"
    write_hostile_tree(tree, good=50, outside=tmp_path / "outside")
    code = (
        "import re, resource, sys\n"
        "from macupos.cli import main\n"
        "try:\n"
        "    main(['memory', 'import', sys.argv[1]])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        # VmHWM: this process's own peak (ru_maxrss carries pytest's over through fork and exec); the worker
        # process that parsed the files has exited and been waited for: RUSAGE_CHILDREN is its peak.
        "own = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024\n"
        "print(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
    )
    env = {**os.environ, "MACUPOS_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "MACUPOS_MEMORY_LLM": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tree)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported 50 handoff(s)" in done.stdout
    assert done.stderr.count("rejected ") == 13 and "Traceback" not in done.stderr
    own_mb, worker_mb = (int(x) for x in done.stdout.split()[-2:])
    assert own_mb <= 300 and worker_mb <= 300, (own_mb, worker_mb)


async def test_a_failed_batch_writes_nothing_and_the_next_one_goes_through(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:

        def fails(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO meta(key, value) VALUES('probe', '1')")
            raise OSError("disk went away")

        with pytest.raises(OSError, match="disk went away"):
            await db.write_sync(fails)
        await db.write_sync(lambda conn: conn.execute("INSERT INTO meta(key, value) VALUES('after', '2')"))
        async with db.conn.execute("SELECT key FROM meta WHERE key IN ('probe', 'after')") as cur:
            assert [r[0] for r in await cur.fetchall()] == ["after"]
    finally:
        await db.close()


async def test_a_mirror_that_cannot_be_written_stops_the_import_and_stores_nothing_of_its_batch(
    tmp_path: Path,
) -> None:
    # The rows of a batch and its files go together: a file that cannot be written undoes the batch's rows.
    tree = tmp_path / "tree"
    write_tree(tree, 40, seed=5)
    settings = _settings(tmp_path / "home")
    async with await Eywa.open(settings) as eywa:
        blocked = settings.handoffs_dir
        blocked.mkdir(parents=True, exist_ok=True)
        for year in {p.relative_to(tree).parts[0] for p in tree.rglob("*.md")}:
            (blocked / year).write_text("a file where the year's folder goes")
        with pytest.raises(DestinationError, match=r"cannot write to .*: Not a directory"):
            await eywa.import_dir(tree)
        assert await eywa.list_handoffs(limit=100) == []
        for year in [p for p in blocked.iterdir() if p.is_file()]:
            year.unlink()
        report = await eywa.import_dir(tree)  # the way out: the same import, once the disk is fixed
        assert report.imported == 40 and len(await eywa.list_handoffs(limit=100)) == 40
    assert len(list(settings.handoffs_dir.rglob("*.md"))) == 40
