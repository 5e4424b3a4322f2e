"""Parallel agents (``@branch``): message → first model request on a 10,000-file repository, and the bot's CPU
between events with 4 sessions running.

Both run the whole bot (``bot.app.BotApp``) under the real python-telegram-bot against the Bot API double, with
the real Claude Code CLI against a zero-latency Anthropic double (tests/bot/app_harness.py), in a project that
is a git repository of ``--folders`` × ``--files`` small files committed once.

- ``new_branch``: ``@bench-<i> say ok`` for a branch the bot has never seen: time from the push of the update to
  the arrival at the Claude double of the request carrying the instruction, worktree creation (a checkout of
  the 10,000 files) included (target p50 ≤ 1 s). Also the first request of any kind, when the CLI sends one
  before the instruction's.
- ``worktree_alone``: ``relay.worktrees.ensure_worktree`` by itself on the same repository and disk, creating a
  worktree (the checkout) and reusing an existing one.
- ``existing_worktree``: ``@pre-<i> say ok`` for a branch whose worktree exists (made by ``worktree_alone``):
  a fresh session on an existing worktree, i.e. everything but the checkout (mostly the CLI's start).
- ``cli_alone``: the bundled CLI by itself (``claude -p``: no bot, no SDK), exec → first request, in a 10,000-file
  worktree and in a one-file repository: the part of the figures above that is the CLI's own start.
- ``cpu``: the CPU of this process (it hosts BotApp and the two doubles; the CLIs are child processes and are
  not counted) over ``--window`` seconds in which nothing happens, as % of one core: with 0 sessions, with 4
  ``@`` sessions whose requests are held at the double (target ≤ 10 %), and with those 4 sessions answered but
  still live (waiting for a follow-up). The bot runs with the production timings (``Tuning()``). Then all 4
  must have answered.

The repository's filesystem is reported (``df``): creating a worktree is writing its files, so the disk
dominates. The repo is built under ``--repo-dir`` (default: the system's temp folder) and removed after.

Run: .venv/bin/python -m bench.parallel_branches [--rounds 10] [--window 20] [--repo-dir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._harness import emit
from bot.app import BotApp
from bot.services import Tuning
from relay.claude_options import claude_cli_path
from relay.worktrees import WORKTREES, ensure_worktree
from tests.bot.app_harness import FAST, OWNER, Harness, harness
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}
FILE_BYTES = 300
PADDING = "x = 1  # padding\n"


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), **GIT_ENV}
    run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {run.stderr.strip()}")
    return run.stdout


def make_repo(repo: Path, folders: int, files: int) -> dict[str, Any]:
    """A git repository (branch main) of folders × files small text files, committed once."""
    started = time.perf_counter()
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    for d in range(folders):
        folder = repo / f"pkg{d:03d}"
        folder.mkdir()
        for f in range(files):
            line = f"# module {d}/{f}: generated for the parallel-branches benchmark\n"
            text = line + PADDING * ((FILE_BYTES - len(line)) // len(PADDING))
            (folder / f"mod{f:03d}.py").write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "10k files")
    count = int(git(repo, "ls-files", "-z").count("\0"))
    return {"files": count, "build_s": round(time.perf_counter() - started, 1)}


def filesystem(path: Path) -> dict[str, str]:
    """Device, type and mount point of the filesystem holding path (``df``; ``stat -f`` as a fallback)."""
    run = subprocess.run(["df", "-PT", str(path)], capture_output=True, text=True, timeout=30, check=False)
    lines = run.stdout.splitlines()
    if run.returncode == 0 and len(lines) >= 2:
        cols = lines[1].split()
        return {"path": str(path), "device": cols[0], "type": cols[1], "mount": cols[-1]}
    run = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, timeout=30, check=False)
    return {"path": str(path), "type": run.stdout.strip() or "unknown"}


def summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(p95, 1),
        "min_ms": round(ordered[0], 1),
        "max_ms": round(ordered[-1], 1),
    }


def time_worktrees(repo: Path, branches: list[str]) -> dict[str, Any]:
    """ensure_worktree alone: create each branch's worktree, then reuse it."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **GIT_ENV}
    created: list[float] = []
    reused: list[float] = []
    for branch in branches:
        started = time.perf_counter()
        tree = ensure_worktree(repo, branch, env=env)
        created.append((time.perf_counter() - started) * 1000)
        assert tree.created, branch
    for branch in branches:
        started = time.perf_counter()
        tree = ensure_worktree(repo, branch, env=env)
        reused.append((time.perf_counter() - started) * 1000)
        assert not tree.created, branch
    return {"create": summary(created), "reuse": summary(reused)}


@dataclass
class Arrivals:
    """The Claude double's responder: answers "done: <instruction>" and notes when each request arrived (for
    a held request: when it was let go)."""

    log: list[tuple[float, str]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self, body: dict[str, Any]) -> str:
        text = last_user_text(body).strip()
        self.log.append((time.perf_counter(), text))
        self.changed.set()
        return "done: " + (text.splitlines()[-1] if text else "")

    async def first(self, since: int, predicate: Callable[[str], bool], timeout: float = 120.0) -> float:  # noqa: ASYNC109
        async def wait() -> float:
            while True:
                for at, text in self.log[since:]:
                    if predicate(text):
                        return at
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(wait(), timeout)


async def settled(h: Harness, app: BotApp) -> None:
    """Every run's bookkeeping done and every live session closed (its handoff posted)."""
    await h.wait_handled(app)
    sessions = app.sessions
    assert sessions is not None

    def quiet() -> bool:
        return all(c.live is None and (c.closing is None or c.closing.done()) for c in sessions.lanes(OWNER))

    deadline = time.monotonic() + 60
    while not quiet():
        if time.monotonic() > deadline:
            raise TimeoutError("live sessions did not close")
        await asyncio.sleep(0.05)


async def one_round(h: Harness, app: BotApp, arrivals: Arrivals, branch: str) -> tuple[float, float]:
    """(ms to the first request, ms to the instruction's request) of ``@branch say ok <branch>``."""
    marker = f"say ok {branch}"
    since = len(arrivals.log)
    started = time.perf_counter()
    h.tg.push_message(OWNER, OWNER, f"@{branch} {marker}")
    first = await arrivals.first(since, lambda _t: True)
    instruction = await arrivals.first(since, lambda t: marker in t)
    await h.wait_text(lambda t: f"done: {marker}" in t, timeout=120)
    await settled(h, app)
    return (first - started) * 1000, (instruction - started) * 1000


async def cli_alone(h: Harness, arrivals: Arrivals, folder: Path, runs: int) -> dict[str, Any]:
    """The bundled Claude Code CLI by itself (``claude -p``, no bot, no SDK) in folder: exec → first request."""
    cli = claude_cli_path(h.env)
    samples: list[float] = []
    for i in range(runs):
        marker = f"say ok cli-{folder.name}-{i}"
        since = len(arrivals.log)
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            str(cli),
            "-p",
            marker,
            "--setting-sources",
            "",
            "--output-format",
            "json",
            cwd=folder,
            env=h.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        samples.append((await arrivals.first(since, lambda t, m=marker: m in t) - started) * 1000)
        await asyncio.wait_for(proc.wait(), 120)
    return summary(samples)


async def latency(h: Harness, rounds: int) -> dict[str, Any]:
    arrivals = Arrivals()
    h.claude.default = arrivals
    app = await h.start(tuning=FAST)
    await one_round(h, app, arrivals, "warm-up")  # the first CLI start of the process and .macupos/ made
    new_first: list[float] = []
    new_instr: list[float] = []
    old_first: list[float] = []
    old_instr: list[float] = []
    for i in range(rounds):  # interleaved, so drift (page cache, disk) hits both alike
        first, instr = await one_round(h, app, arrivals, f"bench-{i}")
        new_first.append(first)
        new_instr.append(instr)
        first, instr = await one_round(h, app, arrivals, f"pre-{i}")
        old_first.append(first)
        old_instr.append(instr)
    await app.stop()
    h.apps.remove(app)
    tiny = h.tmp / "tiny"
    tiny.mkdir()
    await asyncio.to_thread(git, tiny, "init", "-q", "-b", "main")
    (tiny / "app.py").write_text("print('hello')\n", encoding="utf-8")
    await asyncio.to_thread(git, tiny, "add", "-A")
    await asyncio.to_thread(git, tiny, "commit", "-q", "-m", "one file")
    runs = min(rounds, 5)
    return {
        "new_branch": {
            **summary(new_instr),
            "samples_ms": [round(x) for x in new_instr],
            "first_request": summary(new_first),
            "target_p50_ms": 1000,
        },
        "existing_worktree": {
            **summary(old_instr),
            "samples_ms": [round(x) for x in old_instr],
            "first_request": summary(old_first),
        },
        "cli_alone": {
            "branch_worktree": await cli_alone(h, arrivals, h.project / WORKTREES / "pre-0", runs),
            "repo_of_1_file": await cli_alone(h, arrivals, tiny, runs),
        },
    }


def cpu_now() -> tuple[float, float, float]:
    """(wall, this process's user+system CPU, the event loop thread's CPU), in seconds; children excluded."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), usage.ru_utime + usage.ru_stime, time.thread_time()


async def cpu_window(h: Harness, seconds: float) -> dict[str, Any]:
    calls = len(h.tg.requests)
    requests = h.claude.arrivals
    wall0, cpu0, loop0 = cpu_now()
    await asyncio.sleep(seconds)
    wall1, cpu1, loop1 = cpu_now()
    methods = Counter(c.method for c in h.tg.requests[calls:])
    return {
        "seconds": round(wall1 - wall0, 1),
        "cpu_pct_of_one_core": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 2),
        "loop_thread_pct": round(100 * (loop1 - loop0) / (wall1 - wall0), 2),
        "telegram_calls": dict(methods),
        "claude_requests": h.claude.arrivals - requests,
    }


async def cpu(h: Harness, window: float, sessions: int = 4) -> dict[str, Any]:
    arrivals = Arrivals()
    h.claude.default = arrivals
    h.claude.release.clear()
    app = await h.start(tuning=Tuning())  # the production timings: heartbeat, long poll, idle sessions
    await asyncio.sleep(3)  # startup done
    idle = await cpu_window(h, window)
    h.claude.hold = sessions
    before = h.claude.arrivals
    for k in range(sessions):
        h.tg.push_message(OWNER, OWNER, f"@cpu-{k} say ok cpu-{k}")
    deadline = time.monotonic() + 180
    while h.claude.arrivals - before < sessions or h.claude.hold > 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {h.claude.arrivals - before} of {sessions} requests arrived")
        await asyncio.sleep(0.05)
    held = [last_user_text(b).strip().splitlines()[-1] for b in h.claude.arrived[-sessions:]]
    await asyncio.sleep(2)  # the progress cards are out
    running = await cpu_window(h, window)
    h.claude.release.set()
    for k in range(sessions):
        await h.wait_text(lambda t, k=k: f"done: say ok cpu-{k}" in t, timeout=120)
    await h.wait_handled(app)
    await asyncio.sleep(2)
    live = await cpu_window(h, window)
    answered = sum(any(f"done: say ok cpu-{k}" in t for t in h.texts()) for k in range(sessions))
    return {
        "no_sessions": idle,
        f"{sessions}_sessions_held": {**running, "held_requests": held, "target_pct": 10},
        f"{sessions}_sessions_answered_live": live,
        "answered": f"{answered}/{sessions}",
    }


async def run_bot(tmp: Path, rounds: int, window: float) -> dict[str, Any]:
    async with TelegramDouble() as tg, harness(tmp, tg) as h:
        found = await latency(h, rounds)
        found["cpu"] = await cpu(h, window)
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--window", type=float, default=20.0, help="seconds of each CPU window")
    parser.add_argument("--folders", type=int, default=100)
    parser.add_argument("--files", type=int, default=100, help="files per folder")
    parser.add_argument("--repo-dir", type=Path, help="where the repository is made (default: a temp folder)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.repo_dir is not None:
        args.repo_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="macupos-bench-", dir=args.repo_dir))
    try:
        repo = tmp / "billing"  # the harness's project folder
        made = make_repo(repo, args.folders, args.files)
        result: dict[str, Any] = {
            "repo": {**made, "filesystem": filesystem(repo), "cores": os.cpu_count(), "load_avg": os.getloadavg()},
            "worktree_alone": time_worktrees(repo, [f"pre-{i}" for i in range(args.rounds)]),
        }
        result.update(asyncio.run(run_bot(tmp, args.rounds, args.window)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    emit(result, args.json, ensure_ascii=False)


if __name__ == "__main__":
    main()
