"""Handoff retrieval: exact scoring (docs/retrieval.md, "Score") with top-k pruning over newest-first posting lists.

score = (Σ matched term weights) × recency(age) × duration boost + content term, where a term weighs
3.0×IDF in the project index and 2.0×IDF in the keyword index, IDF = ln(N/df), and the content term
is bm25 over what was said (whole session and windows of turns), not decayed. docs/retrieval.md has the
whole formula, the pruning argument and the measured quality and latency.

A query is one call of :meth:`memory.storage.database.Database.read`: every statement it makes (N and df, the first
postings of each list, the content probes, the pruning rounds, the rows shown) runs back to back on the
read connection, in one read transaction, so the answer is one snapshot and no statement waits for a
thread hop. :mod:`memory.index.topk` holds the pruning, :mod:`memory.index.content_term` the content term.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from memory.index.branch_pref import BRANCH_POOL, BranchNote, prefer_branch
from memory.index.content_term import CONTENT_DF_CAP, ContentProbe, ContentTerm, fts_quote
from memory.index.postings import FIELD_DOC, FIELD_KEYWORD, FIELD_PROJECT
from memory.index.query_dates import NamedDate, query_dates
from memory.index.snippets import SNIPPET_SQL_ARGS, SNIPPET_TEXT_MAX, long_snippets
from memory.index.tokenize import project_terms, query_terms, tokenize
from memory.index.topk import DAY_S, PostingList, TopK, duration_boost, recency_factor
from memory.redact.privacy import Privacy, hidden_sessions
from memory.storage.database import Database

__all__ = [
    "CLOCK_SKEW_S",
    "CONTENT_DF_CAP",
    "DEFAULT_CONTENT_WEIGHT",
    "DEFAULT_DATE_DAYS",
    "DEFAULT_DATE_WEIGHT",
    "DEFAULT_K",
    "DEFAULT_SESSION_SHARE",
    "DEFAULT_TOP_CHUNKS",
    "FIELD_WEIGHTS",
    "ContentHit",
    "ContentTerm",
    "Explanation",
    "MatchedTerm",
    "ScoredHandoff",
    "check_days_back",
    "duration_boost",
    "recency_factor",
    "retrieve",
    "search_content",
]

DEFAULT_K = 5
FIELD_WEIGHTS = {FIELD_PROJECT: 3.0, FIELD_KEYWORD: 2.0}
_FIELD_NAMES = {FIELD_PROJECT: "project", FIELD_KEYWORD: "keyword"}
# The content term (docs/retrieval.md, "Content term"): weight × (share × session bm25 / best + (1 − share)
# × sum of the best TOP_CHUNKS windows' bm25 / best). Values chosen on LoCoMo, confirmed leave-one-out.
DEFAULT_CONTENT_WEIGHT = 50.0
DEFAULT_SESSION_SHARE = 0.5
DEFAULT_TOP_CHUNKS = 1
# The date term (docs/retrieval.md, "Date term"): a query naming a date ("on 3 June, 2023", "in May") adds
# weight × DATE_WEIGHT × exp(−d / DATE_DAYS) to each handoff content touched, d = days from its date to that
# day or month. 1.0: a session of that date with any content match ranks with the best content match; a
# week: "on 3 June" also finds the session of 5 June. Chosen on LoCoMo, confirmed leave-one-out.
DEFAULT_DATE_WEIGHT = 1.0
DEFAULT_DATE_DAYS = 7.0
# Handoffs come from every machine that shares this memory, each dated by that machine's clock: one that
# runs a few minutes ahead must not hide its newest handoff from the others until their clocks catch up.
# Only for "now" (no ``as_of``); an explicit ``as_of`` is exact.
CLOCK_SKEW_S = 600.0
_MAX_CONTENT_WORDS = 16
FIRST_CHUNK = 64  # postings read per list before switching to time slabs
_MAX_QUERY_TERMS = 32
_WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer calls a token: letters and digits


@dataclass(frozen=True, slots=True)
class MatchedTerm:
    field: str  # "project" | "keyword"
    term: str
    df: int
    idf: float
    weight: float  # field weight × idf


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
    branch_note: BranchNote | None = None  # set when a branch was preferred (memory.index.branch_pref)

    def as_json(self, explain: bool = False) -> dict[str, Any]:
        """One grounding result as `macupos memory get --json` and the service's `/v1/get` write it."""
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "score": round(self.score, 6),
            "date": self.date,
            "headline": self.headline,
            "projects": list(self.projects),
            "kind": str(self.kind),
        }
        if self.branch_note is not None:
            out["branch_preference"] = asdict(self.branch_note)
        if explain:
            out["explain"] = asdict(self.explanation)
        return out


@dataclass(frozen=True, slots=True)
class ContentHit:
    session_id: str
    kind: str
    parent_id: str  # the parent session of a subagent run, "" otherwise
    snippet: str
    score: float  # -bm25: higher is better


@dataclass(frozen=True, slots=True)
class _Query:
    terms: tuple[str, ...]
    words: tuple[str, ...]
    now: float
    horizon: float
    days_back: float | None
    k: int
    window_days: float
    content_weight: float
    session_share: float
    top_chunks: int
    chunk: int
    cap: int
    dates: tuple[NamedDate, ...]
    date_weight: float
    date_days: float


def check_days_back(value: float) -> float:
    """A look-back in days: a positive number (``inf`` for all). ValueError otherwise, NaN included: a
    look-back of zero or less would silently answer nothing."""
    if not value > 0:  # NaN fails this too
        raise ValueError(f"days_back must be a positive number of days, not {value!r}")
    return value


def _epoch(as_of: datetime | None) -> float:
    if as_of is None:
        return time.time() + CLOCK_SKEW_S
    return (as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)).timestamp()


async def retrieve(
    db: Database,
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
    content_df_cap: int = CONTENT_DF_CAP,
    date_weight: float = DEFAULT_DATE_WEIGHT,
    date_days: float = DEFAULT_DATE_DAYS,
    hidden: Privacy | None = None,
    branch: str | None = None,
) -> list[ScoredHandoff]:
    """The top ``max_k`` handoffs for ``query`` (``project``'s terms join the query), leaving out those of
    the private projects ``hidden`` names (the next best take their places; scores are unchanged).

    Any ``max_k`` is served (evaluation asks for 10); grounding caps it at five
    (:data:`memory.grounding.MAX_GROUNDING`). Handoffs dated after ``as_of`` (default now, and
    :data:`CLOCK_SKEW_S` more for a clock ahead of this one; naive means UTC) are invisible, and IDF is
    taken over the handoffs visible then. ``days_back`` drops
    older handoffs. No query terms or no match: the most recent handoffs within ``days_back``, else
    within the window. ``branch``: of the ``BRANCH_POOL × max_k`` best, its sessions' first
    (:mod:`memory.index.branch_pref`); None or "" changes nothing.
    """
    if max_k <= 0:
        return []
    if days_back is not None:
        check_days_back(days_back)
    now = _epoch(as_of)
    terms = list(dict.fromkeys([*query_terms(query), *(project_terms(project) if project else [])]))
    words = [t for t in dict.fromkeys(tokenize(query)) if "-" not in t][:_MAX_CONTENT_WORDS]
    q = _Query(
        terms=tuple(terms[:_MAX_QUERY_TERMS]),
        words=tuple(words) if content_weight > 0 else (),
        now=now,
        horizon=now - days_back * DAY_S if days_back is not None else -math.inf,
        days_back=days_back,
        k=BRANCH_POOL * max_k if branch else max_k,
        window_days=window_days,
        content_weight=content_weight,
        session_share=min(1.0, max(0.0, session_share)),
        top_chunks=max(1, top_chunks),
        chunk=max(1, chunk_rows),
        cap=max(0, content_df_cap),
        dates=tuple(query_dates(query)) if content_weight > 0 and date_weight > 0 else (),
        date_weight=max(0.0, date_weight),
        date_days=max(0.0, date_days),
    )
    if branch:
        return await db.read(functools.partial(_evaluate_branch, q=q, hidden=hidden, branch=branch, k=max_k))
    if hidden:
        return await db.read(functools.partial(_evaluate_visible, q=q, hidden=hidden))
    return await db.read(functools.partial(_evaluate, q=q))


def _evaluate_branch(
    conn: sqlite3.Connection, q: _Query, hidden: Privacy | None, branch: str, k: int
) -> list[ScoredHandoff]:
    """The ``q.k`` best (visible) handoffs, ``branch``'s first, cut to ``k`` (memory.index.branch_pref)."""
    found = _evaluate_visible(conn, q, hidden) if hidden else _evaluate(conn, q)
    return prefer_branch(conn, found, branch, k)


def _evaluate_visible(conn: sqlite3.Connection, q: _Query, hidden: Privacy) -> list[ScoredHandoff]:
    """``_evaluate`` without the hidden handoffs, still ``q.k`` of them: a deeper top-k until enough are
    left or there is no more (the ranking is exact, so the first ones are the same at any depth)."""
    k = q.k
    while True:
        found = _evaluate(conn, replace(q, k=k))
        hide = hidden_sessions(conn, hidden, [r.session_id for r in found])
        kept = [r for r in found if r.session_id not in hide]
        if len(kept) >= q.k or len(found) < k:
            return kept[: q.k]
        k *= 4


# N, the longest duration and the newest posting's date, in one statement.
_META_SQL = (
    "SELECT (SELECT value FROM meta WHERE key = 'indexed_n'), (SELECT value FROM meta WHERE key = 'max_duration_min'),"
    " (SELECT ts FROM postings WHERE field = 2 AND term = '' ORDER BY ts DESC LIMIT 1)"
)
_RECENT_SQL = (
    "SELECT ts, session_id, dur FROM postings WHERE field = 2 AND term = '' AND ts <= ? AND ts >= ?"
    " ORDER BY ts DESC, session_id DESC LIMIT ?"
)
_SHOWN_SQL = "SELECT session_id, date, headline, projects, keywords, kind FROM handoffs WHERE session_id IN ({marks})"


def _evaluate(conn: sqlite3.Connection, q: _Query) -> list[ScoredHandoff]:
    indexed_n, longest, newest = conn.execute(_META_SQL).fetchone()
    n, max_duration = int(indexed_n or 0), float(longest or 0)
    pairs = [(f, t) for f in (FIELD_PROJECT, FIELD_KEYWORD) for t in q.terms]
    df: dict[tuple[int, str], int] = {}
    if q.terms:
        marks = ",".join("?" * len(q.terms))
        for f, t, d in conn.execute(
            f"SELECT field, term, df FROM term_df WHERE field IN (0, 1) AND term IN ({marks})", q.terms
        ):
            df[(f, t)] = d
    # Postings dated after as_of come out of N and df; usually there are none (as_of is now).
    if newest is not None and newest > q.now:
        marks = ",".join("?" * (len(q.terms) + 1))
        for f, t, c in conn.execute(
            "SELECT field, term, count(*) FROM postings WHERE field IN (0, 1, 2)"
            f" AND term IN ({marks}) AND ts > ? GROUP BY field, term",
            ("", *q.terms, q.now),
        ):
            if f == FIELD_DOC:
                n -= c
            elif (f, t) in df:
                df[(f, t)] -= c

    # Terms in every visible handoff (IDF 0) or in none drop out; the rest sorted for a canonical sum.
    kept = sorted((f, t, d) for f, t in pairs if 0 < (d := df.get((f, t), 0)) < n)
    lists = [PostingList(f, t, FIELD_WEIGHTS[f] * math.log(n / d), d) for f, t, d in kept]
    search = TopK(
        conn,
        lists,
        now=q.now,
        horizon=q.horizon,
        window_days=q.window_days,
        k=q.k,
        max_duration=max_duration,
        chunk=q.chunk,
    )
    probe = ContentProbe(conn, list(q.words), whole=q.session_share > 0, now=q.now, horizon=q.horizon, cap=q.cap)
    term = probe.score(
        search, q.content_weight, q.session_share, q.top_chunks, list(q.words), q.dates, q.date_weight, q.date_days
    )
    search.read_first()  # after the content term: its best scores decide which lists need reading in order
    ranked = search.run()

    if not ranked:
        since = q.horizon if q.days_back is not None else q.now - q.window_days * DAY_S
        recent = conn.execute(_RECENT_SQL, (q.now, since, q.k)).fetchall()
        return _shown(conn, [_recent(sid, ts, dur, q.now, q.window_days, n) for ts, sid, dur in recent])
    picked = []
    for score, sid in ranked:
        doc = search.docs[sid]
        matched = tuple(
            MatchedTerm(_FIELD_NAMES[lst.field], lst.term, lst.df, lst.weight / FIELD_WEIGHTS[lst.field], lst.weight)
            for i, lst in enumerate(lists)
            if doc.mask >> i & 1
        )
        age = (q.now - doc.ts) / DAY_S
        parts = term(doc) if doc.content else None
        expl = Explanation(matched, doc.content, doc.recency, doc.boost, age, doc.duration_min, n, False, parts)
        picked.append((sid, doc.ts, score, expl))
    return _shown(conn, picked)


def _recent(
    sid: str, ts: float, dur: float, now: float, window: float, n: int
) -> tuple[str, float, float, Explanation]:
    age = (now - ts) / DAY_S
    return sid, ts, 0.0, Explanation((), 0.0, recency_factor(age, window), duration_boost(dur), age, dur, n, True)


def _shown(conn: sqlite3.Connection, picked: Sequence[tuple[str, float, float, Explanation]]) -> list[ScoredHandoff]:
    """The answer: each picked handoff with what is shown of it (date, headline, projects, keywords, kind)."""
    found: dict[str, tuple[object, ...]] = {}
    if picked:
        sql = _SHOWN_SQL.format(marks=",".join("?" * len(picked)))
        found = {str(r[0]): tuple(r) for r in conn.execute(sql, [sid for sid, *_ in picked])}
    out = []
    for sid, ts, score, expl in picked:
        _, date, headline, projects, keywords, kind = found.get(sid, (sid, "", "", "[]", "[]", "main"))
        out.append(
            ScoredHandoff(
                sid, score, ts, str(date), str(headline), _json_list(projects), _json_list(keywords), str(kind), expl
            )
        )
    return out


# snippet() only where the text is short enough for it (memory/index/snippets.py); NULL tells a long session, whose
# length is where its last window stops. The ids come from FTS5's own table of the rows, `content_content`:
# reading any column through `content` reads the whole row, all 10 MB of a long session's body.
_SEARCH_SQL = (
    "SELECT t.c0, t.c1, t.c2, bm25(content), content.rowid,"
    f" CASE WHEN (SELECT max(stop) FROM chunks WHERE session_id = t.c0) <= {SNIPPET_TEXT_MAX}"
    f" THEN snippet(content, 3, {SNIPPET_SQL_ARGS}) END"
    " FROM content CROSS JOIN content_content AS t ON t.id = content.rowid WHERE content MATCH ? ORDER BY rank LIMIT ?"
)

_decode = json.JSONDecoder().decode  # json.loads without its argument checks: ten lists a query


def _json_list(raw: object) -> tuple[str, ...]:
    try:
        value = _decode(str(raw))
    except ValueError:
        return ()
    return tuple(map(str, value)) if isinstance(value, list) else ()


async def search_content(conn: aiosqlite.Connection, query: str, limit: int = 10) -> list[ContentHit]:
    """Detail recall over all session text, subagents included; any query text is safe (tokens are quoted).

    Every word of the query counts, common and short ones too (``hello.py``, ``get``, ``rm -rf``): this is
    search for a detail, not the grounding's keyword match; bm25 weighs the common ones down. Hits are ranked
    by bm25 over each session's whole text; the snippet of a long session comes from its best passage
    (:mod:`memory.index.snippets`: FTS5's snippet() over a whole 10 MB session took minutes).
    """
    tokens = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:_MAX_QUERY_TERMS]
    if not tokens or limit <= 0:
        return []
    match = " OR ".join(map(fts_quote, tokens))
    rows = list(await conn.execute_fetchall(_SEARCH_SQL, (match, limit)))
    longer = iter(await long_snippets(conn, [(str(r[0]), int(r[4])) for r in rows if r[5] is None], match, tokens))
    return [
        ContentHit(str(s), str(k), str(p), str(snip if snip is not None else next(longer)), -float(b))
        for s, k, p, b, _, snip in rows
    ]
