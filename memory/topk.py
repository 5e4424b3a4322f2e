"""Exact top-k over newest-first posting lists, with score bounds (dynamic pruning).

Every posting list is read newest first. Once every list has been read down to a time frontier F, each
handoff newer than F is fully scored, and nothing older can score more than (Σ weights of unfinished
lists) × recency(age of F) × max duration boost (content is known up front for every handoff it
touches, so an unseen handoff has none). Reading stops when the k-th best score beats that bound;
handoffs seen in rare lists but not yet in common ones are completed by looking their postings up
directly. So a common word costs a few hundred postings, not all of them, and the result is the one
exhaustive scoring gives (tests/memory/test_retrieval.py checks it against brute force).

Runs inside :meth:`memory.db.Database.read`: plain ``sqlite3`` on the read connection, one statement per
step.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DAY_S", "Candidate", "PostingList", "TopK", "duration_boost", "recency_factor"]

DAY_S = 86_400.0


def recency_factor(age_days: float, window_days: float) -> float:
    """1 + 1/sqrt(a) within the window, 0.5^((a − W)/7) beyond, with a = max(age, 1 day)."""
    a = max(1.0, age_days)
    return 1.0 + 1.0 / math.sqrt(a) if a <= window_days else 0.5 ** ((a - window_days) / 7.0)


def duration_boost(minutes: float) -> float:
    return 1.0 + 0.1 * math.log(max(0.0, minutes) + 1.0)


@dataclass(slots=True)
class PostingList:
    field: int
    term: str
    weight: float
    df: int  # postings dated at or before as_of
    fetched: int = 0
    lo: float = math.inf  # every posting newer than lo has been read ...
    lo_incl: bool = False  # ... and those at lo too when set
    done: bool = False


@dataclass(slots=True)
class Candidate:
    ts: float
    duration_min: float
    recency: float
    boost: float
    mask: int = 0  # bit i: matched list i
    content: float = 0.0
    session_bm25: float = 0.0
    chunks: list[float] | None = None  # -bm25 of its best windows
    date: float = 0.0  # how near its date is to a date the query names (memory.query_dates)


_FIRST_SQL = (
    "SELECT ts, session_id, dur FROM postings WHERE field = ? AND term = ? AND ts <= ? AND ts >= ?"
    " ORDER BY ts DESC, session_id DESC LIMIT ?"
)
_SLAB_SQL = "SELECT ts, session_id, dur FROM postings WHERE field = ? AND term = ? AND ts >= ? AND ts {op} ?"
# One index seek per asked date; a date shared with another handoff also returns that one, skipped.
_POINTS_SQL = "SELECT session_id FROM postings WHERE field = ? AND term = ? AND ts IN ({marks})"
_MAX_ROUNDS = 24


class TopK:
    """The state of one pruned top-k evaluation (see the module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        lists: list[PostingList],
        *,
        now: float,
        horizon: float,
        window_days: float,
        k: int,
        max_duration: float,
        chunk: int,
    ) -> None:
        self.conn, self.lists, self.now, self.horizon = conn, lists, now, horizon
        self.window, self.k, self.chunk = window_days, k, chunk
        self.top_boost = duration_boost(max_duration)
        self.weights = [lst.weight for lst in lists]
        self.docs: dict[str, Candidate] = {}
        self.pending: set[str] = set()
        self.scored: list[tuple[float, float, str]] = []  # (-score, -ts, session_id)

    def doc(self, sid: str, ts: float, duration_min: float) -> Candidate:
        doc = self.docs.get(sid)
        if doc is None:
            age = (self.now - ts) / DAY_S
            doc = Candidate(ts, duration_min, recency_factor(age, self.window), duration_boost(duration_min))
            self.docs[sid] = doc
            self.pending.add(sid)
        return doc

    def read_first(self) -> None:
        """The newest ``chunk`` postings of every list; a list shorter than that is done."""
        for i, lst in enumerate(self.lists):
            rows = self.conn.execute(_FIRST_SQL, (lst.field, lst.term, self.now, self.horizon, self.chunk)).fetchall()
            self._add_rows(i, rows)
            if rows:
                lst.lo = rows[-1][0]
            lst.done = len(rows) < self.chunk or lst.fetched >= lst.df
            if lst.done:
                lst.lo = -math.inf

    def run(self) -> list[tuple[float, str]]:
        """Read, bound and complete until the top k is final; return it as (score, session_id), best first."""
        rounds = 0
        while (todo := self._settle()) is not None:
            if todo:
                self._complete(todo[:500])
            else:
                rounds += 1
                self._slab(self.chunk * 2**rounds, final=rounds > _MAX_ROUNDS)
        return [(-neg, sid) for neg, _, sid in heapq.nsmallest(self.k, self.scored)]

    def base(self, doc: Candidate) -> float:
        # Summed in list order, sorted by (field, term), so equal inputs give bit-identical scores.
        total, mask, i = 0.0, doc.mask, 0
        while mask:
            if mask & 1:
                total += self.weights[i]
            mask >>= 1
            i += 1
        return total

    def _add_rows(self, i: int, rows: Iterable[tuple[float, str, float]]) -> None:
        bit, added = 1 << i, 0
        for ts, sid, dur in rows:
            d = self.doc(sid, ts, dur)
            if not d.mask & bit:  # a row at a slab boundary can be read twice
                d.mask |= bit
                added += 1
        self.lists[i].fetched += added

    def _frontier(self) -> tuple[float, bool]:
        active = [lst for lst in self.lists if not lst.done]
        if not active:
            return -math.inf, True
        top = max(lst.lo for lst in active)
        return top, all(lst.lo_incl for lst in active if lst.lo == top)

    def _finish(self, sid: str) -> None:
        """Score a handoff whose postings in every list are all known."""
        self.pending.discard(sid)
        doc = self.docs[sid]
        score = self.base(doc) * doc.recency * doc.boost + doc.content
        if score > 0.0:
            self.scored.append((-score, -doc.ts, sid))

    def _settle(self) -> list[str] | None:
        """Score what became complete. None: the top k is final; [] read on; else the handoffs to complete."""
        f, f_incl = self._frontier()
        docs = self.docs
        for sid in [s for s in self.pending if docs[s].ts > f or (docs[s].ts == f and f_incl)]:
            self._finish(sid)
        if f == -math.inf:
            return None
        best = heapq.nsmallest(self.k, self.scored)
        if len(best) < self.k:
            return []
        kth = -best[-1][0]
        # A list read down to lo can only still add to handoffs dated at or before lo. An unseen handoff at
        # ts ≤ F gains at most the weights of the lists with lo ≥ ts, times recency at ts: take the worst
        # case over the breakpoints (each list's lo), newest first.
        active = sorted((lst for lst in self.lists if not lst.done), key=lambda lst: -lst.lo)
        unread = 0.0
        for lst in active:
            unread += lst.weight
            if unread * recency_factor((self.now - lst.lo) / DAY_S, self.window) * self.top_boost >= kth:
                return []
        # Seen but incomplete, with what they have plus the unfinished lists that can still reach them:
        # rather than read common lists down to them, look their postings up directly.
        blockers = []
        unfinished = [(1 << i, lst.lo, lst.weight) for i, lst in enumerate(self.lists) if not lst.done]
        everything = sum(w for _, _, w in unfinished)  # ≥ any subset's sum: a cheap first test
        for sid in self.pending:
            doc = docs[sid]
            base = self.base(doc)
            if (base + everything) * doc.recency * doc.boost + doc.content < kth:
                continue
            extra = 0.0
            for bit, lo, weight in unfinished:
                if lo >= doc.ts and not doc.mask & bit:
                    extra += weight
            if (base + extra) * doc.recency * doc.boost + doc.content >= kth:
                blockers.append(sid)
        return blockers or None

    def _complete(self, sids: list[str]) -> None:
        """Random access: look these handoffs up in the unfinished lists that can still hold them (one
        primary-key probe per handoff and list, one statement per list), which makes them complete."""
        docs = self.docs
        for i, lst in enumerate(self.lists):
            if lst.done:
                continue
            want = [sid for sid in sids if docs[sid].ts <= lst.lo and not docs[sid].mask >> i & 1]
            for start in range(0, len(want), 500):
                part = want[start : start + 500]
                sql = _POINTS_SQL.format(marks=",".join("?" * len(part)))
                asked = set(part)
                for (sid,) in self.conn.execute(sql, (lst.field, lst.term, *(docs[s].ts for s in part))):
                    doc = docs[sid] if sid in asked else None
                    if doc is not None and not doc.mask >> i & 1:
                        doc.mask |= 1 << i
                        lst.fetched += 1
            if lst.fetched >= lst.df:
                lst.done, lst.lo = True, -math.inf
        for sid in sids:
            self._finish(sid)

    def _slab(self, target_rows: int, *, final: bool) -> None:
        """Read every unfinished list down to a common time T, sized so the densest list yields ~target_rows."""
        active = [lst for lst in self.lists if not lst.done]
        top = max(lst.lo for lst in active)
        density = max(lst.fetched / max(self.now - lst.lo, 1.0) for lst in active)
        t = self.horizon if final else max(self.horizon, top - target_rows / max(density, 1e-12))
        for i, lst in enumerate(self.lists):
            if lst.done or lst.lo < t:
                continue
            sql = _SLAB_SQL.format(op="<" if lst.lo_incl else "<=")
            self._add_rows(i, self.conn.execute(sql, (lst.field, lst.term, t, lst.lo)))
        for lst in active:
            if lst.lo >= t:
                lst.lo, lst.lo_incl = t, True
            if lst.fetched >= lst.df or t <= self.horizon:
                lst.done, lst.lo = True, -math.inf
