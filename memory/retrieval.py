"""Handoff retrieval: DESIGN.md's scoring, exact, with top-k pruning over newest-first posting lists.

score = (Σ matched term weights) × recency(age) × duration boost + content term, where a term weighs
3.0×IDF in the project index and 2.0×IDF in the keyword index, IDF = ln(N/df), and the content term
is bm25 over what was said (whole session and windows of turns), not decayed. docs/retrieval.md has the
whole formula, the pruning argument and the measured quality and latency.

Pruning: every posting list is read newest first. Once every list has been read down to a time
frontier F, each handoff newer than F is fully scored, and nothing older can score more than
(Σ weights of unfinished lists) × recency(age of F) × max duration boost (content is known up front for
every handoff it touches, so an unseen handoff has none). Reading stops when the k-th
best score beats that bound (handoffs seen in rare lists but not yet in common ones are completed by
looking their postings up directly), so a common word costs a few hundred postings, not all of them,
and the result is the one exhaustive scoring gives.
"""

from __future__ import annotations

import heapq
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import aiosqlite

from memory.index import FIELD_DOC, FIELD_KEYWORD, FIELD_PROJECT
from memory.tokenize import project_terms, query_terms, tokenize

__all__ = [
    "CONTENT_DF_CAP",
    "DEFAULT_CONTENT_WEIGHT",
    "DEFAULT_K",
    "DEFAULT_SESSION_SHARE",
    "DEFAULT_TOP_CHUNKS",
    "FIELD_WEIGHTS",
    "ContentHit",
    "ContentTerm",
    "Explanation",
    "MatchedTerm",
    "ScoredHandoff",
    "duration_boost",
    "recency_factor",
    "retrieve",
    "search_content",
]

DAY_S = 86_400.0
DEFAULT_K = 5
FIELD_WEIGHTS: Mapping[int, float] = {FIELD_PROJECT: 3.0, FIELD_KEYWORD: 2.0}
_FIELD_NAMES = {FIELD_PROJECT: "project", FIELD_KEYWORD: "keyword"}
# The content term (docs/retrieval.md, "Content term"): weight × (share × session bm25 / best + (1 − share)
# × sum of the best TOP_CHUNKS windows' bm25 / best). Values chosen on LoCoMo, confirmed leave-one-out.
DEFAULT_CONTENT_WEIGHT = 50.0
DEFAULT_SESSION_SHARE = 0.5
DEFAULT_TOP_CHUNKS = 1
# A query word counts for content only if it occurs in at most this many windows: a bound on the work per
# word (bm25's own IDF does the weighting); above LoCoMo's largest window count, so it never bites there.
CONTENT_DF_CAP = 200
_MAX_CONTENT_WORDS = 16
FIRST_CHUNK = 64  # postings read per list before switching to time slabs
_MAX_QUERY_TERMS = 32


@dataclass(frozen=True, slots=True)
class MatchedTerm:
    field: str  # "project" | "keyword"
    term: str
    df: int
    idf: float
    weight: float  # field weight × idf


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


@dataclass(frozen=True, slots=True)
class Explanation:
    matched: tuple[MatchedTerm, ...]
    content: float  # the content term, added after recency and duration
    recency: float
    duration: float  # the duration boost
    age_days: float
    duration_min: float
    n_indexed: int
    fallback: bool  # no query or no match: a most-recent handoff, score 0
    content_term: ContentTerm | None = None


@dataclass(frozen=True, slots=True)
class ScoredHandoff:
    session_id: str
    score: float
    ts: float
    date: str
    headline: str
    projects: tuple[str, ...]
    keywords: tuple[str, ...]
    kind: str
    explanation: Explanation


@dataclass(frozen=True, slots=True)
class ContentHit:
    session_id: str
    kind: str
    parent_id: str  # the parent session of a subagent run, "" otherwise
    snippet: str
    score: float  # -bm25: higher is better


def recency_factor(age_days: float, window_days: float) -> float:
    """1 + 1/sqrt(a) within the window, 0.5^((a − W)/7) beyond, with a = max(age, 1 day)."""
    a = max(1.0, age_days)
    return 1.0 + 1.0 / math.sqrt(a) if a <= window_days else 0.5 ** ((a - window_days) / 7.0)


def duration_boost(minutes: float) -> float:
    return 1.0 + 0.1 * math.log(max(0.0, minutes) + 1.0)


def _epoch(as_of: datetime | None) -> float:
    if as_of is None:
        return time.time()
    return (as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)).timestamp()


def _fts_quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


@dataclass(slots=True)
class _List:
    field: int
    term: str
    weight: float
    df: int  # postings dated at or before as_of
    fetched: int = 0
    lo: float = math.inf  # every posting newer than lo has been read ...
    lo_incl: bool = False  # ... and those at lo too when set
    done: bool = False


@dataclass(slots=True)
class _Doc:
    ts: float
    duration_min: float
    recency: float
    boost: float
    mask: int = 0  # bit i: matched list i
    content: float = 0.0
    session_bm25: float = 0.0
    chunks: list[float] | None = None  # -bm25 of its matching windows


class _Search:
    """The state of one pruned top-k evaluation (see the module docstring)."""

    def __init__(self, lists: list[_List], now: float, horizon: float, window_days: float, k: int) -> None:
        self.lists, self.now, self.horizon, self.window, self.k = lists, now, horizon, window_days, k
        self.weights = [lst.weight for lst in lists]
        self.docs: dict[str, _Doc] = {}
        self.pending: set[str] = set()
        self.scored: list[tuple[float, float, str]] = []  # (-score, -ts, session_id)

    def doc(self, sid: str, ts: float, duration_min: float) -> _Doc:
        doc = self.docs.get(sid)
        if doc is None:
            age = (self.now - ts) / DAY_S
            doc = _Doc(ts, duration_min, recency_factor(age, self.window), duration_boost(duration_min))
            self.docs[sid] = doc
            self.pending.add(sid)
        return doc

    def add(self, i: int, ts: float, sid: str, duration_min: float) -> None:
        doc = self.doc(sid, ts, duration_min)
        if not doc.mask >> i & 1:  # a row at a chunk boundary can be read twice
            doc.mask |= 1 << i
            self.lists[i].fetched += 1

    def base(self, doc: _Doc) -> float:
        # Summed in list order, sorted by (field, term), so equal inputs give bit-identical scores.
        total, mask, i = 0.0, doc.mask, 0
        while mask:
            if mask & 1:
                total += self.weights[i]
            mask >>= 1
            i += 1
        return total

    def frontier(self) -> tuple[float, bool]:
        active = [lst for lst in self.lists if not lst.done]
        if not active:
            return -math.inf, True
        top = max(lst.lo for lst in active)
        return top, all(lst.lo_incl for lst in active if lst.lo == top)

    def finish(self, sid: str) -> None:
        """Score a handoff whose postings in every list are all known."""
        self.pending.discard(sid)
        doc = self.docs[sid]
        score = self.base(doc) * doc.recency * doc.boost + doc.content
        if score > 0.0:
            self.scored.append((-score, -doc.ts, sid))

    def settle(self, max_duration: float) -> list[str] | None:
        """Score what became complete. None: the top k is final; [] read on; else the handoffs to look up."""
        f, f_incl = self.frontier()
        docs = self.docs
        for sid in [s for s in self.pending if docs[s].ts > f or (docs[s].ts == f and f_incl)]:
            self.finish(sid)
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
        top_boost, unread = duration_boost(max_duration), 0.0
        for lst in active:
            unread += lst.weight
            if unread * recency_factor((self.now - lst.lo) / DAY_S, self.window) * top_boost >= kth:
                return []
        # Seen but incomplete, with what they have plus the unfinished lists that can still reach them:
        # rather than read common lists down to them, look their postings up directly.
        blockers = []
        for sid in self.pending:
            doc = docs[sid]
            extra = sum(
                lst.weight
                for i, lst in enumerate(self.lists)
                if not lst.done and lst.lo >= doc.ts and not doc.mask >> i & 1
            )
            if (self.base(doc) + extra) * doc.recency * doc.boost + doc.content >= kth:
                blockers.append(sid)
        return blockers or None

    def top(self) -> list[tuple[float, str]]:
        return [(-neg, sid) for neg, _, sid in heapq.nsmallest(self.k, self.scored)]


_POSTINGS_SQL = (
    "SELECT {i}, p.ts, p.session_id, COALESCE(h.duration_min, 0.0), NULL, NULL{pad} FROM "
    "(SELECT ts, session_id FROM postings WHERE field = ? AND term = ? AND ts <= ? AND ts >= ? {extra}"
    " ORDER BY ts DESC, session_id DESC {limit}) AS p LEFT JOIN handoffs AS h ON h.session_id = p.session_id"
)


async def retrieve(
    conn: aiosqlite.Connection,
    query: str,
    *,
    project: str | None = None,
    days_back: float | None = None,
    max_k: int = DEFAULT_K,
    as_of: datetime | None = None,
    window_days: float = 14.0,
    content_weight: float = DEFAULT_CONTENT_WEIGHT,
    session_share: float = DEFAULT_SESSION_SHARE,
    top_chunks: int = DEFAULT_TOP_CHUNKS,
    chunk_rows: int = FIRST_CHUNK,
) -> list[ScoredHandoff]:
    """The top ``max_k`` handoffs for ``query`` (``project``'s terms join the query).

    Any ``max_k`` is served (evaluation asks for 10); grounding caps it at five
    (:data:`memory.grounding.MAX_GROUNDING`). Handoffs dated after ``as_of`` (default now; naive
    means UTC) are invisible, and IDF is taken over the handoffs visible then. ``days_back`` drops
    older handoffs. No query terms or no match: the most recent handoffs within ``days_back``, else
    within the window.
    """
    k = max_k
    if k <= 0:
        return []
    now = _epoch(as_of)
    horizon = now - days_back * DAY_S if days_back is not None else -math.inf
    terms = list(dict.fromkeys([*query_terms(query), *(project_terms(project) if project else [])]))
    terms = terms[:_MAX_QUERY_TERMS]
    words = [t for t in dict.fromkeys(tokenize(query)) if "-" not in t][:_MAX_CONTENT_WORDS]
    words = words if content_weight > 0 else []
    share = min(1.0, max(0.0, session_share))
    pairs = [(f, t) for f in (FIELD_PROJECT, FIELD_KEYWORD) for t in terms]
    chunk = max(1, chunk_rows)

    # One round trip: N, df, postings after as_of, the first chunk of every list, content candidates
    # and the no-match fallback. Selective queries need nothing more but the final row fetch.
    since = horizon if days_back is not None else now - window_days * DAY_S
    sql, args = _first_round_sql(terms, words, share > 0, pairs, now, horizon, since, chunk, k)
    meta: dict[str, str] = {}
    df: dict[tuple[int, str], int] = {}
    after: dict[tuple[int, str], int] = {}
    first: list[tuple[int, float, str, float]] = []
    recent: list[tuple[str, float, float]] = []
    content = _Content()
    hits: list[tuple[str, str, object, float]] = []
    # Rows of handoffs the content probe touched come with what the answer shows (the handoffs row is read
    # for their duration anyway), which saves the final fetch when they are the top k.
    shown: dict[str, tuple[object, ...]] = {}
    for tag, a, b, c, *rest in await conn.execute_fetchall(sql, args):
        if tag == "m":
            meta[str(a)] = str(b)
        elif tag == "d":
            df[(int(a), str(b))] = int(c)
        elif tag == "a":
            after[(int(a), str(b))] = int(c)
        elif tag == "r":
            recent.append((str(a), float(b), float(c)))
        elif tag == "v":
            content.where[str(a)] = (float(b), float(c))
            if rest[0] is not None:
                shown[str(a)] = (a, *rest)
        elif isinstance(tag, str):
            hits.append((tag, str(a), b, float(c)))
        else:
            first.append((int(tag), float(a), str(b), float(c)))
    for tag, sid, key, bm25 in hits:
        if sid in content.where:
            content.add(tag, sid, key, bm25)
    n = int(meta.get("indexed_n", "0")) - after.get((FIELD_DOC, ""), 0)
    max_duration = float(meta.get("max_duration_min", "0"))

    # Terms in every visible handoff (IDF 0) or in none drop out; the rest sorted for a canonical sum.
    kept = sorted(
        (f, t, i, d) for i, (f, t) in enumerate(pairs) if 0 < (d := df.get((f, t), 0) - after.get((f, t), 0)) < n
    )
    lists = [_List(f, t, FIELD_WEIGHTS[f] * math.log(n / d), d) for f, t, _, d in kept]
    slot = {i: j for j, (_, _, i, _) in enumerate(kept)}

    search = _Search(lists, now, horizon, window_days, k)
    for i, ts, sid, dur in first:
        if i in slot:
            search.add(slot[i], ts, sid, dur)
            lst = lists[slot[i]]
            lst.lo = min(lst.lo, ts)
    for lst in lists:
        lst.done = lst.fetched < chunk or lst.fetched >= lst.df
        if lst.done:
            lst.lo = -math.inf

    term = content.score(search, content_weight, share, max(1, top_chunks), words)

    rounds = 0
    while (todo := search.settle(max_duration)) is not None:
        if todo:
            await _lookup(conn, search, todo[:500])
        else:
            rounds += 1
            await _slab(conn, search, chunk * 2**rounds, final=rounds > 24)

    ranked = search.top()
    if not ranked:
        return await _hydrate(conn, [_recent(sid, ts, dur, now, window_days, n) for sid, ts, dur in recent], {})
    picked = []
    for score, sid in ranked:
        doc = search.docs[sid]
        matched = tuple(
            MatchedTerm(_FIELD_NAMES[lst.field], lst.term, lst.df, lst.weight / FIELD_WEIGHTS[lst.field], lst.weight)
            for i, lst in enumerate(lists)
            if doc.mask >> i & 1
        )
        age = (now - doc.ts) / DAY_S
        parts = term(doc) if doc.content else None
        expl = Explanation(matched, doc.content, doc.recency, doc.boost, age, doc.duration_min, n, False, parts)
        picked.append((sid, doc.ts, score, expl))
    return await _hydrate(conn, picked, shown)


def _first_round_sql(
    terms: list[str],
    words: list[str],
    whole: bool,
    pairs: list[tuple[int, str]],
    now: float,
    horizon: float,
    since: float,
    chunk: int,
    k: int,
) -> tuple[str, list[object]]:
    args: list[object] = []
    prefix = ""
    if words:
        # Content rows are gathered once (MATERIALIZED) and read twice: as they are, and for the distinct
        # handoffs they touch, whose date and duration are looked up once each rather than once per row.
        gates, probes = [], []
        for w, word in enumerate(words):
            q = _fts_quote(word)
            gates.append(_GATE)
            args += [w, q, CONTENT_DF_CAP + 1, CONTENT_DF_CAP]
        for w, word in enumerate(words):
            q = _fts_quote(word)
            probes.append(_CHUNK_SQL)
            args += [f"w{w}", w, q]
            if whole:
                probes.append(_WHOLE_SQL)
                args += [f"s{w}", w, q]
        prefix = (
            f"WITH g(w) AS MATERIALIZED ({' UNION ALL '.join(gates)}),"
            f" c(tag, sid, key, b) AS MATERIALIZED ({' UNION ALL '.join(probes)}) "
        )
    parts = [
        "SELECT 'm', key, value, NULL, NULL, NULL, NULL, NULL, NULL FROM meta"
        " WHERE key IN ('indexed_n', 'max_duration_min')",
        "SELECT 'r', p.session_id, p.ts, COALESCE(h.duration_min, 0.0), NULL, NULL, NULL, NULL, NULL FROM"
        " (SELECT ts, session_id FROM postings WHERE field = 2 AND term = '' AND ts <= ? AND ts >= ?"
        " ORDER BY ts DESC, session_id DESC LIMIT ?) AS p LEFT JOIN handoffs AS h ON h.session_id = p.session_id",
    ]
    args += [now, since, k]
    marks = ",".join("?" * len(terms))
    parts.append(
        "SELECT 'd', field, term, df, NULL, NULL, NULL, NULL, NULL FROM term_df"
        f" WHERE field IN (0, 1) AND term IN ({marks})"
    )
    # Postings dated after as_of, to take them out of N and df (an empty range when as_of is now).
    parts.append(
        "SELECT 'a', field, term, count(*), NULL, NULL, NULL, NULL, NULL FROM postings WHERE field IN (0, 1, 2)"
        f" AND term IN (?{',?' * len(terms)}) AND ts > ? GROUP BY field, term"
    )
    args += [*terms, "", *terms, now]
    if words:
        parts += ["SELECT tag, sid, key, b, NULL, NULL, NULL, NULL, NULL FROM c", _VISIBLE]
        args += [now, horizon]
    for i, (f, t) in enumerate(pairs):
        parts.append(_POSTINGS_SQL.format(i=i, extra="", limit="LIMIT ?", pad=", NULL, NULL, NULL"))
        args += [f, t, now, horizon, chunk]
    return prefix + " UNION ALL ".join(parts), args


# A word counts for content only when it is in at most CONTENT_DF_CAP windows: counting stops at CAP + 1.
# Each probe's CROSS JOIN keeps the gate as the outer loop, so a common word's rows are never read.
_GATE = "SELECT ? WHERE (SELECT count(*) FROM (SELECT 1 FROM chunk_fts WHERE chunk_fts MATCH ? LIMIT ?)) <= ?"
_CHUNK_SQL = (
    "SELECT ?, chunks.handoff_id, chunks.id, f.b FROM (SELECT 1 FROM g WHERE w = ?) CROSS JOIN"
    " (SELECT chunk_fts.rowid AS id, bm25(chunk_fts) AS b FROM chunk_fts WHERE chunk_fts MATCH ?) AS f"
    " JOIN chunks ON chunks.id = f.id"
)
_WHOLE_SQL = (
    "SELECT ?, CASE WHEN kind = 'subagent' AND parent_id <> '' THEN parent_id ELSE content.session_id END,"
    " content.session_id, bm25(content) FROM (SELECT 1 FROM g WHERE w = ?) CROSS JOIN content"
    " WHERE content MATCH ?"
)
# The handoffs the content rows touch that are visible (posted, within as_of and days_back).
_VISIBLE = (
    "SELECT 'v', v.sid, p.ts, COALESCE(h.duration_min, 0.0), h.date, h.headline, h.projects, h.keywords, h.kind"
    " FROM (SELECT DISTINCT sid FROM c) AS v"
    " JOIN postings AS p ON p.field = 2 AND p.term = '' AND p.session_id = v.sid"
    " LEFT JOIN handoffs AS h ON h.session_id = v.sid WHERE p.ts <= ? AND p.ts >= ?"
)


class _Content:
    """Content matches of one query: bm25 per window and per whole session, summed over the query words
    (FTS5's bm25 of an OR query is that sum), then credited to handoffs (a subagent's to its parent)."""

    def __init__(self) -> None:
        self.where: dict[str, tuple[float, float]] = {}  # visible handoff -> (ts, duration)
        self.windows: dict[tuple[str, int], float] = {}
        self.whole: dict[tuple[str, str], float] = {}
        self.words: set[int] = set()

    def add(self, tag: str, sid: str, key: object, bm25: float) -> None:
        self.words.add(int(tag[1:]))
        if tag[0] == "w":
            self.windows[(sid, int(str(key)))] = self.windows.get((sid, int(str(key))), 0.0) - bm25
        else:
            self.whole[(sid, str(key))] = self.whole.get((sid, str(key)), 0.0) - bm25

    def score(
        self, search: _Search, weight: float, share: float, top: int, words: list[str]
    ) -> Callable[[_Doc], ContentTerm]:
        """Set every matched handoff's content term; return the explainer of a handoff's term."""
        per_window: dict[str, list[float]] = {}
        for (sid, _), b in sorted(self.windows.items()):
            per_window.setdefault(sid, []).append(b)
        whole: dict[str, float] = {}
        for (sid, _), b in sorted(self.whole.items()):
            whole[sid] = max(whole.get(sid, 0.0), b)
        # Every visible handoff here has a window or a session row: one _Doc each, its parts set once.
        parts = []
        for sid, (ts, dur) in self.where.items():
            d = search.doc(sid, ts, dur)
            bs = per_window.get(sid)
            d.chunks = sorted(bs, reverse=True)[:top] if bs else None
            d.session_bm25 = whole.get(sid, 0.0)
            parts.append((d, math.fsum(d.chunks or ())))
        best_c = max((c for _, c in parts), default=0.0)
        best_s = max((d.session_bm25 for d, _ in parts), default=0.0)
        for d, chunks in parts:
            c = chunks / best_c if best_c > 0 else 0.0
            s = d.session_bm25 / best_s if best_s > 0 else 0.0
            d.content = weight * (share * s + (1.0 - share) * c)
        used = tuple(words[w] for w in sorted(self.words))

        def term(d: _Doc) -> ContentTerm:
            return ContentTerm(weight, share, d.session_bm25, best_s, top, math.fsum(d.chunks or ()), best_c, used)

        return term


async def _lookup(conn: aiosqlite.Connection, search: _Search, sids: list[str]) -> None:
    """Random access: fetch these handoffs' postings in the query's lists, which completes them."""
    slot = {(lst.field, lst.term): i for i, lst in enumerate(search.lists)}
    terms = sorted({t for _, t in slot})
    rows = await conn.execute_fetchall(
        f"SELECT session_id, field, term FROM postings WHERE session_id IN ({','.join('?' * len(sids))})"
        f" AND field IN (0, 1) AND term IN ({','.join('?' * len(terms))})",
        [*sids, *terms],
    )
    for sid, f, t in rows:
        i = slot.get((int(f), str(t)))
        doc = search.docs[str(sid)]
        if i is not None and not doc.mask >> i & 1:
            doc.mask |= 1 << i
            search.lists[i].fetched += 1
    for sid in sids:
        search.finish(sid)
    for lst in search.lists:
        if not lst.done and lst.fetched >= lst.df:
            lst.done, lst.lo = True, -math.inf


async def _slab(conn: aiosqlite.Connection, search: _Search, target_rows: int, *, final: bool) -> None:
    """Read every unfinished list down to a common time T, sized so the densest list yields ~target_rows."""
    active = [lst for lst in search.lists if not lst.done]
    top = max(lst.lo for lst in active)
    density = max(lst.fetched / max(search.now - lst.lo, 1.0) for lst in active)
    t = search.horizon if final else max(search.horizon, top - target_rows / max(density, 1e-12))
    parts: list[str] = []
    args: list[object] = []
    for i, lst in enumerate(search.lists):
        if lst.done or lst.lo < t:
            continue
        upper = "AND ts < ?" if lst.lo_incl else "AND ts <= ?"
        parts.append(_POSTINGS_SQL.format(i=i, extra=upper, limit="", pad=""))
        args += [lst.field, lst.term, search.now, t, lst.lo]
    rows = await conn.execute_fetchall(" UNION ALL ".join(parts), args) if parts else []
    for i, ts, sid, dur, _, _ in rows:
        search.add(int(i), float(ts), str(sid), float(dur))
    for lst in active:
        if lst.lo >= t:
            lst.lo, lst.lo_incl = t, True
        if lst.fetched >= lst.df or t <= search.horizon:
            lst.done, lst.lo = True, -math.inf


def _recent(
    sid: str, ts: float, dur: float, now: float, window: float, n: int
) -> tuple[str, float, float, Explanation]:
    age = (now - ts) / DAY_S
    return sid, ts, 0.0, Explanation((), 0.0, recency_factor(age, window), duration_boost(dur), age, dur, n, True)


async def _hydrate(
    conn: aiosqlite.Connection,
    picked: list[tuple[str, float, float, Explanation]],
    shown: dict[str, tuple[object, ...]],
) -> list[ScoredHandoff]:
    """The answer's rows: (session_id, date, headline, projects, keywords, kind) from ``shown``, else read."""
    missing = [sid for sid, *_ in picked if sid not in shown]
    found = dict(shown)
    if missing:
        rows = await conn.execute_fetchall(
            "SELECT session_id, date, headline, projects, keywords, kind FROM handoffs"
            f" WHERE session_id IN ({','.join('?' * len(missing))})",
            missing,
        )
        found.update((str(r[0]), tuple(r)) for r in rows)
    out = []
    for sid, ts, score, expl in picked:
        _, date, headline, projects, keywords, kind = found.get(sid, (sid, "", "", "[]", "[]", "main"))
        out.append(
            ScoredHandoff(
                sid, score, ts, str(date), str(headline), _json_list(projects), _json_list(keywords), str(kind), expl
            )
        )
    return out


def _json_list(raw: object) -> tuple[str, ...]:
    try:
        value = json.loads(str(raw))
    except ValueError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


async def search_content(conn: aiosqlite.Connection, query: str, limit: int = 10) -> list[ContentHit]:
    """Detail recall over all session text, subagents included; any query text is safe (tokens are quoted)."""
    tokens = list(dict.fromkeys(tokenize(query)))[:_MAX_QUERY_TERMS]
    if not tokens or limit <= 0:
        return []
    rows = await conn.execute_fetchall(
        "SELECT session_id, kind, parent_id, snippet(content, 3, '[', ']', '…', 16), bm25(content)"
        " FROM content WHERE content MATCH ? ORDER BY rank LIMIT ?",
        (" OR ".join(map(_fts_quote, tokens)), limit),
    )
    return [ContentHit(str(s), str(k), str(p), str(snip), -float(b)) for s, k, p, snip, b in rows]
