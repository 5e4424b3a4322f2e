"""Throughput of memory.redact.redactor.Redactor on typical transcript text (the test fixtures, line by line).

Run: .venv/bin/python -m bench.redact_speed [--repeat N] [--root DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from memory.redact.redactor import Redactor

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "transcripts"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", type=Path, default=FIXTURES)
    args = parser.parse_args()
    lines: list[str] = []
    for path in sorted(args.root.rglob("*.json*")):
        lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    size = sum(len(line.encode()) for line in lines)
    redactor = Redactor(["owner-secret-value-1", "another-owner-secret"])
    best = float("inf")
    changed = 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        changed = sum(1 for line in lines if redactor(line) != line)
        best = min(best, time.perf_counter() - start)
    print(f"{len(lines)} lines, {size / 1e6:.2f} MB, {changed} lines changed")
    print(f"best of {args.repeat}: {best * 1000:.1f} ms = {size / 1e6 / best:.1f} MB/s")


if __name__ == "__main__":
    main()
