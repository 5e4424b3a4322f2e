"""Exact top-k over newest-first posting lists, with score bounds (dynamic pruning).

Every posting list is read newest first. Once every list has been read down to a time frontier F, each
handoff newer than F is fully scored, and nothing older can score more than (Σ weights of unfinished
lists) × recency(age of F) × max duration boost (content is known up front for every handoff it
touches, so an unseen handoff has none). Reading stops when the k-th best score beats that bound;
handoffs seen in rare lists but not yet in common ones are completed by looking their postings up
directly. So a common word costs a few hundred postings, not all of them, and the result is the one
exhaustive scoring gives (tests/memory/index/test_retrieval.py checks it against brute force).

The content term comes first, and its k-th best score is a floor under the k-th best score: lists too
light to lift a handoff over it on their own are only looked up, never read in order (MaxScore), and the
rest are read no further back than the age at which every term together falls below it (read_first).

Runs inside :meth:`memory.storage.database.Database.read`: plain ``sqlite3`` on the read connection, one statement per
step.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DAY_S", "Candidate", "PostingList", "TopK", "age_below", "duration_boost", "recency_factor"]

DAY_S = 86_400.0


def recency_factor(age_days: float, window_days: float) -> float:
    """1 + 1/sqrt(a) within the window, 0.5^((a − W)/7) beyond, with a = max(age, 1 day)."""
    a = max(1.0, age_days)
    return 1.0 + 1.0 / math.sqrt(a) if a <= window_days else 0.5 ** ((a - window_days) / 7.0)


def age_below(factor: float, window_days: float) -> float:
    """An age in days past which recency_factor stays below ``factor`` (recency only falls with age)."""
    if factor > recency_factor(0.0, window_days):
        return 0.0
    if factor > 1.0:  # within the window: 1 + 1/sqrt(a) < factor past 1/(factor − 1)²; beyond it, at most 1
        return min(1.0 / (factor - 1.0) ** 2, window_days)
    if factor <= 0.0:
        return math.inf
    return window_days + 7.0 * math.log2(1.0 / factor)


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
    lazy: bool = False  # never read in order, only looked up for candidates (TopK.read_first)


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
    date: float = 0.0  # how near its date is to a date the query names (memory.index.query_dates)


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
        # The largest recency × duration boost any handoff can have, with a margin that absorbs rounding.
        self.top_multiplier = recency_factor(0.0, window_days) * self.top_boost * (1.0 + 1e-9)
        self.weights = [lst.weight for lst in lists]
        self.docs: dict[str, Candidate] = {}
        self.pending: dict[str, Candidate] = {}  # candidates not yet scored
        self.scored: list[tuple[float, float, str]] = []  # (-score, -ts, session_id)
        self.since = -math.inf  # postings older than this make no new candidates (read_first)
        # Handoffs the content term ruled out (they cannot make the top k): the lists they were seen in, so a
        # list's count of what it has read stays exact without making them candidates again.
        self.out: dict[str, int] = {}
        self._sums: dict[int, float] = {}  # matched-lists mask -> their summed weight

    def _new(self, ts: float, duration_min: float) -> Candidate:
        return Candidate(ts, duration_min, *self.multiplier(ts, duration_min))

    def multiplier(self, ts: float, duration_min: float) -> tuple[float, float]:
        """(recency, duration boost) of a handoff dated ``ts``: what its term weights are multiplied by.

        The same arithmetic as :func:`recency_factor` and :func:`duration_boost` (bit-identical values),
        inline: it runs for every candidate.
        """
        a = (self.now - ts) / DAY_S
        if a < 1.0:
            a = 1.0
        w = self.window
        recency = 1.0 + 1.0 / math.sqrt(a) if a <= w else 0.5 ** ((a - w) / 7.0)
        return recency, 1.0 + 0.1 * math.log((duration_min if duration_min > 0.0 else 0.0) + 1.0)

    def add(self, sid: str, ts: float, duration_min: float, recency: float, boost: float) -> Candidate:
        """A new candidate (``sid`` is not one yet: the content term's, made before any list is read) whose
        :meth:`multiplier` is known."""
        doc = self.docs[sid] = self.pending[sid] = Candidate(ts, duration_min, recency, boost)
        return doc

    def read_first(self) -> None:
        """The newest postings of every list worth reading in order: ``chunk`` of them, or fewer when the
        content term already says how far back a handoff can still make the top k.

        Call it once the content term has made its candidates: the k-th best content score is a floor under
        the k-th best score. Lists whose summed weight, at the best recency and duration boost any handoff
        can have, stays below it cannot lift a handoff that only they match into the top k (MaxScore, as
        search engines call it): they are not read in order, only looked up for the candidates that could
        still make it. The other lists are read no further back than the age at which every list together
        falls below the floor. A query about a rare detail costs a few lookups, not a few hundred postings.
        """
        contents = heapq.nlargest(self.k, (d.content for d in self.docs.values()))
        floor = contents[-1] if len(contents) == self.k else 0.0
        total = 0.0
        for lst in sorted(self.lists, key=lambda lst: lst.weight):
            total += lst.weight
            if total * self.top_multiplier >= floor:
                break
            lst.lazy, lst.lo = True, self.now  # "read down to now": nothing read, every candidate open
        since = self.horizon
        if floor > 0.0 and self.lists:
            # Older than `since`, a handoff scores below the floor unless it has content, and every handoff
            # with content that could make the top k is a candidate already.
            total = sum(self.weights) * self.top_boost * (1.0 + 1e-9)
            since = max(since, self.now - age_below(floor / total, self.window) * DAY_S * (1.0 + 1e-9))
            self.since = since
        for i, lst in enumerate(self.lists):
            if lst.lazy:
                continue
            # A list no longer than a chunk is read whole: one statement, and it is done.
            start = since if lst.df > self.chunk else self.horizon
            rows = self.conn.execute(_FIRST_SQL, (lst.field, lst.term, self.now, start, self.chunk)).fetchall()
            self._add_rows(i, rows)
            if lst.df <= self.chunk or lst.fetched >= lst.df or (len(rows) < self.chunk and start <= self.horizon):
                lst.done, lst.lo = True, -math.inf
            elif len(rows) < self.chunk:  # every posting down to `start` read
                lst.lo, lst.lo_incl = start, True
            else:
                lst.lo = rows[-1][0]

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
        total = self._sums.get(doc.mask)
        if total is None:
            # Summed in list order, sorted by (field, term), so equal inputs give bit-identical scores.
            total, mask, i = 0.0, doc.mask, 0
            while mask:
                if mask & 1:
                    total += self.weights[i]
                mask >>= 1
                i += 1
            self._sums[doc.mask] = total
        return total

    def _add_rows(self, i: int, rows: Iterable[tuple[float, str, float]]) -> None:
        bit, added, docs, pending, since, new = 1 << i, 0, self.docs, self.pending, self.since, self._new
        out = self.out
        for ts, sid, dur in rows:
            d = docs.get(sid)
            if d is None:
                if ts < since:  # too old to make the top k without content (read_first): not a candidate
                    continue
                seen = out.get(sid)
                if seen is not None:  # ruled out by its content term: counted, never a candidate
                    if not seen & bit:
                        out[sid] = seen | bit
                        added += 1
                    continue
                d = docs[sid] = pending[sid] = new(ts, dur)
                d.mask = bit
                added += 1
            elif not d.mask & bit:  # a row at a slab boundary can be read twice
                d.mask |= bit
                added += 1
        self.lists[i].fetched += added

    def _frontier(self) -> tuple[float, bool]:
        active = [lst for lst in self.lists if not lst.done]
        if not active:
            return -math.inf, True
        top = max(lst.lo for lst in active)
        return top, all(lst.lo_incl for lst in active if lst.lo == top)

    def _finish(self, sids: Iterable[str]) -> None:
        """Score handoffs whose postings in every list are all known."""
        pending, scored, base = self.pending, self.scored, self.base
        for sid in sids:
            doc = pending.pop(sid)
            score = base(doc) * doc.recency * doc.boost + doc.content
            if score > 0.0:
                scored.append((-score, -doc.ts, sid))

    def _settle(self) -> list[str] | None:
        """Score what became complete. None: the top k is final; [] read on; else the handoffs to complete."""
        f, f_incl = self._frontier()
        pending, base = self.pending, self.base
        self._finish([sid for sid, d in pending.items() if d.ts > f or (d.ts == f and f_incl)])
        if f == -math.inf:
            return None
        # The k-th best score is at least the k-th best of what is known: exact scores, and for handoffs not
        # yet complete what their matches so far give.
        known = [-neg for neg, _, _ in heapq.nsmallest(self.k, self.scored)]
        known += heapq.nlargest(self.k, [base(d) * d.recency * d.boost + d.content for d in pending.values()])
        kth = heapq.nlargest(self.k, known)[-1] if len(known) >= self.k else 0.0
        # A list read down to lo can only still add to handoffs dated at or before lo. An unseen handoff at
        # ts ≤ F gains at most the weights of the lists with lo ≥ ts (lazy lists: any), times recency at ts:
        # take the worst case over the breakpoints (each list's lo), newest first.
        ordered = sorted((lst for lst in self.lists if not lst.done and not lst.lazy), key=lambda lst: -lst.lo)
        if ordered:
            if kth <= 0.0:
                return []
            unread = sum(lst.weight for lst in self.lists if lst.lazy and not lst.done)
            for lst in ordered:
                unread += lst.weight
                if unread * recency_factor((self.now - lst.lo) / DAY_S, self.window) * self.top_boost >= kth:
                    return []
        # Seen but incomplete, with what they have plus the unfinished lists that can still reach them:
        # rather than read common lists down to them, look their postings up directly.
        blockers = []
        unfinished = [(1 << i, lst.lo, lst.weight) for i, lst in enumerate(self.lists) if not lst.done]
        everything = sum(w for _, _, w in unfinished)  # ≥ any subset's sum: a cheap first test
        for sid, doc in pending.items():
            have = base(doc)
            if (have + everything) * doc.recency * doc.boost + doc.content < kth:
                continue
            extra = 0.0
            for bit, lo, weight in unfinished:
                if lo >= doc.ts and not doc.mask & bit:
                    extra += weight
            if (have + extra) * doc.recency * doc.boost + doc.content >= kth:
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
        self._finish(sids)

    def _slab(self, target_rows: int, *, final: bool) -> None:
        """Read every unfinished list down to a common time T, sized so the densest list yields ~target_rows."""
        active = [lst for lst in self.lists if not lst.done and not lst.lazy]
        top = max(lst.lo for lst in active)
        density = max(lst.fetched / max(self.now - lst.lo, 1.0) for lst in active)
        t = self.horizon if final else max(self.horizon, top - target_rows / max(density, 1e-12))
        for i, lst in enumerate(self.lists):
            if lst.done or lst.lazy or lst.lo < t:
                continue
            sql = _SLAB_SQL.format(op="<" if lst.lo_incl else "<=")
            self._add_rows(i, self.conn.execute(sql, (lst.field, lst.term, t, lst.lo)))
        for lst in active:
            if lst.lo >= t:
                lst.lo, lst.lo_incl = t, True
            if lst.fetched >= lst.df or t <= self.horizon:
                lst.done, lst.lo = True, -math.inf
