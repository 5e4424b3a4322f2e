"""A synthetic handoff corpus for the latency benchmark: Zipfian keywords and projects over two years.

Built straight into a real SQLite file with executemany (the index layout of memory.index.postings, terms from
memory.index.tokenize), so a 100k corpus takes seconds, not the minutes one index_handoff call per row would.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
import sqlite3
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory.index.postings import FIELD_DOC, handoff_terms

__all__ = ["Corpus", "SynthHandoff", "build", "generate"]

END = datetime(2026, 3, 1, tzinfo=UTC)
SPAN_DAYS = 730
_SYLLABLES = "ka lo mi ne ru sa ti vo ze pa gu ri do fe ba xu".split()


@dataclass(frozen=True, slots=True)
class SynthHandoff:
    session_id: str
    ts: float
    duration_min: float
    projects: tuple[str, ...]
    keywords: tuple[str, ...]
    body: str


@dataclass(slots=True)
class Corpus:
    handoffs: list[SynthHandoff]
    vocabulary: list[str]  # keywords, most frequent first
    projects: list[str]
    keyword_df: Counter[str]
    end_ts: float


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(n))


class _Zipf:
    def __init__(self, n: int, s: float) -> None:
        weights = [1.0 / (r**s) for r in range(1, n + 1)]
        self.cum = list(itertools.accumulate(weights))

    def draw(self, rng: random.Random) -> int:
        return bisect.bisect_left(self.cum, rng.random() * self.cum[-1])


def generate(n: int, *, seed: int = 7, vocab_size: int = 20_000, n_projects: int = 300) -> Corpus:
    rng = random.Random(seed)
    vocabulary: list[str] = []
    seen: set[str] = set()
    while len(vocabulary) < vocab_size:
        w = _word(rng, rng.choice((2, 3, 3, 4)))
        if rng.random() < 0.2:
            w += "-" + _word(rng, 2)
        if w not in seen:
            seen.add(w)
            vocabulary.append(w)
    projects = [f"/home/dev/src/{_word(rng, 3)}-{i}" for i in range(n_projects)]
    kw_zipf, pj_zipf = _Zipf(vocab_size, 1.0), _Zipf(n_projects, 1.1)
    end_ts = END.timestamp()
    handoffs: list[SynthHandoff] = []
    df: Counter[str] = Counter()
    for i in range(n):
        # Busier recent months: ages skew young, like a real owner's history.
        age_days = SPAN_DAYS * rng.random() ** 1.3
        keywords = tuple(dict.fromkeys(vocabulary[kw_zipf.draw(rng)] for _ in range(6)))
        df.update(keywords)
        proj = tuple(dict.fromkeys(projects[pj_zipf.draw(rng)] for _ in range(rng.choice((1, 1, 1, 2)))))
        body = " ".join(vocabulary[kw_zipf.draw(rng)] for _ in range(25))
        duration = min(600.0, math.exp(rng.gauss(3.0, 1.0)))
        handoffs.append(
            SynthHandoff(f"s{i:07d}", round(end_ts - age_days * 86_400, 3), round(duration, 1), proj, keywords, body)
        )
    return Corpus(handoffs, vocabulary, projects, df, end_ts)


def build(corpus: Corpus, path: Path) -> None:
    """Write handoffs, postings, term_df, meta and content into an already migrated database."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = OFF")
    postings: list[tuple[int, str, float, str, float]] = []
    df: Counter[tuple[int, str]] = Counter()
    for h in corpus.handoffs:
        terms = handoff_terms(h.projects, h.keywords)
        df.update(terms)
        postings.extend((f, t, h.ts, h.session_id, h.duration_min) for f, t in terms)
        postings.append((FIELD_DOC, "", h.ts, h.session_id, h.duration_min))
    with con:
        con.executemany(
            "INSERT INTO handoffs(session_id, kind, ts, date, duration_min, substance, headline, projects, keywords,"
            " markdown, source, indexed, updated_at) VALUES(?, 'main', ?, ?, ?, 2, ?, ?, ?, ?, 'import', 1, '')",
            (
                (
                    h.session_id,
                    h.ts,
                    datetime.fromtimestamp(h.ts, UTC).isoformat(),
                    h.duration_min,
                    " ".join(h.keywords[:3]),
                    json.dumps(h.projects),
                    json.dumps(h.keywords),
                    f"---\nsession_id: {h.session_id}\n---\n# {' '.join(h.keywords)}\n",
                )
                for h in corpus.handoffs
            ),
        )
        postings.sort()
        con.executemany("INSERT INTO postings(field, term, ts, session_id, dur) VALUES(?, ?, ?, ?, ?)", postings)
        con.executemany("INSERT INTO term_df(field, term, df) VALUES(?, ?, ?)", ((f, t, c) for (f, t), c in df.items()))
        rows = [(i + 1, h.session_id, h.body) for i, h in enumerate(corpus.handoffs)]
        con.executemany(
            "INSERT INTO content(rowid, session_id, kind, parent_id, body) VALUES(?, ?, 'main', '', ?)", rows
        )
        con.executemany("INSERT INTO content_rows(session_id, row) VALUES(?, ?)", ((sid, r) for r, sid, _ in rows))
        # A synthetic body has no turn headings: one window each, as memory.index.postings.chunk_spans cuts it.
        # Each window carries its content row and its posted handoff's date and duration, as index_content does.
        con.executemany(
            "INSERT INTO chunks(id, session_id, handoff_id, start, stop, row, ts, dur) VALUES(?, ?, ?, 0, ?, ?, ?, ?)",
            (
                (r, h.session_id, h.session_id, len(h.body), r, h.ts, h.duration_min)
                for r, h in enumerate(corpus.handoffs, 1)
            ),
        )
        con.executemany("INSERT INTO chunk_fts(rowid, body) VALUES(?, ?)", ((r, body) for r, _, body in rows))
        con.executemany(
            "INSERT INTO meta(key, value) VALUES(?, ?)",
            [
                ("indexed_n", str(len(corpus.handoffs))),
                ("max_duration_min", repr(max(h.duration_min for h in corpus.handoffs))),
            ],
        )
    con.execute("INSERT INTO content(content) VALUES('optimize')")
    con.execute("INSERT INTO chunk_fts(chunk_fts) VALUES('optimize')")
    con.commit()
    con.close()
