"""Other processes on a memory's files while a long-lived process takes writes: the soak's side of it.

Each round starts one of them beside the write under test, in turn: `macupos memory stats`, `macupos memory
ingest` of a transcript of its own, and a read-only `sqlite3` connection (what a backup job or a curious
owner does). Each of these closes its last connection when it exits: if the long-lived process had lost its
lock on the file, that close would checkpoint and delete the live WAL, and the acknowledged writes with it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.cli_env import MACUPOS, cli_env
from tests.service.conftest import claude_lines

__all__ = ["ROUNDS", "Beside", "database_text", "integrity", "visible_rows"]

ROUNDS = 200  # the count docs/service.md promises
_READER = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True, timeout=30)\n"
    "print(c.execute('SELECT count(*) FROM sessions').fetchone()[0])\n"
    "c.close()\n"
)


def _transcript(session_id: str) -> str:
    turns = [(f"soak {session_id} please", f"soak {session_id} done")]
    return "\n".join(claude_lines(session_id, turns, cwd="/srv/soak")) + "\n"


@dataclass
class Beside:
    """The other processes of a soak, on the memory whose home is ``home`` (its ``memory.db``)."""

    home: Path
    scratch: Path
    ingested: list[str] = field(default_factory=list)
    _running: tuple[str, subprocess.Popen[str]] | None = None

    @property
    def db(self) -> Path:
        return self.home / "memory.db"

    def start(self, round_no: int) -> None:
        """Start round ``round_no``'s process (it runs while the caller makes its write)."""
        env = cli_env(self.home, HOME=str(self.scratch))
        kind = ("stats", "ingest", "sqlite3")[round_no % 3]
        if kind == "stats":
            argv = [str(MACUPOS), "memory", "stats", "--json"]
        elif kind == "ingest":
            session_id = f"cli-{round_no:04d}"
            path = self.scratch / f"{session_id}.jsonl"
            path.write_text(_transcript(session_id), encoding="utf-8")
            argv = [str(MACUPOS), "memory", "ingest", str(path)]
            self.ingested.append(session_id)
        else:
            argv = [sys.executable, "-c", _READER, str(self.db)]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._running = (kind, proc)

    def finish(self) -> None:
        """Wait for the round's process; AssertionError when it failed."""
        assert self._running is not None
        kind, proc = self._running
        self._running = None
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{kind} beside the soak failed ({proc.returncode}): {err or out}"


def visible_rows(db: Path, sql: str) -> set[str]:
    """The first column of ``sql``'s rows, read by a fresh read-only connection (as any other process)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return {str(row[0]) for row in conn.execute(sql)}
    finally:
        conn.close()


def integrity(db: Path) -> str:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


def database_text(db: Path) -> str:
    """Everything ``db`` holds, as SQL text, read through SQLite: a test that looks for a string in a
    database its own process holds open must not read the file's bytes (closing that descriptor would drop
    the process's locks on it)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()
