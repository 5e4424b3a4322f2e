"""Storage faults as a user meets them: `macupos memory …` in a subprocess against damaged pages, a read-only
file, a full disk (the process's file-size limit) and an I/O error. Each is one `Error:` line naming the file
and the way out, exit status 3, and what was committed before the fault is still there afterwards."""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.cli_env import cli_env, run_macupos

ROOT = Path(__file__).resolve().parents[2]
EXIT_STORAGE = 3


def _env(home: Path) -> dict[str, str]:
    return cli_env(home / "data", home=home)


def macupos(home: Path, *args: str, preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    return run_macupos(_env(home), "memory", *args, timeout=180, preexec=preexec)


def _db(home: Path) -> Path:
    return home / "data" / "memory.db"


def _ingest(home: Path, *paths: Path) -> None:
    r = macupos(home, "ingest", *map(str, paths), "--json")
    assert r.returncode == 0, r.stderr
    assert not _db(home).with_name("memory.db-wal").exists()  # the last connection checkpointed on close


def _committed(home: Path) -> dict[str, Any]:
    """What memory holds, read by SQLite itself: each handoff's headline, the sessions, and the quick check.
    (Read-write, so that closing this last connection folds the write-ahead log back and removes it.)"""
    conn = sqlite3.connect(_db(home))
    try:
        return {
            "handoffs": dict(conn.execute("SELECT session_id, headline FROM handoffs").fetchall()),
            "sessions": sorted(r[0] for r in conn.execute("SELECT session_id FROM sessions")),
            "check": conn.execute("PRAGMA quick_check").fetchall(),
        }
    finally:
        conn.close()


def damage_root_pages(db: Path, keep: Iterable[str] = ()) -> None:
    """Overwrite the page header of the root page of every table and index (but those of ``keep``'s tables),
    as a failing disk or a stray write would; page 1 (the schema) stays readable."""
    kept = set(keep)
    conn = sqlite3.connect(db)
    try:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        roots = [int(r) for t, r in conn.execute("SELECT tbl_name, rootpage FROM sqlite_master") if t not in kept and r]
    finally:
        conn.close()
    with db.open("r+b") as fh:
        for root in roots:
            if root > 1:
                fh.seek((root - 1) * page_size)
                fh.write(b"\xa5" * 64)


def _one_fault_line(stderr: str, db: Path, *phrases: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("Error: ") and "Traceback" not in stderr
    assert str(db) in line and "Way out:" in line
    for phrase in phrases:
        assert phrase in line, line
    return line


def _as_plain_user() -> None:
    """In the child: root's power to write any file is dropped, so a read-only file is read-only to it."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: gone from the bounding set, so gone after exec
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _file_size_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _big_transcript(path: Path, megabytes: int) -> Path:
    """A Claude Code transcript of about ``megabytes`` MB: long, distinct requests and answers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        n = 0
        while fh.tell() < megabytes << 20:
            role = "user" if n % 2 == 0 else "assistant"
            words = " ".join(f"word{n}x{i} gauge{(n * 7 + i) % 997}" for i in range(400))
            content: Any = words if role == "user" else [{"type": "text", "text": words}]
            line = {
                "type": role,
                "uuid": f"big-{n}",
                "parentUuid": f"big-{n - 1}" if n else None,
                "sessionId": "big-session",
                "cwd": "/work/zeppelin",
                "timestamp": f"2025-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z",
                "message": {"role": role, "content": content},
            }
            fh.write(json.dumps(line) + "\n")
            n += 1
    return path


# -- damaged pages -----------------------------------------------------------------------------------------


def test_damaged_pages_are_one_line_for_every_command_and_recover_rebuilds_from_the_mirror(
    tmp_path: Path, transcripts: Path
) -> None:
    _ingest(tmp_path, transcripts)
    before = _committed(tmp_path)
    assert before["handoffs"] and before["check"] == [("ok",)]
    db = _db(tmp_path)
    damage_root_pages(db)

    some_id = next(iter(before["handoffs"]))
    for args in (["stats"], ["list"], ["search", "hello"], ["get", "hello"], ["ingest", str(transcripts)]):
        r = macupos(tmp_path, *args)
        assert r.returncode == EXIT_STORAGE, (args, r.stderr)
        _one_fault_line(r.stderr, db, "is damaged", "macupos memory recover")
    r = macupos(tmp_path, "show", some_id)
    assert r.returncode == EXIT_STORAGE and "macupos memory recover" in r.stderr

    r = macupos(tmp_path, "recover", str(transcripts))
    assert r.returncode == 0, r.stderr
    assert "moved the old database aside" in r.stdout and "forgotten sessions was lost" in r.stderr
    damaged = sorted(db.parent.glob("memory.db.damaged-*"))
    assert [p.name for p in damaged] == [damaged[0].name]  # kept, with no empty -wal/-shm made beside it
    after = _committed(tmp_path)
    assert after["handoffs"] == before["handoffs"]  # every handoff back, from the readable mirror
    assert after["sessions"] == before["sessions"] and after["check"] == [("ok",)]
    stats = macupos(tmp_path, "stats", "--json")
    assert stats.returncode == 0 and json.loads(stats.stdout)["extraction"] == {"done": len(before["sessions"])}

    r = macupos(tmp_path, "recover")
    assert r.returncode == 1 and "nothing to recover" in r.stderr  # a healthy file is left alone


def test_recover_keeps_forgotten_sessions_forgotten_the_cost_ledger_and_the_facts(
    tmp_path: Path, transcripts: Path
) -> None:
    _ingest(tmp_path, transcripts)
    forgotten = "test-session-id"
    assert macupos(tmp_path, "forget", forgotten).returncode == 0
    fact = "remember editor user Fact predicate favorite-editor object Helix"
    assert macupos(tmp_path, "script", fact).returncode == 0
    conn = sqlite3.connect(_db(tmp_path))
    conn.execute(
        "INSERT INTO ledger(ts, engine, session_id, cost_usd) VALUES ('2025-12-01T10:00:00Z', 'claude', 's1', 0.25)"
    )
    conn.commit()
    conn.close()
    before = _committed(tmp_path)
    damage_root_pages(_db(tmp_path), keep=("forgotten", "ledger", "sqlite_sequence", "sources"))

    r = macupos(tmp_path, "recover")  # no PATHS: the damaged file still names the transcripts it read
    assert r.returncode == 0, r.stderr
    assert "salvaged 1 forgotten session(s), 1 ledger row(s)" in r.stdout
    after = _committed(tmp_path)
    assert forgotten not in after["sessions"] and forgotten not in after["handoffs"]
    assert after["handoffs"] == before["handoffs"] and after["sessions"] == before["sessions"]
    conn = sqlite3.connect(_db(tmp_path))
    assert conn.execute("SELECT engine, session_id, cost_usd FROM ledger").fetchall() == [("claude", "s1", 0.25)]
    conn.close()
    assert "replayed the structured facts: 1 memories" in r.stdout
    recalled = macupos(tmp_path, "script", "recall user")
    assert recalled.returncode == 0 and "Helix" in recalled.stdout


# -- a read-only file ----------------------------------------------------------------------------------------


def test_a_read_only_database_refuses_writes_in_one_line_and_still_reads(tmp_path: Path, transcripts: Path) -> None:
    _ingest(tmp_path, transcripts / "simonw")
    before = _committed(tmp_path)
    db = _db(tmp_path)
    db.chmod(0o444)
    try:
        r = macupos(tmp_path, "ingest", str(transcripts / "daaain_new"), preexec=_as_plain_user)
        assert r.returncode == EXIT_STORAGE, r.stderr
        _one_fault_line(r.stderr, db, "read-only", f"make {db} and its folder writable")
        listed = macupos(tmp_path, "list", "--json", preexec=_as_plain_user)
        assert listed.returncode == 0, listed.stderr  # reading memory still works
        assert {h["session_id"] for h in json.loads(listed.stdout)} == set(before["handoffs"])
    finally:
        db.chmod(0o644)
    assert _committed(tmp_path) == before
    _ingest(tmp_path, transcripts / "daaain_new")  # writable again: the same ingest now succeeds
    assert set(before["handoffs"]) < set(_committed(tmp_path)["handoffs"])


# -- a full disk -------------------------------------------------------------------------------------------


def test_a_full_disk_during_ingest_is_one_line_and_loses_nothing_committed(tmp_path: Path, transcripts: Path) -> None:
    _ingest(tmp_path, transcripts)
    before = _committed(tmp_path)
    big = _big_transcript(tmp_path / "big" / "session.jsonl", megabytes=4)
    db = _db(tmp_path)
    limit = db.stat().st_size + (256 << 10)  # room for a little, not for a 4 MB session

    r = macupos(tmp_path, "ingest", str(big.parent), preexec=_file_size_limit(limit))
    assert r.returncode == EXIT_STORAGE, r.stderr
    _one_fault_line(r.stderr, db, f"file-size limit of {limit} bytes", "nothing committed was lost")
    assert _committed(tmp_path) == before  # the ingest that failed left the database as it was

    _ingest(tmp_path, big.parent)  # with room again it goes through
    after = _committed(tmp_path)
    assert "big-session" in after["sessions"] and set(before["sessions"]) < set(after["sessions"])


# -- an I/O error ----------------------------------------------------------------------------------------


def test_an_io_error_names_the_file_and_the_way_out(tmp_path: Path, transcripts: Path) -> None:
    _ingest(tmp_path, transcripts / "simonw")
    before = _committed(tmp_path)
    db = _db(tmp_path)
    wal = db.with_name("memory.db-wal")
    wal.mkdir()  # a folder swapped in where SQLite must open the write-ahead log
    for args in (["stats"], ["ingest", str(transcripts / "daaain_new")]):
        r = macupos(tmp_path, *args)
        assert r.returncode == EXIT_STORAGE, (args, r.stderr)
        _one_fault_line(r.stderr, db, "I/O error on", "cannot be opened", "macupos doctor")
    wal.rmdir()
    assert _committed(tmp_path) == before


# -- the MCP server -------------------------------------------------------------------------------------------


@asynccontextmanager
async def _mcp(home: Path) -> Any:
    env = _env(home)
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory.mcp_server"], env=env, cwd=str(ROOT))
    with (home / "server-stderr.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


def _text(result: object) -> str:
    return "\n".join(str(getattr(c, "text", "")) for c in getattr(result, "content", []))


async def test_the_mcp_server_answers_a_storage_fault_as_a_tool_error_and_keeps_serving(
    tmp_path: Path, transcripts: Path
) -> None:
    _ingest(tmp_path, transcripts / "simonw")
    db = _db(tmp_path)
    damage_root_pages(db)
    async with _mcp(tmp_path) as session:
        first = await session.call_tool("eywa_get", {"query": "hello"})
        second = await session.call_tool("eywa_search", {"query": "hello"})
        tools = (await session.list_tools()).tools  # still serving after both errors
    assert first.is_error and second.is_error and tools
    for result in (first, second):
        text = _text(result)
        assert str(db) in text and "is damaged" in text and "macupos memory recover" in text
        assert "Traceback" not in text
