"""Retrieval quality on LoCoMo: session recall@1/5/10, ours vs SQLite FTS5 bm25() over raw session text.

    .venv/bin/python -m bench.locomo --data PATH [--conversations IDS|all] [--content-weight W]
                                     [--session-share S] [--top-chunks M] [--date-weight D]
                                     [--date-days T] [--content-df-cap N]
    .venv/bin/python -m bench.locomo --data PATH --loo     # leave-one-conversation-out over W, S, M, D

The data is not in this repository (LoCoMo is CC BY-NC 4.0): download `data/locomo10.json` from
https://github.com/snap-research/LoCoMo and pass it as --data (or set LOCOMO_DATA). The development
set, the default of --conversations, is its first four conversations: conv-26, conv-30, conv-41 and
conv-42, the ones docs/benchmarks.md's figures and the parameter grid use; `--conversations all` adds
the other six as a held-out check.

Each LoCoMo session becomes a Claude Code transcript (speaker A as the user, speaker B as the
assistant; one minute per turn from the session's `session_N_date_time`) and goes through the public
ingest path (`macupos memory ingest --no-llm`, in a child process with a private MACUPOS_HOME). Each
question of categories 1–4 is asked of `retrieve()` with as-of = the conversation's last session.
Recall@k: a question counts as recalled at k when one of its evidence sessions is in the top k (the
usual session-level measure; with it the FTS5 baseline gives the ≈ 0.57 / 0.87 / 0.94 quoted for it).

`--loo`: for each conversation, the grid point with the best R@1 + R@5 on the *other* conversations is
scored on it; the held-out figures, pooled, estimate what the chosen defaults do on unseen conversations.
(The window size, memory.index.postings.TURNS_PER_CHUNK, is fixed at ingest and not part of this grid.)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCOMO_URL = "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json"
DEV_SET = ("conv-26", "conv-30", "conv-41", "conv-42")
KS = (1, 5, 10)
GRID = {
    "content_weight": (10.0, 20.0, 50.0, 1e6),
    "session_share": (0.0, 0.25, 0.5, 0.75),
    "top_chunks": (1, 2, 3),
    "date_weight": (0.0, 0.5, 1.0, 2.0),
}


def session_date(text: str) -> datetime:
    # "1:56 pm on 8 May, 2023"
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions_of(conv: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            n = int(m.group(1))
            out.append((n, session_date(conv[f"session_{n}_date_time"]), turns))
    return sorted(out)


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", ""))
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def write_transcripts(sample: dict[str, Any], folder: Path) -> None:
    conv = sample["conversation"]
    sid = sample["sample_id"]
    folder.mkdir(parents=True)
    for n, start, turns in sessions_of(conv):
        lines = []
        parent = None
        for i, turn in enumerate(turns):
            role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
            uuid = f"{sid}-{n}-{i}"
            ts = (start + timedelta(minutes=i)).isoformat().replace("+00:00", "Z")
            text = f"{turn['speaker']}: {turn_text(turn)}"
            content: Any = text if role == "user" else [{"type": "text", "text": text}]
            lines.append(
                {
                    "type": role,
                    "uuid": uuid,
                    "parentUuid": parent,
                    "sessionId": f"{sid}-s{n}",
                    "timestamp": ts,
                    "cwd": f"/locomo/{sid}",
                    "message": {"role": role, "content": content},
                }
            )
            parent = uuid
        (folder / f"{sid}-s{n}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def questions(sample: dict[str, Any]) -> list[tuple[str, set[int]]]:
    out = []
    for qa in sample["qa"]:
        if qa.get("category") not in (1, 2, 3, 4):
            continue
        ev = {int(m.group(1)) for e in qa.get("evidence", []) for m in [re.match(r"D(\d+):", str(e))] if m}
        if ev:
            out.append((str(qa["question"]), ev))
    return out


def recall(ranked: list[int], evidence: set[int]) -> list[float]:
    return [1.0 if evidence & set(ranked[:k]) else 0.0 for k in KS]


def bm25_baseline(sample: dict[str, Any]) -> list[list[float]]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE s USING fts5(n UNINDEXED, body, tokenize='porter unicode61')")
    for n, _, turns in sessions_of(sample["conversation"]):
        db.execute("INSERT INTO s VALUES (?, ?)", (n, "\n".join(turn_text(t) for t in turns)))
    rows = []
    for q, ev in questions(sample):
        terms = " OR ".join('"' + w + '"' for w in re.findall(r"\w+", q.lower()))
        ranked = [int(r[0]) for r in db.execute("SELECT n FROM s WHERE s MATCH ? ORDER BY bm25(s) LIMIT 10", (terms,))]
        rows.append(recall(ranked, ev))
    return rows


async def ours(sample: dict[str, Any], home: Path, settings: list[dict[str, Any]]) -> list[list[list[float]]]:
    """Recall rows of every question, for each of ``settings`` (keyword arguments of retrieve())."""
    from memory.index.retrieval import retrieve
    from memory.storage.database import Database

    as_of = sessions_of(sample["conversation"])[-1][1] + timedelta(hours=1)
    db = await Database.open(home / "memory.db")
    out: list[list[list[float]]] = [[] for _ in settings]
    try:
        for q, ev in questions(sample):
            for rows, kwargs in zip(out, settings, strict=True):
                res = await retrieve(db, q, max_k=max(KS), as_of=as_of, **kwargs)
                rows.append(recall([int(r.session_id.rsplit("-s", 1)[1]) for r in res], ev))
    finally:
        await db.close()
    return out


def fmt(rows: list[list[float]]) -> str:
    return " / ".join(f"{x:.3f}" for x in mean(rows))


def leave_one_out(names: list[str], grid: list[dict[str, Any]], rows: dict[str, list[list[list[float]]]]) -> None:
    held: list[list[float]] = []
    for name in names:

        def fit(g: int, held_out: str = name) -> float:
            pooled = [r for other in names if other != held_out for r in rows[other][g]]
            m = mean(pooled)
            return m[0] + m[1]

        best = max(range(len(grid)), key=fit)
        held += rows[name][best]
        print(f"{name:>10}  chosen on the others: {grid[best]}  held-out R@1/5/10 = {fmt(rows[name][best])}")
    print(f"{'LOO':>10}  n={len(held):3d}  held-out R@1/5/10 = {fmt(held)}")


def mean(rows: list[list[float]]) -> list[float]:
    return [sum(r[i] for r in rows) / len(rows) for i in range(len(KS))]


def load_samples(path: Path | None, conversations: str) -> list[dict[str, Any]]:
    """The chosen conversations of a LoCoMo file; a clear exit when the file or a conversation is missing."""
    if path is None or not path.is_file():
        where = f"{path} does not exist. " if path is not None else ""
        raise SystemExit(
            f"{where}This benchmark needs LoCoMo's data/locomo10.json, which is not part of this repository "
            "(CC BY-NC 4.0). Download it from https://github.com/snap-research/LoCoMo, e.g.\n"
            f"    curl -LO {LOCOMO_URL}\n"
            "then pass --data locomo10.json (or set LOCOMO_DATA=/path/to/locomo10.json)."
        )
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    if conversations == "all":
        return samples
    wanted = [c.strip() for c in conversations.split(",") if c.strip()]
    by_id = {s["sample_id"]: s for s in samples}
    missing = [c for c in wanted if c not in by_id]
    if missing:
        raise SystemExit(f"{path} has no conversation {', '.join(missing)}; it has {', '.join(by_id)}")
    return [by_id[c] for c in wanted]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data",
        type=Path,
        default=os.environ.get("LOCOMO_DATA"),
        help="LoCoMo's data/locomo10.json (or a file of some of its conversations); default $LOCOMO_DATA",
    )
    ap.add_argument(
        "--conversations",
        default=",".join(DEV_SET),
        help="comma-separated sample ids, or 'all' (default: the development set, %(default)s)",
    )
    ap.add_argument("--content-weight", type=float, default=None, help="override retrieve()'s default")
    ap.add_argument("--session-share", type=float, default=None, help="override retrieve()'s default")
    ap.add_argument("--top-chunks", type=int, default=None, help="override retrieve()'s default")
    ap.add_argument("--content-df-cap", type=int, default=None, help="override retrieve()'s default")
    ap.add_argument("--date-weight", type=float, default=None, help="override retrieve()'s default")
    ap.add_argument("--date-days", type=float, default=None, help="override retrieve()'s default")
    ap.add_argument("--loo", action="store_true", help="leave-one-conversation-out over the parameter grid")
    args = ap.parse_args()
    overrides = {
        k: v
        for k, v in (
            ("content_weight", args.content_weight),
            ("session_share", args.session_share),
            ("top_chunks", args.top_chunks),
            ("content_df_cap", args.content_df_cap),
            ("date_weight", args.date_weight),
            ("date_days", args.date_days),
        )
        if v is not None
    }
    grid = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    # Overrides of what the grid does not vary (say --content-df-cap) hold for every grid point too.
    fixed = {k: v for k, v in overrides.items() if k not in GRID}
    settings = [overrides, *({**fixed, **g} for g in grid)] if args.loo else [overrides]
    samples = load_samples(args.data, args.conversations)
    all_ours: list[list[float]] = []
    all_base: list[list[float]] = []
    per_setting: dict[str, list[list[list[float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sample in samples:
            folder = Path(tmp) / "transcripts" / sample["sample_id"]
            home = Path(tmp) / "homes" / sample["sample_id"]
            write_transcripts(sample, folder)
            env = {**os.environ, "MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0", "HOME": str(home)}
            subprocess.run(
                [sys.executable, "-m", "macupos", "memory", "ingest", str(folder), "--no-llm", "--quiet"],
                env=env,
                cwd=ROOT,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            runs = asyncio.run(ours(sample, home, settings))
            per_setting[sample["sample_id"]] = runs[1:]
            o, b = runs[0], bm25_baseline(sample)
            all_ours += o
            all_base += b
            print(f"{sample['sample_id']:>10}  n={len(o):3d}  ours R@1/5/10 = {fmt(o)}   bm25 = {fmt(b)}")
    print(f"{'all':>10}  n={len(all_ours):3d}  ours R@1/5/10 = {fmt(all_ours)}   bm25 = {fmt(all_base)}")
    if args.loo:
        leave_one_out([s["sample_id"] for s in samples], grid, per_setting)
    flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in overrides.items()) + (" --loo" if args.loo else "")
    if args.conversations != ",".join(DEV_SET):
        flags += f" --conversations {args.conversations}"
    print(f"measured {datetime.now(UTC):%Y-%m-%d} with: python -m bench.locomo{flags}")


if __name__ == "__main__":
    main()
