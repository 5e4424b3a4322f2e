"""Ingest throughput (MB/s, no LLM) and peak RSS, each run in a fresh process.

    .venv/bin/python -m bench.ingest_throughput            # the 1.4 MB fixture and a generated 100 MB transcript
    .venv/bin/python -m bench.ingest_throughput --mb 20    # a smaller generated file

Each measurement runs `macupos memory ingest --no-llm` in a child process with a private MACUPOS_HOME
and reads the child's peak RSS from getrusage.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.synth_transcript import write_transcript

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "transcripts" / "episodic_memory" / "long-conversation.jsonl"


def measure(path: Path, home: Path) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one ingest of `path` into a fresh home, in a child process."""
    env = {**os.environ, "MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0", "HOME": str(home)}
    code = (
        "import resource, subprocess, sys, time;"
        "t = time.perf_counter();"
        "r = subprocess.run([sys.executable, '-m', 'macupos', 'memory', 'ingest', sys.argv[1], '--quiet'],"
        " stdout=subprocess.DEVNULL);"
        "d = time.perf_counter() - t;"
        "print(d, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, r.returncode)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    secs, rss, rc = out.stdout.split()[-3:]
    if rc != "0":
        raise SystemExit(f"ingest failed: {out.stderr}")
    return float(secs), float(rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0, help="size of the generated transcript")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.jsonl"
        write_transcript(big, int(args.mb * 1024 * 1024))
        print(f"{'input':40} {'MB':>8} {'seconds':>8} {'MB/s':>8} {'peak RSS MB':>12}")
        for path in (FIXTURE, big):
            size = path.stat().st_size / 1e6
            secs, rss = measure(path, Path(tmp) / f"home-{path.stem}")
            print(f"{path.name:40} {size:8.1f} {secs:8.2f} {size / secs:8.1f} {rss:12.0f}")


if __name__ == "__main__":
    main()
