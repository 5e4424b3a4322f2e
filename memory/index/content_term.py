"""The content term of a handoff's score: bm25 over what was said, the whole session and its windows.

content = weight × (share × S / max S + (1 − share) × B / max B + date_weight × D), where S is −bm25 of
the session's whole text over the query words (the best of the session and its subagents'), B the sum of
its best ``top`` windows' −bm25 (maxima over the visible handoffs of this query), and D how near its
date is to a date the query names (:mod:`memory.index.query_dates`; 0 when it names none). docs/retrieval.md,
"Content term". FTS5's bm25 of an OR query is the sum of its per-word values, so each word is probed alone and
the values summed. A word counts only if it is in at most ``CONTENT_DF_CAP`` windows: a bound on the
work per word (counting stops at CAP + 1); bm25's own IDF does the weighting.

Runs inside :meth:`memory.storage.database.Database.read`, on the read connection.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory.index.query_dates import NamedDate, date_match
from memory.index.topk import Candidate, TopK

__all__ = ["CONTENT_DF_CAP", "ContentProbe", "ContentTerm", "fts_quote"]

# Chosen by measurement (docs/benchmarks.md, "The content cap"): 200 and 128 give the same LoCoMo R@1
# with the defaults (R@5 0.935 vs 0.930), while a word in 128–200 of 10,000 windows costs 0.5–1 ms to read.
CONTENT_DF_CAP = 128

_GATE_SQL = "SELECT count(*) FROM (SELECT 1 FROM chunk_fts WHERE chunk_fts MATCH ? LIMIT ?)"
# CROSS JOIN keeps FTS5 as the outer loop: each matching window, then its chunks row by primary key, which
# names the credited handoff, its session's content row, and the handoff's posted date and duration.
_WINDOWS_SQL = (
    "SELECT c.handoff_id, c.id, c.row, c.ts, c.dur, bm25(chunk_fts) FROM chunk_fts"
    " CROSS JOIN chunks AS c ON c.id = chunk_fts.rowid WHERE chunk_fts MATCH ?"
)
_WHOLE_SQL = "SELECT rowid, bm25(content) FROM content WHERE content MATCH ?"


def fts_quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class ContentTerm:
    """The parts of a handoff's content term (bm25 values negated: higher is better)."""

    weight: float
    session_share: float
    session_bm25: float  # its whole text (the best of it and its subagents'), over the query words
    best_session_bm25: float  # the best of any visible handoff
    top_chunks: int
    chunk_bm25: float  # the sum of its best `top_chunks` windows
    best_chunk_bm25: float
    words: tuple[str, ...]  # the query words that counted (in at most CONTENT_DF_CAP windows)
    date_weight: float = 0.0
    date: float = 0.0  # how near its date is to a date the query names, in [0, 1] (0: the query names none)


class ContentProbe:
    """Content matches of one query, read with one statement per word and table, credited to handoffs (a
    subagent's text to its parent) and kept when the handoff is visible: posted, dated within
    [horizon, now]."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        words: list[str],
        *,
        whole: bool,
        now: float,
        horizon: float,
        cap: int = CONTENT_DF_CAP,
    ) -> None:
        self.windows: dict[tuple[str, int], float] = {}
        self.whole: dict[tuple[str, int], float] = {}
        self.where: dict[str, tuple[float, float]] = {}  # visible handoff -> (ts, duration)
        self.counted: list[int] = []  # the words (indexes) under the cap that matched a visible handoff
        execute = conn.execute
        for w, word in enumerate(words):
            q = fts_quote(word)
            gate = execute(_GATE_SQL, (q, cap + 1)).fetchone()
            if gate is None or gate[0] > cap:
                continue
            # A word found in a session's whole text is found in one of its windows too (the windows cut
            # the body at line starts, so no word straddles two): the windows say whose each row is.
            credited: dict[int, str] = {}
            windows, where = self.windows, self.where
            for hid, cid, row, ts, dur, b in execute(_WINDOWS_SQL, (q,)):
                if ts is None or not horizon <= ts <= now:
                    continue
                where[hid] = (ts, dur)
                credited[row] = hid
                windows[(hid, cid)] = windows.get((hid, cid), 0.0) - b
            if credited:
                self.counted.append(w)
            if whole and credited:
                sessions = self.whole
                for row, b in execute(_WHOLE_SQL, (q,)):
                    hid = credited.get(row)
                    if hid is not None:
                        sessions[(hid, row)] = sessions.get((hid, row), 0.0) - b

    def score(
        self,
        search: TopK,
        weight: float,
        share: float,
        top: int,
        words: list[str],
        dates: Sequence[NamedDate] = (),
        date_weight: float = 0.0,
        date_days: float = 7.0,
    ) -> Callable[[Candidate], ContentTerm]:
        """Set the content term of every matched visible handoff that can still make the top k; return the
        explainer of a handoff's term.

        When the query names dates, each of these handoffs also gains weight × date_weight × date match: it
        goes only to handoffs content touched, so an unseen handoff still has no content (the pruning bound).
        A handoff whose content plus every query term at its own recency and duration stays below the k-th
        best content score cannot make the top k; it gets no candidate (and would score no higher if a
        posting list brought it in).
        """
        # Maxima and fsum do not depend on the order the rows came in: no sorting needed for exact sums.
        per_window: dict[str, list[float]] = {}
        for (sid, _), b in self.windows.items():
            bs = per_window.get(sid)
            if bs is None:
                per_window[sid] = [b]
            elif top > 1:
                bs.append(b)
            elif b > bs[0]:  # one window counts: keep the best
                bs[0] = b
        if top > 1:
            per_window = {sid: sorted(bs, reverse=True)[:top] for sid, bs in per_window.items()}
        whole: dict[str, float] = {}
        for (sid, _), b in self.whole.items():
            if b > whole.get(sid, 0.0):
                whole[sid] = b
        # Every visible handoff here has a window or a session row.
        sids = list(self.where)
        no_chunks: list[float] = []
        chunks_of = [per_window.get(sid, no_chunks) for sid in sids]
        cs = [(math.fsum(bs) if top > 1 else bs[0]) if bs else 0.0 for bs in chunks_of]
        ss = [whole.get(sid, 0.0) for sid in sids]
        best_c, best_s = max([0.0, *cs]), max([0.0, *ss])
        named = list(dates) if date_weight > 0 else []
        where = self.where
        ds = [date_match(where[sid][0], named, date_days) for sid in sids] if named else [0.0] * len(sids)
        values = [
            weight
            * (
                share * (s / best_s if best_s > 0 else 0.0)
                + (1.0 - share) * (c / best_c if best_c > 0 else 0.0)
                + date_weight * d
            )
            for c, s, d in zip(cs, ss, ds, strict=True)
        ]
        best = heapq.nlargest(search.k, values)
        floor = best[-1] if len(best) == search.k else 0.0
        terms = math.fsum(search.weights) * (1.0 + 1e-9)  # ≥ any handoff's term sum, rounding included
        lift = terms * search.top_multiplier  # what the terms add at most, at any recency and duration
        out = search.out
        for sid, chunks, session, date, content in zip(sids, chunks_of, ss, ds, values, strict=True):
            if content < floor and content + lift < floor:
                out[sid] = 0
                continue
            ts, dur = where[sid]
            recency, boost = search.multiplier(ts, dur)
            if content < floor and content + terms * recency * boost < floor:
                out[sid] = 0
                continue
            d = search.add(sid, ts, dur, recency, boost)
            d.chunks, d.session_bm25, d.date, d.content = chunks or None, session, date, content
        used = tuple(words[w] for w in self.counted)
        dw = date_weight if named else 0.0

        def term(d: Candidate) -> ContentTerm:
            chunks = math.fsum(d.chunks or ())
            return ContentTerm(weight, share, d.session_bm25, best_s, top, chunks, best_c, used, dw, d.date)

        return term
