"""The memory pages' speed: server time of every page with 10,000 handoffs, and the first paint of the session
page of a 10 MB transcript in headless Chromium.

A real `macupos serve --local` process over a memory home holding the 10,000-handoff synthetic corpus
(`bench/_synthetic.py`: every handoff waiting for review), 200 facts, and one session whose transcript is
10 MB of JSONL (long turns, so its rendered markdown is about as big). The one-time link logs an httpx
client in; each page is fetched `--repeat` times and its `Server-Timing` (the page's reads and rendering,
measured by the server) and the client's wall time over loopback are reported. Then Chromium (Debian's
chromium and chromium-driver) opens the big session's page `--paints` times and reads the Paint Timing
API's first-contentful-paint, from navigation start (the request, the server, the transfer and the layout).

Targets (the issue): every page ≤ 200 ms server time with 10k handoffs; the 10 MB session page first
paints in ≤ 300 ms.

Run: .venv/bin/python -m bench.web_pages [--handoffs 10000] [--transcript-mb 10] [--repeat 20] [--paints 7]
     [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from bench._synthetic import build, generate
from memory.facade import Eywa
from memory.facts.api import FactsApi
from memory.settings import MemorySettings
from memory.storage.database import Database
from tests.service.web.browser_rig import headless_chromium, serve_local

BIG = "bench-big-session"
WORDS = "the exporter streams rows to the warehouse, retries on timeouts and logs each batch it wrote. " * 30


def _settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


def _big_transcript(path: Path, target: int) -> int:
    """A Claude Code JSONL of about ``target`` bytes: long user and assistant turns (kept whole in markdown)."""
    written = 0
    parent = None
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        n = 0
        while written < target:
            for role in ("user", "assistant"):
                uuid = f"{role[0]}{n}"
                content: Any = f"turn {n}: {WORDS}"
                if role == "assistant":
                    content = [{"type": "text", "text": f"answer {n}: {WORDS}"}]
                line = json.dumps(
                    {
                        "type": role,
                        "sessionId": BIG,
                        "uuid": uuid,
                        "parentUuid": parent,
                        "isSidechain": False,
                        "timestamp": f"2026-03-02T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
                        "cwd": "/srv/eywa",
                        "gitBranch": "main",
                        "version": "2.1.0",
                        "message": {"role": role, "content": content, "model": "claude-sonnet-4-5"},
                    }
                )
                fh.write(line + "\n")
                written += len(line) + 1
                parent = uuid
            n += 1
    return written


async def _prepare(home: Path, handoffs: int, transcript_mb: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    db_path = home / "memory.db"
    home.mkdir(parents=True)
    db = await Database.open(db_path)
    await db.close()
    corpus = generate(handoffs)
    build(corpus, db_path)
    query = " ".join(corpus.handoffs[len(corpus.handoffs) // 2].keywords[:3])  # words some handoffs share
    size = _big_transcript(home / "claude" / "projects" / "-srv-eywa" / f"{BIG}.jsonl", int(transcript_mb * 1e6))
    settings = _settings(home)
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([home / "claude" / "projects"], use_llm=False)
        markdown = await eywa.db.read(
            lambda c: c.execute("SELECT length(CAST(markdown AS BLOB)) FROM sessions WHERE session_id = ?", (BIG,))
        )
        md_bytes = int(markdown.fetchone()[0])
    facts = await FactsApi.from_settings(settings)
    try:
        lines = [f"remember f{i} s{i % 20} Fact predicate p{i % 7} object {{value {i}}}" for i in range(200)]
        lines += [f"link s{i} s{(i + 1) % 20} next" for i in range(20)]
        result = await facts.run_script("\n".join(lines), provenance="bench")
        assert result.ok, result.error
    finally:
        await facts.close()
    return {"build_s": time.perf_counter() - t0, "transcript_bytes": size, "markdown_bytes": md_bytes, "query": query}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _pages(url: str, link: str, repeat: int, query: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=url, timeout=120) as web:
        assert web.get(link).status_code == 303
        paths = [
            f"/search?q={quote(query)}",
            "/sessions",
            "/sessions?page=100",
            "/sessions?kind=main&since=2020-01-01",
            f"/sessions/{quote(BIG)}",
            "/review",
            "/review?page=200",
            "/facts",
            "/facts/graph.svg",
            "/cost",
            "/stats",
        ]
        for path in paths:
            web.get(path)  # warm: the first request of a page compiles its template
            server: list[float] = []
            wall: list[float] = []
            size = 0
            for _ in range(repeat):
                t = time.perf_counter()
                r = web.get(path)
                wall.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, (path, r.status_code)
                found = re.search(r"dur=([\d.]+)", r.headers.get("server-timing", ""))
                server.append(float(found.group(1)) if found else float("nan"))
                size = len(r.content)
            out[path] = {
                "server_p50": statistics.median(server),
                "server_max": max(server),
                "wall_p50": statistics.median(wall),
                "wall_p95": _pct(wall, 0.95),
                "bytes": size,
            }
            o = out[path]
            print(
                f"{path:42} server p50 {o['server_p50']:7.1f} ms max {o['server_max']:7.1f}  "
                f"wall p50 {o['wall_p50']:7.1f} p95 {o['wall_p95']:7.1f}  {size:>8} B",
                flush=True,
            )
    return out


def _first_paint(url: str, link: str, paints: int, profile: Path) -> list[float]:
    driver = headless_chromium(profile)
    try:
        driver.set_window_size(390, 844)
        driver.get(url + link[link.index("/login") :])
        page = f"{url}/sessions/{quote(BIG)}"
        driver.get(page)  # warm: the stylesheet is cached, as on any visit after the first
        found: list[float] = []
        for _ in range(paints):
            driver.get("about:blank")
            driver.get(page)
            fcp = None
            for _ in range(100):  # the paint entry is queued just after the paint: wait for it (5 s at most)
                fcp = driver.execute_script(
                    "const p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? p.startTime : null"
                )
                if fcp is not None:
                    break
                time.sleep(0.05)
            if fcp is not None:
                found.append(float(fcp))
        return found
    finally:
        driver.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--handoffs", type=int, default=10_000)
    ap.add_argument("--transcript-mb", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--paints", type=int, default=7)
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="macupos-web-bench-"))
    home = root / "home"
    if home.exists():
        shutil.rmtree(home)
    built = asyncio.run(_prepare(home, args.handoffs, args.transcript_mb))
    print(
        f"{args.handoffs} handoffs, a {built['transcript_bytes'] / 1e6:.1f} MB transcript "
        f"({built['markdown_bytes'] / 1e6:.1f} MB of markdown), 200 facts: built in {built['build_s']:.1f}s",
        flush=True,
    )
    load = os.getloadavg()
    proc, url, link = serve_local(home)
    try:
        pages = _pages(url, link, args.repeat, built["query"])
        paints = _first_paint(url, link, args.paints, root / "chromium-profile")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(
        f"session page of the {built['transcript_bytes'] / 1e6:.0f} MB transcript, first contentful paint: "
        f"median {statistics.median(paints):.0f} ms, max {max(paints):.0f} ms ({len(paints)} loads)"
    )
    print(f"load average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; after {os.getloadavg()[0]:.1f}")
    if args.json:
        print(json.dumps({"built": built, "pages": pages, "first_paint_ms": paints, "load": load}, indent=2))
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
