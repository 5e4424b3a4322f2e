"""Structured facts latency: recall/search at 10k and 100k memories, script overhead, snapshot writes.

Run: .venv/bin/python -m bench.facts_latency [--sizes 10000,100000] [--reps 50]
Every store lives in a temporary folder; nothing outside it is touched.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.facts.api import FactsApi

WORDS = "tea coffee helix vim tokyo berlin corgi cat fly deploy rust python jazz piano chess running".split()


def _snapshot(n: int) -> str:
    rng = random.Random(n)
    lines = []
    for i in range(n):
        subject = "user" if i % 10 == 0 else f"s{i % 1000}"
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        lines.append(f"remember m{i:06d} {subject} Fact predicate likes-{a} object {b}-{i} confidence 0.9")
    return "\n".join(lines) + "\n"


async def _timed(fn: Callable[[], Awaitable[Any]], reps: int) -> tuple[float, float]:
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


async def bench(n: int, reps: int) -> list[tuple[str, float, float]]:
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        api = await FactsApi.open(home, home / "memory.db")
        try:
            t = time.perf_counter()
            report = await api.load_snapshot(_snapshot(n), now=datetime(2026, 1, 1, tzinfo=UTC))
            rows.append((f"load {report.added} memories (one transaction)", (time.perf_counter() - t) * 1000, 0.0))
            await api.run_script("set warm 1")  # start the sandbox helper outside the timings

            async def script(text: str) -> None:
                result = await api.run_script(text)
                assert result.ok, result.text

            cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("script: empty (`set x 1`)", lambda: script("set x 1")),
                ("script: recall s42 -limit 20", lambda: script("recall s42 -limit 20")),
                ("script: recall user -limit 20", lambda: script("recall user -limit 20")),
                ("script: search helix tokyo", lambda: script("search helix tokyo")),
                ("script: world (counts by state/type/concepts)", lambda: script("world")),
                ("script: 100 x respond", lambda: script("for {set i 0} {$i < 100} {incr i} {respond x}")),
                ("api.recall('s42', limit=20)", lambda: api.recall("s42", limit=20)),
                ("tiered_injection()", lambda: api.tiered_injection()),
            ]
            for name, fn in cases:
                med, p95 = await _timed(fn, reps)
                rows.append((name, med, p95))
            med, p95 = await _timed(api.write_snapshot, max(3, reps // 10))
            rows.append(("snapshot write (atomic, fsync)", med, p95))
        finally:
            await api.close(snapshot=False)
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    print(f"{'memories':>9} | {'operation':<44} | {'median ms':>9} | {'p95 ms':>8}")
    print(f"{'-' * 9}-+-{'-' * 44}-+-{'-' * 9}-+-{'-' * 8}")
    for n in (int(s) for s in args.sizes.split(",")):
        for name, med, p95 in await bench(n, args.reps):
            print(f"{n:>9} | {name:<44} | {med:>9.2f} | {p95:>8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
