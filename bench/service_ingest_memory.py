"""A big transcript upload's cost to the server: its memory, and the stall another tenant sees meanwhile.

Real `macupos serve` processes on 127.0.0.1 (no rate limit), this tree's and, with ``--old-src DIR`` (e.g.
``git archive HEAD memory bot relay bench service | tar -x -C DIR``), that code's, side by side on the
same synthetic transcript (bench/synth_transcript.py). Each phase starts a fresh server on the same home,
so its growth is measured from that server's own resting RSS (sampled every 5 ms from /proc/PID/status),
and also with every process under it counted (an upload's ingest runs in a child process of its own):

- ``one``: one ~45 MB upload to one tenant; peak RSS growth, and the upload's seconds;
- ``again``: the unchanged file again under a new name (the same tenant);
- ``three``: three ~45 MB uploads to three tenants at once; a 503 is retried after its Retry-After.

All the while a neighbour tenant's `/v1/get` runs back to back: p50 / p95 / max milliseconds.

Run: .venv/bin/python -m bench.service_ingest_memory [--mb 45] [--old-src DIR] [--new-src DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from bench._harness import wait_serving
from bench.latency import pct
from bench.synth_transcript import write_transcript

ROOT = Path(__file__).resolve().parents[1]
_MAIN = "import sys; from macupos.cli import main; sys.argv[0] = 'macupos'; main()"
_WRITERS = ("w0", "w1", "w2", "w3")


def _env(home: Path, src: Path, extra: dict[str, str]) -> dict[str, str]:
    theirs = ("MACUPOS_", "CLAUDE_", "ANTHROPIC_", "CODEX_", "TELEGRAM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(theirs)}
    return env | {"MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0", "PYTHONPATH": str(src)} | extra


def _cli(home: Path, src: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        env=_env(home, src, {}),
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"macupos {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:  # a child that has just ended
        pass
    return 0.0


def _tree_rss_mb(pid: int) -> float:
    """The RSS of ``pid`` and every process under it (the server's ingest processes)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += _rss_mb(p)
        with suppress(OSError):
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
    return total


@contextmanager
def serving(home: Path, src: Path, log: Path, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """`macupos serve` of the code in ``src`` on a free port: (its URL, its pid) once /healthz answers."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "serve", "--port", "0", "--rate", "0", "--no-web"],
            env=_env(home, src, env),
            cwd=src,
            stdout=out,
            stderr=out,
        )
    try:
        yield wait_serving(proc, log, r"listening on (http://127\.0\.0\.1:\d+)", 60), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=120)


class Sampler:
    """The server's RSS every 5 ms, on a thread: its peak above the resting RSS when it started; the same for
    the server with every process under it (an upload's ingest runs in one of its own)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.base = _rss_mb(pid)
        self.peak = self.base
        self.tree_base = _tree_rss_mb(pid)
        self.tree_peak = self.tree_base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_mb(self.pid))
            self.tree_peak = max(self.tree_peak, _tree_rss_mb(self.pid))
            self._stop.wait(0.005)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.hwm = _rss_mb(self.pid, "VmHWM")


def _upload(url: str, key: str, name: str, body: bytes) -> dict[str, Any]:
    """One upload; a 503 waits its Retry-After and goes again. Seconds in all, and how many 503s."""
    start = time.perf_counter()
    refused = 0
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=600) as c:
        while True:
            r = c.post("/v1/transcripts", params={"name": name}, content=body)
            if r.status_code != 503:
                r.raise_for_status()
                return {"s": round(time.perf_counter() - start, 2), "refused": refused}
            refused += 1
            time.sleep(float(r.headers.get("Retry-After", "1")))


def _neighbour(url: str, key: str, busy: threading.Event) -> dict[str, float]:
    """Back-to-back gets of the neighbour tenant while ``busy`` is set: milliseconds."""
    samples: list[float] = []
    words = ("ingest", "parser timeout", "websocket relay", "schema migrate", "handoff index")
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as c:
        i = 0
        while busy.is_set():
            start = time.perf_counter()
            c.get("/v1/get", params={"q": words[i % len(words)]}).raise_for_status()
            samples.append(time.perf_counter() - start)
            i += 1
    if not samples:
        return {"gets": 0}
    return {
        "gets": len(samples),
        "p50_ms": round(pct(samples, 0.5), 1),
        "p95_ms": round(pct(samples, 0.95), 1),
        "max_ms": round(1000 * max(samples), 1),
    }


def _phase(url: str, pid: int, reader: str, jobs: list[tuple[str, str, bytes]]) -> dict[str, Any]:
    """``jobs`` (key, name, body) uploaded at once, the neighbour's gets beside them, the RSS sampled."""
    with httpx.Client(base_url=url, headers={"X-API-Key": reader}, timeout=60) as c:
        for _ in range(20):  # warm: the neighbour's tenant open, its pages cached
            c.get("/v1/get", params={"q": "ingest"}).raise_for_status()
    busy = threading.Event()
    busy.set()
    with Sampler(pid) as rss, ThreadPoolExecutor(len(jobs) + 1) as pool:
        gets = pool.submit(_neighbour, url, reader, busy)
        ups = [pool.submit(_upload, url, key, name, body) for key, name, body in jobs]
        took = [u.result() for u in ups]
        busy.clear()
        neighbour = gets.result()
    return {
        "rss_base_mb": round(rss.base),
        "growth_mb": round(rss.peak - rss.base),
        "hwm_growth_mb": round(rss.hwm - rss.base),
        "with_children_growth_mb": round(rss.tree_peak - rss.tree_base),
        "upload_s": max(t["s"] for t in took),
        "refused_503": sum(t["refused"] for t in took),
        "neighbour": neighbour,
    }


def run_side(src: Path, root: Path, big: Path, env: dict[str, str]) -> dict[str, Any]:
    home = root / "home"
    keys = {}
    for tenant in ("reader", *_WRITERS):
        keys[tenant] = json.loads(_cli(home, src, "serve", "keys", "create", "--tenant", tenant, "--json"))["api_key"]
    small = root / "small.jsonl"
    write_transcript(small, 2 * 1024 * 1024, session_id="neighbour", seed=3)
    body = big.read_bytes()
    out: dict[str, Any] = {}
    with serving(home, src, root / "serve-0.log", env) as (url, _):
        _upload(url, keys["reader"], "small.jsonl", small.read_bytes())  # something for the neighbour to find
    with serving(home, src, root / "serve-1.log", env) as (url, pid):
        out["one"] = _phase(url, pid, keys["reader"], [(keys["w0"], "big.jsonl", body)])
        print(f"  one    {out['one']}", flush=True)
        out["again"] = _phase(url, pid, keys["reader"], [(keys["w0"], "big-again.jsonl", body)])
        print(f"  again  {out['again']}", flush=True)
    with serving(home, src, root / "serve-2.log", env) as (url, pid):
        jobs = [(keys[w], "big.jsonl", body) for w in _WRITERS[1:]]
        out["three"] = _phase(url, pid, keys["reader"], jobs)
        print(f"  three  {out['three']}", flush=True)
    return out


def _compile(*trees: Path) -> None:
    """Byte-compile each side's code once, so neither server pays for it at start."""
    for tree in trees:
        folders = [str(tree / n) for n in ("bot", "memory", "relay", "service") if (tree / n).is_dir()]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=45.0, help="the transcript's size")
    ap.add_argument(
        "--tool-lines",
        type=int,
        nargs=2,
        default=(3, 20),
        help="lines a tool result has (the default: many short entries, little clipped: the costly shape)",
    )
    ap.add_argument("--old-src", type=Path, default=None, help="an earlier checkout to measure beside this one")
    ap.add_argument("--new-src", type=Path, default=ROOT, help="this side's code (default: this tree)")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for both servers (e.g. a budget)")
    ap.add_argument("--dir", type=Path, default=None, help="work here (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    sides = {"new": args.new_src.resolve()}
    if args.old_src is not None:
        sides = {"old": args.old_src.resolve(), **sides}
    _compile(*sides.values())
    root = Path(tempfile.mkdtemp(prefix="ingest-mem-", dir=args.dir))
    try:
        big = root / "big.jsonl"
        size = write_transcript(
            big, int(args.mb * 1024 * 1024), session_id="big", seed=11, tool_lines=tuple(args.tool_lines)
        )
        print(f"transcript: {size / 1e6:.1f} MB", flush=True)
        results = {}
        for side, src in sides.items():
            print(f"{side} ({src}):", flush=True)
            results[side] = run_side(src, root / side, big, env)
        if args.json:
            print(json.dumps({"mb": round(size / 1e6, 1), **results}, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
