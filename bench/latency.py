"""Query and write latency of memory.index.retrieval at 1k / 10k / 100k synthetic handoffs, against a naive scan.

The naive baseline is what the reference eywa-mcp does with its JSON index: for every query token,
scan every indexed project and keyword for a substring match, then score every matched handoff.
It runs in this same process over the same corpus. The write path compares adding one handoff
(row + index_handoff + content, committed) with rewriting a whole JSON index file.

Run: .venv/bin/python -m bench.latency [--sizes 1000,10000,100000] [--queries 200] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._synthetic import Corpus, build, generate
from memory.index import postings as index
from memory.index.retrieval import retrieve
from memory.storage.database import Database

_NAIVE_STOP = frozenset("the a an and or of to in on for with is are was what how why when where this that".split())


def naive_index(corpus: Corpus) -> dict[str, Any]:
    by_project: dict[str, list[str]] = defaultdict(list)
    by_keyword: dict[str, list[str]] = defaultdict(list)
    handoffs: dict[str, dict[str, Any]] = {}
    for h in corpus.handoffs:
        for p in h.projects:
            by_project[p.rsplit("/", 1)[-1]].append(h.session_id)
        for k in h.keywords:
            by_keyword[k].append(h.session_id)
        handoffs[h.session_id] = {"ts": h.ts, "duration_minutes": h.duration_min, "substance": 2}
    return {"by_project": dict(by_project), "by_keyword": dict(by_keyword), "handoffs": handoffs}


def naive_query(idx: dict[str, Any], query: str, now: float, k: int = 5, window: float = 14.0) -> list[str]:
    tokens = [t for t in re.split(r"[^a-z0-9-]+", query.lower()) if len(t) > 2 and t not in _NAIVE_STOP]
    n = max(len(idx["handoffs"]), 1)
    scores: dict[str, float] = defaultdict(float)
    for token in tokens:
        for weight, table in ((3.0, idx["by_project"]), (2.0, idx["by_keyword"])):
            for term, sids in table.items():  # every indexed term, every query token
                if token in term:
                    idf = max(0.0, math.log(n / len(sids)))
                    for sid in sids:
                        scores[sid] += weight * idf
    ranked = []
    for sid, base in scores.items():
        h = idx["handoffs"][sid]
        age = max(1.0, (now - h["ts"]) / 86_400)
        recency = 1 + 1 / math.sqrt(age) if age <= window else 0.5 ** ((age - window) / 7)
        ranked.append((base * recency * (1 + 0.1 * math.log(h["duration_minutes"] + 1)), sid))
    ranked.sort(reverse=True)
    return [sid for _, sid in ranked[:k]]


def query_mix(corpus: Corpus, rng: random.Random, count: int) -> tuple[list[str], list[str], list[float]]:
    """Mixed queries (common words in ~25% of handoffs, plus mid and rare terms) and selective ones."""
    n = len(corpus.handoffs)
    by_frac = sorted(corpus.keyword_df, key=lambda w: abs(corpus.keyword_df[w] / n - 0.25))
    common = by_frac[:4]
    mid = [w for w in corpus.vocabulary[50:400] if 0.002 * n <= corpus.keyword_df[w] <= 0.05 * n] or common
    rare = [w for w in corpus.vocabulary if 1 <= corpus.keyword_df[w] <= 10]
    projects = [p.rsplit("/", 1)[-1] for p in corpus.projects[:20]]
    shapes: list[Callable[[], str]] = [
        lambda: rng.choice(common),
        lambda: f"{rng.choice(common)} {rng.choice(common)}",
        lambda: f"fix the {rng.choice(common)} in {rng.choice(mid)}",
        lambda: f"{rng.choice(common)} {rng.choice(rare)}",
        lambda: f"{rng.choice(projects)} {rng.choice(common)}",
        lambda: f"{rng.choice(mid)} {rng.choice(mid)} {rng.choice(common)}",
    ]
    mixed = [rng.choice(shapes)() for _ in range(count)]
    selective = [" ".join(rng.sample(rare, rng.choice((1, 2)))) for _ in range(count)]
    return mixed, selective, [corpus.keyword_df[w] / n for w in common]


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


async def time_ours(db: Database, queries: list[str], now: datetime) -> list[float]:
    for q in queries[:20]:  # warm the page cache and statement cache
        await retrieve(db, q, as_of=now)
    out = []
    for q in queries:
        start = time.perf_counter()
        await retrieve(db, q, as_of=now)
        out.append(time.perf_counter() - start)
    return out


def time_naive(idx: dict[str, Any], queries: list[str], now: float) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        naive_query(idx, q, now)
        out.append(time.perf_counter() - start)
    return out


async def time_add(db: Database, corpus: Corpus, repeat: int) -> tuple[list[float], list[float]]:
    """(index_handoff alone, row + index + content) for new handoffs, each committed."""
    idx_only, full = [], []
    h0 = corpus.handoffs[0]
    for j in range(repeat):
        sid = f"new-{j}"
        ts = corpus.end_ts - j
        start = time.perf_counter()
        async with db.write() as conn:
            await conn.execute(
                "INSERT INTO handoffs(session_id, kind, ts, date, duration_min, substance, headline, projects,"
                " keywords, markdown, source, updated_at) VALUES(?, 'main', ?, '', 30, 2, '', ?, ?, '', 'import', '')",
                (sid, ts, json.dumps(h0.projects), json.dumps(h0.keywords)),
            )
            mid = time.perf_counter()
            await index.index_handoff(
                conn, session_id=sid, ts=ts, projects=h0.projects, keywords=h0.keywords, substance=2, kind="main"
            )
            idx_done = time.perf_counter()
            await index.index_content(conn, session_id=sid, kind="main", parent_id="", body=h0.body)
        end = time.perf_counter()
        idx_only.append(idx_done - mid)
        full.append(end - start)
    return idx_only, full


def time_naive_write(idx: dict[str, Any], path: Path, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        path.write_text(json.dumps(idx), encoding="utf-8")
        out.append(time.perf_counter() - start)
    return out


async def run_size(n: int, root: Path, n_queries: int) -> list[tuple[str, float, float, float, float]]:
    t0 = time.perf_counter()
    corpus = generate(n)
    path = root / f"bench-{n}.db"
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)  # a --dir used before: build afresh, never on top of an old corpus
    db = await Database.open(path)
    await db.close()
    build(corpus, path)
    print(f"[{n}] corpus built in {time.perf_counter() - t0:.1f}s ({path.stat().st_size / 1e6:.0f} MB)", flush=True)
    rng = random.Random(n)
    mixed, selective, common_fracs = query_mix(corpus, rng, n_queries)
    print(f"[{n}] common words are in {', '.join(f'{f:.0%}' for f in common_fracs)} of handoffs", flush=True)
    now = datetime.fromtimestamp(corpus.end_ts, UTC)
    idx = naive_index(corpus)
    db = await Database.open(path)
    rows = []
    try:
        for name, qs in (("mixed", mixed), ("selective", selective)):
            ours = await time_ours(db, qs, now)
            naive = time_naive(idx, qs[: max(20, n_queries // (10 if n >= 100_000 else 1))], corpus.end_ts)
            rows.append((f"{n:>7} {name:<9}", pct(ours, 0.5), pct(ours, 0.95), pct(naive, 0.5), pct(naive, 0.95)))
        idx_only, full = await time_add(db, corpus, 30)
        naive_w = time_naive_write(idx, root / f"index-{n}.json", 3 if n >= 100_000 else 10)
        rows.append(
            (f"{n:>7} add-index", pct(idx_only, 0.5), pct(idx_only, 0.95), pct(naive_w, 0.5), pct(naive_w, 0.95))
        )
        rows.append((f"{n:>7} add-full ", pct(full, 0.5), pct(full, 0.95), pct(naive_w, 0.5), pct(naive_w, 0.95)))
    finally:
        await db.close()
    return rows


async def main_async(sizes: list[int], n_queries: int, root: Path) -> None:
    rows = []
    for n in sizes:
        rows += await run_size(n, root, n_queries)
    print()
    head = ("size    workload", "ours p50", "ours p95", "naive p50", "naive p95", "p50 ratio")
    print(f"{head[0]:<18} {head[1]:>9} {head[2]:>9} {head[3]:>10} {head[4]:>10} {head[5]:>10}")
    for label, o50, o95, n50, n95 in rows:
        ratio = n50 / o50 if o50 else float("inf")
        print(f"{label:<18} {o50:>8.3f}m {o95:>8.3f}m {n50:>9.3f}m {n95:>9.3f}m {ratio:>9.0f}x")
    print("(milliseconds; add-* rows: ours = one handoff added and committed, naive = whole JSON index rewritten)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--queries", type=int, default=200, help="queries per workload")
    parser.add_argument("--dir", type=Path, help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(main_async(sizes, args.queries, args.dir))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main_async(sizes, args.queries, Path(tmp)))


if __name__ == "__main__":
    main()
