"""Handoff import, export and re-ingest at scale: seconds and peak RSS, each run in a fresh process.

    .venv/bin/python -m bench.import_throughput                       # 10k handoffs; baseline on 1,000
    .venv/bin/python -m bench.import_throughput --n 100000 --only import --baseline-n 0
    .venv/bin/python -m bench.import_throughput --only hostile        # a hostile tree: RSS and outcome

Rows:

- ``import`` — ``macupos memory import TREE`` of ``--n`` eywa-mcp handoff files (bench/_handoff_tree.py)
  into a fresh home: batches of 256 in one transaction, one fsync per folder a batch.
- ``import 1-by-1`` / ``import bulk`` — the one-at-a-time path (``import_dir(batch_files=1, workers=0)``:
  a transaction, a file fsync and a folder fsync per handoff, as import worked before) beside the bulk
  path (batches of 256, one worker process) on the same ``--baseline-n`` files, alternating.
- ``import old`` — with ``--old-src DIR`` (a checkout of an earlier version, e.g. ``git archive <commit> |
  tar -x -C DIR``), ``macupos memory import`` of that code on the same ``--baseline-n`` files, alternating
  with this code's CLI: the speed-up over the code as it was.
- ``old`` — with ``--old-src DIR``, this code's and that code's ``macupos memory import`` of the same ``--n``
  files, alternating for ``--rounds`` rounds.
- ``export`` — ``macupos memory export`` of the imported handoffs to a fresh folder.
- ``ingest`` / ``ingest --force`` — ``macupos memory ingest --no-llm`` of ``--transcripts`` small
  Claude Code transcripts (six lines, ~3 KB each), then again with ``--force``.
- ``hostile`` — a tree of alias bombs, deep nesting, tags, a 100 MB file, symlinks out of the tree and
  good files: what was imported and rejected, in what time and peak RSS.

Peak RSS is the child's VmHWM (its own high-water mark; ru_maxrss would carry the parent's over); a worker
process's peak is noted beside it. CPU is user + system seconds of the command and its worker: on this
shared VM wall times move with other jobs' load, CPU seconds much less. Before each command the bench
times creating 1,000 small files beside its home ("a file created in N us"): on this VM's disk that cost
moves 5x with how many files were deleted in the last minutes, and the import's mirror creates one file
a handoff, so compare runs with like costs. This tree and ``--old-src`` are byte-compiled first (the
environment may forbid writing .pyc files, and compiling at each start would weigh on one side).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from bench._handoff_tree import write_hostile_tree, write_tree

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child: one memory command (argv) or one import_dir call (JSON), then its own peak RSS.
_CHILD = """
import asyncio, json, re, sys, time
spec = json.loads(sys.argv[1])
t = time.perf_counter()
out = ""
if spec.get("batch_files"):
    from pathlib import Path
    from memory.facade import Eywa
    from memory.settings import MemorySettings
    async def run():
        import os
        async with await Eywa.open(MemorySettings.from_env(os.environ)) as eywa:
            r = await eywa.import_dir(Path(spec["tree"]), batch_files=spec["batch_files"], workers=spec["workers"])
            return f"imported {r.imported} rejected {len(r.rejected)}"
    out = asyncio.run(run())
else:
    from macupos.cli import main
    try:
        main(["memory", *spec["argv"]])
    except SystemExit as e:
        assert not e.code, e.code
secs = time.perf_counter() - t
hwm = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
import os, resource
cpu = sum(os.times()[:4])  # user and system time of this process and of its (waited-for) worker
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"secs": secs, "rss_mb": hwm, "worker_mb": worker, "cpu": cpu, "out": out}))
"""


def _create_cost_us(beside: Path, n: int = 1000) -> float:
    """Microseconds to create one small file in ``folder``, just now. On an ext4 without a journal (this VM's
    disk) a new inode skips every one freed in the last one to six minutes, one by one, so creating a file
    costs 5x more after a mass deletion (an earlier run's cleanup); an import creates one a handoff. The
    files are left for the bench's own cleanup: deleting them here would slow the run that follows."""
    beside.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="probe-", dir=beside))
    started = time.perf_counter()
    for i in range(n):
        (folder / f"f{i}.md").write_bytes(b"x" * 1100)
    return 1e6 * (time.perf_counter() - started) / n


def _run(home: Path, spec: Mapping[str, object], src: Path = ROOT) -> tuple[float, float, str]:
    """Seconds, peak RSS in MB (this process; its worker's, when larger, noted in the output) and output."""
    probe = _create_cost_us(home.parent)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MACUPOS_")},
        "MACUPOS_HOME": str(home),
        "HOME": str(home),
        "MACUPOS_MEMORY_LLM": "0",
        "PYTHONPATH": str(src),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(spec)], env=env, cwd=src, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{spec} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out = str(result["out"] or done.stdout.splitlines()[0])
    out += f"; CPU {result['cpu']:.1f} s; a file created in {probe:.0f} us"
    if result["worker_mb"] > 1:
        out += f"; worker RSS {result['worker_mb']:.0f} MB"
    return float(result["secs"]), float(result["rss_mb"]), out


def _compile(*trees: Path) -> None:
    """Byte-compile the code each side runs, once: with PYTHONDONTWRITEBYTECODE set (as here) a tree without
    current .pyc files is compiled again at every start of the command and of its worker, which an
    ``--old-src`` copy fresh from ``git archive`` always was (0.3 s a start)."""
    for tree in trees:
        names = ("bot", "memory", "relay", "service", "bench")
        folders = [str(tree / name) for name in names if (tree / name).is_dir()]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True, stdout=subprocess.DEVNULL)


def _row(name: str, n: int, secs: float, rss: float, note: str = "") -> None:
    print(f"{name:18} {n:>8} {secs:9.2f} {n / secs:10.0f} {1000 * secs / n:8.3f} {rss:9.0f}  {note}", flush=True)


def _transcripts(folder: Path, n: int) -> None:
    """``n`` small Claude Code sessions: a request, an answer with a tool call, its result, a closing line."""
    folder.mkdir(parents=True)
    for i in range(n):
        sid = f"small-{i:06d}"
        stamp = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00Z"
        base = {"sessionId": sid, "timestamp": stamp, "cwd": f"/srv/project-{i % 40}", "version": "2.1.3"}
        lines = [
            {"type": "user", "uuid": "u1", "message": {"role": "user", "content": f"fix the flaky test {i} in ingest"}},
            {
                "type": "assistant",
                "uuid": "a1",
                "parentUuid": "u1",
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {"type": "text", "text": f"Looking at tests/test_ingest_{i % 97}.py for the race first."},
                        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": f"/srv/m{i}.py"}},
                    ],
                },
            },
            {
                "type": "user",
                "uuid": "r1",
                "parentUuid": "a1",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "def f():\n    pass\n" * 40}],
                },
            },
            {
                "type": "assistant",
                "uuid": "a2",
                "parentUuid": "r1",
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": f"The test waited on a sleep; it now waits on the file {i}."}],
                },
            },
        ]
        (folder / f"{sid}.jsonl").write_text("".join(json.dumps({**base, **x}) + "\n" for x in lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="handoff files to import and export")
    ap.add_argument("--baseline-n", type=int, default=1_000, help="files for one-at-a-time vs bulk (0: skip)")
    ap.add_argument("--transcripts", type=int, default=10_000, help="small transcripts to ingest (0: skip)")
    ap.add_argument("--only", choices=["import", "baseline", "old", "export", "ingest", "hostile"], action="append")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of --only old")
    ap.add_argument("--tmp", type=Path, default=None, help="where to build the trees (default: the system temp)")
    ap.add_argument("--old-src", type=Path, default=None, help="an earlier checkout to compare the CLI with")
    args = ap.parse_args()
    only = set(args.only or ["import", "baseline", "export", "ingest"])
    _compile(ROOT, *([args.old_src.resolve()] if args.old_src is not None else []))
    if "export" in only:
        only.add("import")
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp_name:
        tmp = Path(tmp_name)
        print(f"{'run':18} {'files':>8} {'seconds':>9} {'files/s':>10} {'ms/file':>8} {'RSS MB':>9}", flush=True)
        if "import" in only:
            started = time.perf_counter()
            write_tree(tmp / "tree", args.n)
            print(f"(wrote {args.n} handoff files in {time.perf_counter() - started:.1f} s)", flush=True)
            secs, rss, out = _run(tmp / "home", {"argv": ["import", str(tmp / "tree")]})
            _row("import", args.n, secs, rss, out)
            if "export" in only:
                secs, rss, out = _run(tmp / "home", {"argv": ["export", str(tmp / "export")]})
                _row("export", args.n, secs, rss, out)
        if "baseline" in only and args.baseline_n:
            write_tree(tmp / "small-tree", args.baseline_n, seed=12)
            pairs: list[tuple[float, float]] = []
            for rnd in range(2):  # alternating, so both see the same machine
                one, rss1, out1 = _run(
                    tmp / f"one-{rnd}", {"tree": str(tmp / "small-tree"), "batch_files": 1, "workers": 0}
                )
                bulk, rss2, out2 = _run(
                    tmp / f"bulk-{rnd}", {"tree": str(tmp / "small-tree"), "batch_files": 256, "workers": 1}
                )
                _row("import 1-by-1", args.baseline_n, one, rss1, out1)
                _row("import bulk", args.baseline_n, bulk, rss2, f"{out2}; {one / bulk:.1f}x faster")
                pairs.append((one, bulk))
            ratios = sorted(one / bulk for one, bulk in pairs)
            print(f"(bulk vs one-at-a-time: {ratios[0]:.1f}x-{ratios[-1]:.1f}x)", flush=True)
            if args.old_src is not None:
                argv = {"argv": ["import", str(tmp / "small-tree")]}
                for rnd in range(2):
                    old, rss1, out1 = _run(tmp / f"old-{rnd}", argv, src=args.old_src.resolve())
                    new, rss2, out2 = _run(tmp / f"new-{rnd}", argv)
                    _row("import old", args.baseline_n, old, rss1, out1)
                    _row("import now", args.baseline_n, new, rss2, f"{out2}; {old / new:.1f}x faster")
        if "old" in only:
            if args.old_src is None:
                ap.error("--only old needs --old-src DIR")
            write_tree(tmp / "old-tree", args.n, seed=13)
            spec = {"argv": ["import", str(tmp / "old-tree")]}
            for rnd in range(args.rounds):  # alternating, so both see the same machine
                old, rss1, out1 = _run(tmp / f"old-full-{rnd}", spec, src=args.old_src.resolve())
                new, rss2, out2 = _run(tmp / f"new-full-{rnd}", spec)
                _row("import old", args.n, old, rss1, out1)
                _row("import now", args.n, new, rss2, f"{out2}; {old / new:.2f}x faster")
        if "ingest" in only and args.transcripts:
            _transcripts(tmp / "transcripts", args.transcripts)
            for name, extra in (("ingest", []), ("ingest --force", ["--force"])):
                cmd = ["ingest", str(tmp / "transcripts"), "--no-llm", "--quiet", *extra]
                secs, rss, out = _run(tmp / "home-ingest", {"argv": cmd})
                _row(name, args.transcripts, secs, rss, out)
        if "hostile" in only:
            n_files = write_hostile_tree(tmp / "hostile", good=200, outside=tmp / "outside")
            secs, rss, out = _run(
                tmp / "home-hostile", {"tree": str(tmp / "hostile"), "batch_files": 256, "workers": 1}
            )
            _row("hostile", n_files, secs, rss, out)


if __name__ == "__main__":
    main()
