"""How long Claude Code's SessionStart hook holds a session's start when the memory service is unreachable.

Two kinds of unreachable on 127.0.0.1: a port where nothing listens (refused at once) and a blackhole (a
socket that listens but never accepts or answers: the connection is made, no byte comes back). Measured:

- in process: `run_session_start` (the hook's own work, imports already done), N runs each;
- the whole hook command (`python -m macupos memory hook session-start`, interpreter start-up and imports
  included), beside the same command with local memory and no database (the baseline every hook pays).

Run: .venv/bin/python -m bench.hook_fail_open [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory.hooks import run_session_start
from memory.settings import MemorySettings

KEY = "mpk_000000000000_" + "x" * 43
PAYLOAD = {"session_id": "bench", "cwd": "/srv/app", "hook_event_name": "SessionStart", "source": "startup"}


@contextmanager
def unreachable(kind: str) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        if kind == "blackhole":
            sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def settings(home: Path, url: str) -> MemorySettings:
    return MemorySettings(
        home=home,
        claude_config_dir=home / "claude",
        codex_home=home / "codex",
        memory_url=url,
        api_key=KEY if url else "",
    )


def in_process(home: Path, url: str, runs: int) -> list[float]:
    async def main() -> list[float]:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            out = await run_session_start(settings(home, url), PAYLOAD)
            times.append(time.perf_counter() - started)
            assert out == ""
        return times

    return asyncio.run(main())


def command(home: Path, url: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_"))}
    env |= {"MACUPOS_HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "claude"), "CODEX_HOME": str(home / "codex")}
    if url:
        env |= {"MACUPOS_MEMORY_URL": url, "MACUPOS_API_KEY": KEY}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "macupos", "memory", "hook", "session-start"],
        input=json.dumps(PAYLOAD),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    return elapsed


def summary(times: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        in_process(home, "http://127.0.0.1:9", 1)  # imports once: a hook process pays them in its start-up
        with unreachable("nothing-listens") as refused, unreachable("blackhole") as hole:
            results["in-process, nothing-listens"] = summary(in_process(home, refused, args.runs))
            results["in-process, blackhole"] = summary(in_process(home, hole, args.runs))
            # The commands side by side, run after run, so a change in the machine's load hits all three.
            urls = {"local memory, no database (baseline)": "", "nothing-listens": refused, "blackhole": hole}
            times: dict[str, list[float]] = {name: [] for name in urls}
            for _ in range(args.runs):
                for name, url in urls.items():
                    times[name].append(command(home, url))
            for name, measured in times.items():
                results[f"hook command, {name}"] = summary(measured)
            base = statistics.median(times["local memory, no database (baseline)"])
            for name in ("nothing-listens", "blackhole"):
                extra = [t - b for t, b in zip(times[name], times["local memory, no database (baseline)"], strict=True)]
                results[f"hook command, {name}, over the baseline"] = summary(extra)
            results["baseline_median_s"] = round(base, 3)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"load average {results.pop('load_average'):.1f}; baseline median {results.pop('baseline_median_s'):.3f} s")
    for name, figures in results.items():
        print(f"{name:55} median {figures['median_s']:.3f} s  max {figures['max_s']:.3f} s")


if __name__ == "__main__":
    main()
