"""SIGKILL at 20 random points of `memory ingest` and of `memory import`: the database passes integrity_check
after every kill, and a re-run afterwards leaves exactly what a clean run does (rows, postings, mirror files).

Kill points are drawn from a seeded RNG over the measured duration of a clean run's work (from the
command's first log line, when its event loop starts, to its exit); the seed is in every failure message.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from relay.process import kill_marked, marked_pids
from tests.cli_env import CLI, cli_env

ROOT = Path(__file__).resolve().parents[2]
KILLS = 20  # the count docs/decisions.md promises for each command
SEED = 20261129


_TAG = "MACUPOS_TEST_RUN"  # marks every process of one run, children included, for the orphan scan


def _env(home: Path, tag: str) -> dict[str, str]:
    return cli_env(home / "data", home=home, **{_TAG: tag})


@dataclass(frozen=True, slots=True)
class _Outcome:
    code: int
    work_s: float  # from the first log line to the exit
    orphans: tuple[int, ...] = ()  # processes of the run still alive 10 s after it ended

    @property
    def killed(self) -> bool:
        return self.code == -9


def _macupos(home: Path, *args: str, kill_after_s: float | None = None) -> _Outcome:
    """Run ``macupos -vv ARGS``; with ``kill_after_s``, SIGKILL it that long after its first log line.

    At -vv the first line on stderr is asyncio's, written as the command's event loop starts: the imports
    are behind it, the database work ahead. A thread drains stderr so the pipe never stalls the command.
    """
    tag = uuid.uuid4().hex
    proc = subprocess.Popen(
        [*CLI, "-vv", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(home, tag),
        cwd=ROOT,
    )
    assert proc.stderr is not None
    first_line = threading.Event()

    def drain(stream: IO[bytes]) -> None:
        for _ in stream:
            first_line.set()
        first_line.set()  # (no output at all: the run is over)

    reader = threading.Thread(target=drain, args=(proc.stderr,), daemon=True)
    reader.start()
    timer: threading.Timer | None = None
    try:
        assert first_line.wait(120), "no log line in 120 s"
        started = time.monotonic()
        if kill_after_s is not None:
            timer = threading.Timer(kill_after_s, proc.kill)  # SIGKILL: no cleanup of any kind
            timer.start()
        code = proc.wait(timeout=300)
        work_s = time.monotonic() - started
    finally:
        if timer is not None:
            timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Whatever the run started must end with it (a worker process, say); then stderr closes too.
    orphans = _wait_gone(tag, 10.0)
    kill_marked(_TAG, tag)
    reader.join(30)
    return _Outcome(code, work_s, tuple(orphans))


def _wait_gone(tag: str, bound_s: float) -> list[int]:
    """The run's processes still alive after ``bound_s`` (a bounded wait on /proc, checked every 50 ms)."""
    deadline = time.monotonic() + bound_s
    while (alive := [pid for pid in marked_pids(_TAG, tag) if not _zombie(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


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
    # run sweeps stale ones.
    out["mirror"] = sorted(
        (str(p.relative_to(mirror)), p.read_text())
        for p in mirror.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    return out


def _integrity(home: Path) -> str:
    db = home / "data" / "memory.db"
    if not db.exists():
        return "ok"  # killed before the database was created: nothing to damage
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _kill_loop(home: Path, args: tuple[str, ...], work_s: float, seed: int) -> list[float]:
    """Run ``args`` again and again on ``home``, each SIGKILLed at a random point of its work, until KILLS
    kills; integrity_check after each. Returns the kill points (seconds after the first log line)."""
    rng = random.Random(seed)
    points: list[float] = []
    attempts = 0
    while len(points) < KILLS:
        attempts += 1
        assert attempts <= 2 * KILLS, f"seed {seed}: only {len(points)} of {attempts - 1} runs were killed"
        at = rng.uniform(0.0, work_s)
        outcome = _macupos(home, *args, kill_after_s=at)
        assert outcome.orphans == (), f"seed {seed}: processes {outcome.orphans} outlived a kill {at:.3f} s in"
        if not outcome.killed:
            assert outcome.code == 0, f"seed {seed}: {args} exited {outcome.code}"
            continue  # it finished before the drawn point: the next run draws again
        points.append(at)
        check = _integrity(home)
        assert check == "ok", f"seed {seed}: integrity_check after a kill {at:.3f} s into the work: {check}"
    return points


# -- ingest -----------------------------------------------------------------------------------------


def _transcripts(tmp_path: Path, transcripts: Path) -> Path:
    src = tmp_path / "corpus"
    shutil.copytree(transcripts, src)
    base = [json.loads(x) for x in (transcripts / "simonw" / "sample_session.jsonl").read_text().splitlines() if x]
    for n in range(12):  # more files, so kills land between, inside and after file commits
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
def test_ingest_killed_at_20_random_points_stays_sound_and_a_rerun_equals_a_clean_run(
    tmp_path: Path, transcripts: Path
) -> None:
    src = _transcripts(tmp_path, transcripts)
    clean = tmp_path / "clean"
    first = _macupos(clean, "memory", "ingest", str(src), "--quiet")
    assert first.code == 0
    expected = _snapshot(clean)

    crashed = tmp_path / "crashed"
    # --force: every run re-reads every file, so each has the whole work to be killed in (the first run of
    # the loop is an initial ingest like the clean one, the later ones overwrite what is there).
    points = _kill_loop(crashed, ("memory", "ingest", str(src), "--quiet", "--force"), first.work_s, SEED)
    assert len(points) == KILLS

    assert _macupos(crashed, "memory", "ingest", str(src), "--quiet").code == 0
    assert _snapshot(crashed) == expected, f"seed {SEED}, kill points {[round(p, 3) for p in points]}"


# -- import -----------------------------------------------------------------------------------------

_HANDOFF = """---
date: '2025-03-{day:02d}T{hour:02d}:00:00+00:00'
duration_min: {minutes}.0
headline: {headline}
keywords:
- {keyword}
- crash-loop
kind: main
model: ''
parent_id: ''
projects:
- {project}
session_id: {session_id}
source: llm
substance: 2
---

# {headline}

## What happened

- Reworked {keyword} in the {project} service and ran its tests.
- Session {n} noted that the {keyword} cache needs a bound.

## Key files

- src/{keyword}/main.py

## Open threads

- Follow up on {keyword} retries
"""


def _handoff_tree(root: Path, n: int) -> Path:
    """``n`` handoff files in the export layout: enough for several import batches (256 files each)."""
    words = ["billing", "ingest", "voice", "relay", "search", "sync", "export", "auth"]
    for i in range(n):
        day, hour = 1 + i % 28, i % 24
        keyword = f"{words[i % len(words)]}-{i % 37}"
        text = _HANDOFF.format(
            day=day,
            hour=hour,
            minutes=5 + i % 90,
            headline=f"Session {i} on {keyword}",
            keyword=keyword,
            project=f"project-{i % 5}",
            session_id=f"imported-{i:04d}",
            n=i,
        )
        path = root / "2025" / "03" / f"{day:02d}" / f"imported-{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.slow
def test_import_killed_at_20_random_points_stays_sound_and_a_rerun_equals_a_clean_run(tmp_path: Path) -> None:
    tree = _handoff_tree(tmp_path / "tree", 400)
    clean = tmp_path / "clean"
    first = _macupos(clean, "memory", "import", str(tree))
    assert first.code == 0
    expected = _snapshot(clean)
    assert len(expected["handoffs"]) == 400  # type: ignore[arg-type]

    crashed = tmp_path / "crashed"
    points = _kill_loop(crashed, ("memory", "import", str(tree)), first.work_s, SEED + 1)
    assert len(points) == KILLS

    assert _macupos(crashed, "memory", "import", str(tree)).code == 0
    assert _snapshot(crashed) == expected, f"seed {SEED + 1}, kill points {[round(p, 3) for p in points]}"
