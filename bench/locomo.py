"""Retrieval quality on LoCoMo: session recall@1/5/10, ours vs SQLite FTS5 bm25() over raw session text.

    .venv/bin/python -m bench.locomo [--data PATH] [--content-weight W]

Each LoCoMo session becomes a Claude Code transcript (speaker A as the user, speaker B as the
assistant; one minute per turn from the session's `session_N_date_time`) and goes through the public
ingest path (`macupos memory ingest --no-llm`, in a child process with a private MACUPOS_HOME). Each
question of categories 1–4 is asked of `retrieve()` with as-of = the conversation's last session.
Recall@k: a question counts as recalled at k when one of its evidence sessions is in the top k (the
usual session-level measure; with it the FTS5 baseline gives the ≈ 0.57 / 0.87 / 0.94 quoted for it).
"""

from __future__ import annotations

import argparse
import asyncio
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
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
KS = (1, 5, 10)


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


async def ours(sample: dict[str, Any], home: Path, content_weight: float | None) -> list[list[float]]:
    from memory.retrieval import retrieve

    from memory.db import Database

    as_of = sessions_of(sample["conversation"])[-1][1] + timedelta(hours=1)
    db = await Database.open(home / "memory.db")
    rows = []
    try:
        for q, ev in questions(sample):
            kwargs: dict[str, Any] = {"content_weight": content_weight} if content_weight is not None else {}
            res = await retrieve(db.conn, q, max_k=10, as_of=as_of, **kwargs)
            ranked = [int(r.session_id.rsplit("-s", 1)[1]) for r in res]
            rows.append(recall(ranked, ev))
    finally:
        await db.close()
    return rows


def mean(rows: list[list[float]]) -> list[float]:
    return [sum(r[i] for r in rows) / len(rows) for i in range(len(KS))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--content-weight", type=float, default=None, help="override retrieve()'s default")
    args = ap.parse_args()
    samples = json.loads(args.data.read_text())
    all_ours: list[list[float]] = []
    all_base: list[list[float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for sample in samples:
            folder = Path(tmp) / "transcripts" / sample["sample_id"]
            home = Path(tmp) / "homes" / sample["sample_id"]
            write_transcripts(sample, folder)
            env = {**os.environ, "MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0", "HOME": str(home)}
            subprocess.run(
                [sys.executable, "-m", "bot.cli", "memory", "ingest", str(folder), "--no-llm", "--quiet"],
                env=env,
                cwd=ROOT,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            o = asyncio.run(ours(sample, home, args.content_weight))
            b = bm25_baseline(sample)
            all_ours += o
            all_base += b
            print(
                f"{sample['sample_id']:>10}  n={len(o):3d}  ours R@1/5/10 = "
                + " / ".join(f"{x:.3f}" for x in mean(o))
                + "   bm25 = "
                + " / ".join(f"{x:.3f}" for x in mean(b))
            )
    print(
        f"{'all':>10}  n={len(all_ours):3d}  ours R@1/5/10 = "
        + " / ".join(f"{x:.3f}" for x in mean(all_ours))
        + "   bm25 = "
        + " / ".join(f"{x:.3f}" for x in mean(all_base))
    )
    print(
        f"measured {datetime.now(UTC):%Y-%m-%d} with: python -m bench.locomo"
        + (f" --content-weight {args.content_weight}" if args.content_weight is not None else "")
    )


if __name__ == "__main__":
    main()
