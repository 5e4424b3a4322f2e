"""Detail recall (`memory.index.retrieval.search_content`, behind `Eywa.search`, `macupos memory search`,
`/v1/search`, `eywa_search` and `/recall`) over a tenant holding 10 MB sessions, beside the query it replaced.

The tenant is ingested through the public path (`Eywa.ingest`, no LLM) from generated Claude Code transcripts:
`--normal` ordinary sessions (8–40 turns of 40–400 words each: common English, the tool words of
bench/synth_transcript.py, a few words of the session's own, and a ticket tag `tktN`), and three big ones of
`--big-mb` each, every one with the rare word "quokka" planted in one turn late in it:

- `big-turns`: short turns kept whole (bench/web_pages.py's shape: the 10 MB session in which "timeout schema"
  took 387 s), "the exporter streams rows to the warehouse, retries on timeouts …" over and over;
- `big-tools`: bench/synth_transcript.py's tool-heavy transcript (tool output cut to 2,000 characters);
- `big-one-turn`: one request and then thousands of assistant lines, all under one heading: one window of
  turns as long as the session (as is a session indexed before windows existed).

The baseline is the query as it was (`baseline_search`, copied here): FTS5's snippet() over each hit's whole
text. Its cost grows with the square of the matches in a hit, so it runs on a second tenant of the same shape
whose big sessions are `--baseline-mb` (default 1 MB), both functions side by side (a baseline slower than
2 s runs once); on the full tenant the baseline's ranking alone (no snippet) is checked against the new
answers, and `--baseline-full QUERY` times both for that query's best hit there (the case of the report:
minutes at 10 MB). Every answer of the new path must have the old one's sessions, order and scores;
snippets are compared where the old one was computed.

Run: .venv/bin/python -m bench.search_large [--normal 300] [--big-mb 10] [--baseline-mb 1] [--repeat 5]
     [--baseline-full "warehouse timeouts"] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiosqlite

from bench.synth_transcript import write_transcript
from memory.facade import Eywa
from memory.index.content_term import fts_quote
from memory.index.retrieval import ContentHit, search_content
from memory.index.snippets import SNIPPET_TEXT_MAX
from memory.settings import MemorySettings

QUERIES = (
    "timeout schema",  # the query of the report
    "warehouse timeouts",  # the words of big-turns
    "quokka",  # one turn of each big session
    "quokka retries",
    "the",
    "fix the flaky test fixture",
    "tkt17 timeout",  # one normal session's tag
)
BIG_WORDS = "the exporter streams rows to the warehouse, retries on timeouts and logs each batch it wrote. " * 30
_COMMON = "the a to of and in is it for on with that this be as at by from or not we you can".split()
_TECH = (
    "refactor ingest pipeline retrieval fast bot hook server database migrate schema flaky test fixture timeout "
    "websocket parser tokenizer handoff keyword project index posting recency duration telegram codex relay"
).split()
_SYLLABLES = "ka lo mi ne ru sa ti vo ze pa gu ri do fe ba xu".split()


def _settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


async def baseline_search(conn: aiosqlite.Connection, query: str, limit: int = 10) -> list[ContentHit]:
    """memory.index.retrieval.search_content before memory/index/snippets.py: snippet() over every hit's whole text."""
    tokens = list(dict.fromkeys(w.lower() for w in re.findall(r"[^\W_]+", query)))[:32]
    if not tokens or limit <= 0:
        return []
    rows = await conn.execute_fetchall(
        "SELECT session_id, kind, parent_id, snippet(content, 3, '[', ']', '…', 16), bm25(content)"
        " FROM content WHERE content MATCH ? ORDER BY rank LIMIT ?",
        (" OR ".join(map(fts_quote, tokens)), limit),
    )
    return [ContentHit(str(s), str(k), str(p), str(snip), -float(b)) for s, k, p, snip, b in rows]


async def baseline_ranking(conn: aiosqlite.Connection, query: str, limit: int = 10) -> list[tuple[str, float]]:
    """The baseline's sessions and scores without its snippets (cheap at any size)."""
    tokens = list(dict.fromkeys(w.lower() for w in re.findall(r"[^\W_]+", query)))[:32]
    rows = await conn.execute_fetchall(
        "SELECT session_id, bm25(content) FROM content WHERE content MATCH ? ORDER BY rank LIMIT ?",
        (" OR ".join(map(fts_quote, tokens)), limit),
    )
    return [(str(s), -float(b)) for s, b in rows]


def _line(session: str, n: int, role: str, text: str, parent: str | None) -> tuple[str, str]:
    uuid = f"{session}-{role[0]}{n}"
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    ts = f"2026-03-{1 + n // 86_400 % 28:02d}T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
    line = {
        "type": role,
        "sessionId": session,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "timestamp": ts,
        "cwd": "/srv/eywa",
        "gitBranch": "main",
        "version": "2.1.0",
        "message": {"role": role, "content": content, "model": "claude-sonnet-4-5"},
    }
    return json.dumps(line) + "\n", uuid


def write_normal(path: Path, i: int) -> None:
    rng = random.Random(i)
    own = ["".join(rng.choice(_SYLLABLES) for _ in range(3)) for _ in range(8)]
    session, parent = f"normal-{i:04d}", None
    with path.open("w", encoding="utf-8") as fh:
        for n in range(rng.randint(8, 40)):
            role = "user" if n % 2 == 0 else "assistant"
            words = [
                rng.choice(_COMMON) if (r := rng.random()) < 0.45 else rng.choice(_TECH) if r < 0.8 else rng.choice(own)
                for _ in range(rng.randint(40, 400))
            ]
            words.insert(rng.randrange(len(words)), f"tkt{i}")
            line, parent = _line(session, n, role, " ".join(words) + ".", parent)
            fh.write(line)


def write_big(path: Path, shape: str, target: int) -> None:
    """One big session of ``shape`` (module docstring) of about ``target`` bytes, "quokka" at 70 % of it."""
    if shape == "big-tools":
        tmp = path.with_suffix(".tmp")
        write_transcript(tmp, target, session_id=shape, seed=11)
        lines = tmp.read_text(encoding="utf-8").splitlines(keepends=True)
        at = int(len(lines) * 0.7) // 4 * 4  # a user request (bench/synth_transcript.py: every fourth line)
        record = json.loads(lines[at])
        record["message"]["content"] += " the quokka in the schema"
        lines[at] = json.dumps(record) + "\n"
        path.write_text("".join(lines), encoding="utf-8")
        tmp.unlink()
        return
    written, n, parent, planted = 0, 0, None, False
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            role = "user" if (shape == "big-turns" and n % 2 == 0) or n == 0 else "assistant"
            text = f"{role} {n}: {BIG_WORDS}"
            if not planted and written > 0.7 * target:
                text, planted = text + " and a quokka ate the timeout schema.", True
            line, parent = _line(shape, n, role, text, parent)
            fh.write(line)
            written += len(line)
            n += 1


async def build(home: Path, normal: int, big_mb: float) -> dict[str, Any]:
    folder = home / "claude" / "projects" / "-srv-eywa"
    folder.mkdir(parents=True)
    for i in range(normal):
        write_normal(folder / f"normal-{i:04d}.jsonl", i)
    for shape in ("big-turns", "big-tools", "big-one-turn"):
        write_big(folder / f"{shape}.jsonl", shape, int(big_mb * 1e6))
    t0 = time.perf_counter()
    settings = _settings(home)
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([home / "claude" / "projects"], use_llm=False)
        sizes = await eywa.db.conn.execute_fetchall(
            "SELECT c.session_id, length(c.body), count(k.id), max(k.stop - k.start) FROM content AS c"
            " JOIN chunks AS k ON k.session_id = c.session_id WHERE c.session_id LIKE 'big-%' GROUP BY c.session_id"
        )
        [(n_sessions, long_ones)] = await eywa.db.conn.execute_fetchall(
            f"SELECT count(*), sum(length(body) > {SNIPPET_TEXT_MAX}) FROM content"
        )
    return {
        "ingest_s": time.perf_counter() - t0,
        "sessions": n_sessions,
        "longer_than_snippet_max": long_ones,
        "big": {str(s): {"chars": n, "windows": w, "longest_window": min(m, n)} for s, n, w, m in sizes},
    }


async def _timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = await fn(*args)
    return time.perf_counter() - t, out


async def measure(home: Path, repeat: int, baseline: bool, full_query: str | None) -> dict[str, Any]:
    settings = _settings(home)
    out: dict[str, Any] = {}
    async with await Eywa.open(settings) as eywa:
        conn = eywa.db.conn
        for q in QUERIES:
            new_s: list[float] = []
            old_s: list[float] = []
            hits: list[ContentHit] = []
            old: list[ContentHit] | None = None
            for _ in range(repeat):
                d, hits = await _timed(search_content, conn, q)
                new_s.append(d)
                if baseline and (not old_s or old_s[0] < 2.0):  # a slow baseline once is enough
                    d, old = await _timed(baseline_search, conn, q)
                    old_s.append(d)
            rank = [(h.session_id, h.score) for h in hits]
            assert rank == await baseline_ranking(conn, q), f"ranking changed for {q!r}"
            row: dict[str, Any] = {
                "new_median_s": statistics.median(new_s),
                "new_max_s": max(new_s),
                "hits": len(hits),
                "big_hits": [h.session_id for h in hits if h.session_id.startswith("big-")],
                "big_snippets": {h.session_id: h.snippet for h in hits if h.session_id.startswith("big-")},
            }
            if old is not None:
                row |= {"old_median_s": statistics.median(old_s), "old_max_s": max(old_s)}
                row["snippets_differ"] = sorted(h.session_id for h, o in zip(hits, old, strict=True) if h != o)
            out[q] = row
        if full_query:  # its best hit only: one snippet of a 10 MB session is the case of the report
            d_new, [hit] = await _timed(search_content, conn, full_query, 1)
            d_old, [old_hit] = await _timed(baseline_search, conn, full_query, 1)
            assert (hit.session_id, hit.score) == (old_hit.session_id, old_hit.score)
            out["baseline_full"] = {
                "query": full_query,
                "session": hit.session_id,
                "new_s": d_new,
                "old_s": d_old,
                "new_snippet": hit.snippet,
                "old_snippet": old_hit.snippet,
            }
    return out


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"normal": args.normal, "big_mb": args.big_mb, "baseline_mb": args.baseline_mb}
    report["full"] = await build(root / "full", args.normal, args.big_mb)
    report["full"]["queries"] = await measure(root / "full", args.repeat, False, args.baseline_full)
    if args.baseline_mb > 0:
        report["small"] = await build(root / "small", args.normal, args.baseline_mb)
        report["small"]["queries"] = await measure(root / "small", args.repeat, True, None)
    return report


def _print(report: dict[str, Any]) -> None:
    for name, mb in (("full", report["big_mb"]), ("small", report["baseline_mb"])):
        part = report.get(name)
        if part is None:
            continue
        print(f"\n{name}: {report['normal']} normal sessions + 3 big of {mb} MB, ingest {part['ingest_s']:.1f} s;")
        print(f"  {part['sessions']} sessions, {part['longer_than_snippet_max']} longer than {SNIPPET_TEXT_MAX} chars")
        for sid, b in part["big"].items():
            print(f"  {sid}: {b['chars']:,} chars, {b['windows']} windows, longest {b['longest_window']:,}")
        print(f"  {'query':28} {'new p50':>9} {'new max':>9} {'old p50':>9} {'ratio':>8}  big hits")
        for q, r in part["queries"].items():
            if q == "baseline_full":
                print(
                    f"  {r['query']!r}, best hit only ({r['session']}): old {r['old_s']:.1f} s, new {r['new_s']:.3f} s"
                )
                print(f"    old snippet: {r['old_snippet']!r}\n    new snippet: {r['new_snippet']!r}")
                continue
            old = r.get("old_median_s")
            ratio = f"{old / r['new_median_s']:8.1f}" if old else f"{'':>8}"
            olds = f"{old * 1000:7.1f}ms" if old else f"{'—':>9}"
            print(
                f"  {q:28} {r['new_median_s'] * 1000:7.1f}ms {r['new_max_s'] * 1000:7.1f}ms {olds} {ratio}"
                f"  {len(r['big_hits'])}/{r['hits']}"
                + (f", snippets differ: {r['snippets_differ']}" if r.get("snippets_differ") else "")
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--normal", type=int, default=300)
    ap.add_argument("--big-mb", type=float, default=10.0)
    ap.add_argument("--baseline-mb", type=float, default=1.0, help="big sessions' size in the side-by-side tenant")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline-full", default=None, help="time the old query once on the full tenant")
    ap.add_argument("--dir", type=Path, default=None, help="build the tenants here (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        report = asyncio.run(run(args, Path(tmp)))
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else "", end="")
    if not args.json:
        _print(report)


if __name__ == "__main__":
    main()
