"""`kill -9` at random points of an ingest leaves a sound database, and re-ingest converges."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(home: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "ANTHROPIC_", "CLAUDE_"))},
        "MACUPOS_HOME": str(home / "data"),
        "CLAUDE_CONFIG_DIR": str(home / "claude"),
        "CODEX_HOME": str(home / "codex"),
        "HOME": str(home),
        "MACUPOS_MEMORY_LLM": "0",
    }


def _ingest(home: Path, src: Path, kill_after: int | None = None) -> int:
    """Run an ingest; with kill_after, SIGKILL it after that many progress events (stored/extracted)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "-v", "memory", "ingest", str(src), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
        cwd=ROOT,
    )
    assert proc.stderr is not None
    events = 0
    for line in proc.stderr:
        if " stored " in line or " extracted " in line:
            events += 1
            if kill_after is not None and events >= kill_after:
                proc.kill()
                break
    proc.stderr.close()
    return proc.wait(timeout=120)


def _snapshot(home: Path) -> dict[str, object]:
    conn = sqlite3.connect(home / "data" / "memory.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        out: dict[str, object] = {
            "sessions": conn.execute(
                "SELECT session_id, kind, parent_id, content_sha, extract_state FROM sessions ORDER BY 1"
            ).fetchall(),
            "handoffs": conn.execute("SELECT session_id, markdown, ts, indexed FROM handoffs ORDER BY 1").fetchall(),
            "postings": conn.execute("SELECT * FROM postings ORDER BY 1, 2, 3, 4").fetchall(),
            "term_df": conn.execute("SELECT * FROM term_df ORDER BY 1, 2").fetchall(),
            "content": conn.execute("SELECT session_id, body FROM content ORDER BY 1").fetchall(),
            "sources": conn.execute("SELECT sha256, session_ids FROM sources ORDER BY 1").fetchall(),
        }
    finally:
        conn.close()
    mirror = home / "data" / "handoffs"
    # A kill between mkstemp and rename can leave a hidden temp file; readers never see it and the next
    # ingest sweeps stale ones.
    out["mirror"] = sorted(
        (str(p.relative_to(mirror)), p.read_text())
        for p in mirror.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    return out


def _corpus(tmp_path: Path, transcripts: Path) -> Path:
    src = tmp_path / "corpus"
    shutil.copytree(transcripts, src)
    base = [json.loads(x) for x in (transcripts / "simonw" / "sample_session.jsonl").read_text().splitlines() if x]
    for n in range(30):  # more files, so kills land between, inside and after file commits
        lines = [dict(x, sessionId=f"gen-{n}") for x in base]
        lines.append(
            {
                "type": "user",
                "sessionId": f"gen-{n}",
                "uuid": f"g{n}",
                "timestamp": "2025-12-25T10:00:00Z",
                "message": {"role": "user", "content": f"generated follow-up {n} about module_{n}.py"},
            }
        )
        (src / f"gen-{n}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return src


@pytest.mark.slow
def test_kill_9_at_random_points_then_reingest_equals_clean_run(tmp_path: Path, transcripts: Path) -> None:
    src = _corpus(tmp_path, transcripts)
    clean = tmp_path / "clean"
    assert _ingest(clean, src) == 0
    expected = _snapshot(clean)
    n_events = len(expected["sources"]) + len(expected["handoffs"])  # type: ignore[arg-type]

    crashed = tmp_path / "crashed"
    rng = random.Random(20261129)
    kills = 0
    for _ in range(6):
        code = _ingest(crashed, src, kill_after=rng.randint(1, max(1, n_events // 3)))
        if code == -9:
            kills += 1
            _snapshot(crashed)  # integrity_check after every kill
    assert kills >= 3
    assert _ingest(crashed, src) == 0
    assert _snapshot(crashed) == expected
