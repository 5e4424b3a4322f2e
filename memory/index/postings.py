"""Posting lists, document frequencies and the full-text content index, kept in step on every write.

Every function runs inside the caller's write transaction (``Database.write()``) and is idempotent.

Layout (``postings`` is keyed ``(field, term, ts, session_id)``, newest first by ``ts``, and since schema 5
carries the handoff's duration, ``dur``, so a posting list is read without a handoffs lookup):

- field 0: project terms, field 1: keyword terms (see :mod:`memory.index.tokenize`), with ``term_df``.
- field 2, term ``''``: one row per indexed handoff. It is the document list N counts, the newest-first
  list the no-match fallback reads, and where a handoff's indexed ``ts`` is found again.
- ``meta``: ``indexed_n`` (N for IDF) and ``max_duration_min`` (an upper bound that only grows:
  retrieval's pruning needs a bound, not the exact maximum).

Content (schema 4): a session's whole text is one ``content`` row (detail recall, snippets, the vocabulary
the extractor's IDF reads), found again through ``content_rows``; the same text cut into windows of
``TURNS_PER_CHUNK`` turns is indexed in the contentless ``chunk_fts``, one ``chunks`` row per window
holding its span of the body, so deleting a window can hand FTS5 back exactly the text it indexed.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

import aiosqlite

from memory.index.tokenize import keyword_terms, project_terms
from memory.storage.sqlsteps import Op, Steps, on_async, run_async

__all__ = [
    "FIELD_DOC",
    "FIELD_KEYWORD",
    "FIELD_PROJECT",
    "INDEXED_KINDS",
    "TURNS_PER_CHUNK",
    "ContentLayout",
    "chunk_spans",
    "content_layout",
    "date_words",
    "handoff_terms",
    "index_content",
    "index_content_steps",
    "index_content_utf8",
    "index_handoff",
    "index_handoff_steps",
    "index_new_contents_steps",
    "index_new_handoffs_steps",
    "unindex",
    "unindex_content",
]

FIELD_PROJECT = 0
FIELD_KEYWORD = 1
FIELD_DOC = 2
INDEXED_KINDS = frozenset({"main", "codex"})
# Four turns, two exchanges: a detail and the exchange around it (docs/retrieval.md, chosen leave-one-out).
TURNS_PER_CHUNK = 4

_Row = tuple[int, str, float, float]  # field, term, ts, duration


def handoff_terms(projects: Sequence[str], keywords: Sequence[str]) -> set[tuple[int, str]]:
    """The (field, term) pairs a handoff is posted under."""
    terms = {(FIELD_PROJECT, t) for p in projects for t in _project_terms(p)}
    terms |= {(FIELD_KEYWORD, t) for k in keywords for t in _keyword_terms(k)}
    return terms


# Projects and keywords recur from handoff to handoff (a bulk import meets each a thousand times).
@functools.lru_cache(maxsize=16384)
def _project_terms(project: str) -> tuple[str, ...]:
    return tuple(project_terms(project))


@functools.lru_cache(maxsize=16384)
def _keyword_terms(keyword: str) -> tuple[str, ...]:
    return tuple(keyword_terms(keyword))


def index_handoff_steps(
    *,
    session_id: str,
    ts: float,
    projects: Sequence[str],
    keywords: Sequence[str],
    substance: int,
    kind: str,
    duration_min: float | None = None,
    terms: Set[tuple[int, str]] | None = None,
) -> Steps[None]:
    """:func:`index_handoff` as statements (:mod:`memory.storage.sqlsteps`), for either kind of connection.

    ``terms``: :func:`handoff_terms` of ``projects`` and ``keywords`` when the caller has them already (a
    bulk import computes them in its worker process, off the writer's path).
    """
    if kind not in INDEXED_KINDS or substance < 1:
        yield from _replace(session_id, set())
        return
    if duration_min is None:
        found = yield Op.row("SELECT duration_min FROM handoffs WHERE session_id = ?", (session_id,))
        duration_min = float(found[0]) if found else 0.0
    dur = max(0.0, duration_min)
    rows: set[_Row] = {(f, t, ts, dur) for f, t in (handoff_terms(projects, keywords) if terms is None else terms)}
    rows.add((FIELD_DOC, "", ts, dur))
    yield from _replace(session_id, rows)
    yield Op.many(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET "
        "value = MAX(CAST(value AS REAL), CAST(excluded.value AS REAL))",
        [("max_duration_min", repr(dur))],
    )


index_handoff = on_async(
    index_handoff_steps,
    """Post a handoff (replacing whatever was posted for it before); subagents and substance 0 are unposted.

    ``duration_min`` defaults to the stored handoff row's: write the row first, then index it.
    """,
)


def index_new_handoffs_steps(handoffs: Sequence[tuple[str, float, float, Set[tuple[int, str]]]]) -> Steps[None]:
    """Post handoffs that were never posted (no postings, no earlier row): ``(session_id, ts, duration_min,
    terms)`` each, every one indexable (a main or codex session of substance). A statement a table for the
    lot; the rows are those :func:`index_handoff_steps` writes one handoff at a time (``indexed`` is set by
    the caller's handoff row)."""
    if not handoffs:
        return
    postings: list[tuple[int, str, float, str, float]] = []
    df: dict[tuple[int, str], int] = {}
    for session_id, ts, duration_min, terms in handoffs:
        dur = max(0.0, duration_min)
        postings.append((FIELD_DOC, "", ts, session_id, dur))
        for f, t in terms:
            postings.append((f, t, ts, session_id, dur))
            df[(f, t)] = df.get((f, t), 0) + 1
    yield Op.many("INSERT OR REPLACE INTO postings(field, term, ts, session_id, dur) VALUES(?, ?, ?, ?, ?)", postings)
    yield Op.many(
        "INSERT INTO term_df(field, term, df) VALUES(?, ?, ?)"
        " ON CONFLICT(field, term) DO UPDATE SET df = df + excluded.df",
        [(f, t, n) for (f, t), n in sorted(df.items())],
    )
    # Windows of subagents ingested before their parent's handoff take its date now, as one at a time.
    yield Op.many(
        "UPDATE chunks SET ts = ?, dur = ? WHERE handoff_id = ?",
        [(ts, max(0.0, d), session_id) for session_id, ts, d, _ in handoffs],
    )
    # As the one-at-a-time statements leave them (value types included): N, then the largest duration.
    counts = [1] if len(handoffs) == 1 else [1, len(handoffs) - 1]
    yield Op.many(
        "INSERT INTO meta(key, value) VALUES('indexed_n', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
        [(str(n), n) for n in counts],
    )
    yield Op.many(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET "
        "value = MAX(CAST(value AS REAL), CAST(excluded.value AS REAL))",
        [("max_duration_min", repr(max(0.0, d))) for _, _, d, _ in handoffs],
    )


async def unindex(conn: aiosqlite.Connection, session_id: str) -> None:
    """Remove a handoff from the posting lists (no-op when it was not posted)."""
    await run_async(conn, _replace(session_id, set()))


def _replace(session_id: str, new: set[_Row]) -> Steps[None]:
    found = yield Op.rows("SELECT field, term, ts, dur FROM postings WHERE session_id = ?", (session_id,))
    old: set[_Row] = {(int(f), str(t), float(ts), float(d)) for f, t, ts, d in found}
    now = any(f == FIELD_DOC for f, *_ in new)
    if old == new:
        # put_handoff rewrites the row with indexed = 0: say again that its (unchanged) postings are there.
        yield Op.run("UPDATE handoffs SET indexed = ? WHERE session_id = ?", (int(now), session_id))
        return
    gone, added = old - new, new - old
    if gone:
        yield Op.many(
            "DELETE FROM postings WHERE field = ? AND term = ? AND ts = ? AND session_id = ?",
            [(f, t, ts, session_id) for f, t, ts, _ in gone],
        )
    if added:
        yield Op.many(
            "INSERT OR REPLACE INTO postings(field, term, ts, session_id, dur) VALUES(?, ?, ?, ?, ?)",
            [(f, t, ts, session_id, d) for f, t, ts, d in added],
        )
    # Document frequencies change only for terms gained or lost, not for a new date or duration.
    old_terms = {(f, t) for f, t, *_ in old if f != FIELD_DOC}
    new_terms = {(f, t) for f, t, *_ in new if f != FIELD_DOC}
    if old_terms - new_terms:
        lost = sorted(old_terms - new_terms)
        yield Op.many("UPDATE term_df SET df = df - 1 WHERE field = ? AND term = ?", lost)
        yield Op.many("DELETE FROM term_df WHERE field = ? AND term = ? AND df <= 0", lost)
    if new_terms - old_terms:
        yield Op.many(
            "INSERT INTO term_df(field, term, df) VALUES(?, ?, 1) ON CONFLICT(field, term) DO UPDATE SET df = df + 1",
            sorted(new_terms - old_terms),
        )
    doc_old = next(((ts, d) for f, _, ts, d in old if f == FIELD_DOC), None)
    doc_new = next(((ts, d) for f, _, ts, d in new if f == FIELD_DOC), None)
    if doc_old != doc_new:
        # The windows credited to this handoff carry its posted date and duration (NULL: not posted).
        ts_new, dur_new = doc_new if doc_new is not None else (None, 0.0)
        yield Op.run("UPDATE chunks SET ts = ?, dur = ? WHERE handoff_id = ?", (ts_new, dur_new, session_id))
    was = doc_old is not None
    if was != now:
        yield Op.run(
            "INSERT INTO meta(key, value) VALUES('indexed_n', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
            (str(max(0, int(now) - int(was))), int(now) - int(was)),
        )
    yield Op.run("UPDATE handoffs SET indexed = ? WHERE session_id = ?", (int(now), session_id))


_TURN = re.compile(r"^## ", re.MULTILINE)  # memory/render/markdown.py starts every turn with a level-2 heading
_STARTED = re.compile(r"^- started: (\d{4})-(\d{2})-(\d{2})\b", re.MULTILINE)
_MONTHS = "January February March April May June July August September October November December".split()
_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


def chunk_spans(body: str, turns: int = TURNS_PER_CHUNK) -> list[tuple[int, int]]:
    """``[start, stop)`` spans of ``body``, ``turns`` rendered turns each; what precedes the first turn
    (title, metadata) joins the first span. A body without turn headings is one span."""
    starts = [m.start() for m in _TURN.finditer(body)]
    cuts = [0, *starts[max(1, turns) :: max(1, turns)]] if starts else [0]
    return list(zip(cuts, [*cuts[1:], len(body)], strict=True))


def date_words(body: str) -> str:
    """The session's start date in words (``Monday 8 May 2023``) from the rendered header, or ""."""
    head = body[: m.start()] if (m := _TURN.search(body)) else body
    found = _STARTED.search(head)
    if found is None:
        return ""
    y, mo, d = (int(g) for g in found.groups())
    try:
        day = dt.date(y, mo, d)
    except ValueError:
        return ""
    return f"{_WEEKDAYS[day.weekday()]} {d} {_MONTHS[mo - 1]} {y}"


_FTS_BATCH = 256  # windows (a few KB of text each) put in the full-text index by one statement
_ENCODE_PIECE = 1 << 20  # characters encoded at a time to measure a window in bytes
Buffer = bytes | bytearray


@dataclass(frozen=True, slots=True)
class ContentLayout:
    """Where a session's text splits into its windows, in characters and in UTF-8 bytes, and its start date
    in words: all the indexing needs of the text itself besides its UTF-8 bytes."""

    windows: list[tuple[int, int, int, int]]  # char start, char stop, byte start, byte stop
    date: str


def content_layout(body: str) -> ContentLayout:
    windows = []
    byte_at = 0
    for start, stop in chunk_spans(body):  # contiguous: each starts where the one before stopped
        size = sum(len(body[at : min(at + _ENCODE_PIECE, stop)].encode()) for at in range(start, stop, _ENCODE_PIECE))
        windows.append((start, stop, byte_at, byte_at + size))
        byte_at += size
    return ContentLayout(windows, date_words(body))


async def index_content(conn: aiosqlite.Connection, *, session_id: str, kind: str, parent_id: str, body: str) -> None:
    """Put a session's text in the full-text indexes (whole and by windows), replacing its previous text."""
    await run_async(conn, index_content_steps(session_id=session_id, kind=kind, parent_id=parent_id, body=body))


async def index_content_utf8(
    conn: aiosqlite.Connection, *, session_id: str, kind: str, parent_id: str, utf8: Buffer, layout: ContentLayout
) -> None:
    """:func:`index_content` of a text given as its UTF-8 bytes and :func:`content_layout`: a big session's
    text (two bytes a character in Python once one character is past Latin-1) need not be held meanwhile."""
    steps = _content_steps(session_id, kind, parent_id, utf8, layout, lambda w: utf8[w[2] : w[3]], new=False)
    await run_async(conn, steps)


def index_content_steps(*, session_id: str, kind: str, parent_id: str, body: str, new: bool = False) -> Steps[None]:
    """:func:`index_content` as statements (:mod:`memory.storage.sqlsteps`), for either kind of connection.

    ``new``: the caller knows the session has no text indexed yet (nothing to take out first).
    """
    layout = ContentLayout([(start, stop, 0, 0) for start, stop in chunk_spans(body)], date_words(body))
    return _content_steps(session_id, kind, parent_id, body, layout, lambda w: body[w[0] : w[1]], new=new)


def _content_steps(
    session_id: str,
    kind: str,
    parent_id: str,
    whole: str | Buffer,
    layout: ContentLayout,
    text_of: Callable[[tuple[int, int, int, int]], str | Buffer],
    *,
    new: bool,
) -> Steps[None]:
    if not new:
        yield from _unindex_content(session_id)
    # CAST: UTF-8 bytes are stored as the text they are (a str is left as it is).
    rowid = yield Op.rowid(
        "INSERT INTO content(session_id, kind, parent_id, body) VALUES(?, ?, ?, CAST(? AS TEXT))",
        (session_id, kind, parent_id, whole),
    )
    yield Op.run("INSERT OR REPLACE INTO content_rows(session_id, row) VALUES(?, ?)", (session_id, rowid))
    credited = parent_id if kind == "subagent" and parent_id else session_id
    found = yield Op.row("SELECT COALESCE(MAX(id), 0) FROM chunks")
    base = int(found[0]) if found else 0
    posted = yield Op.row("SELECT ts, dur FROM postings WHERE field = 2 AND term = '' AND session_id = ?", (credited,))
    ts, dur = (float(posted[0]), float(posted[1])) if posted else (None, 0.0)
    # The date goes with the first window: a session is also recalled by when it happened ("in May").
    date = layout.date
    rows = [(base + i + 1, w, f"{date}\n" if i == 0 and date else "") for i, w in enumerate(layout.windows)]
    yield Op.many(
        "INSERT INTO chunks(id, session_id, handoff_id, start, stop, prefix, row, ts, dur)"
        " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(i, session_id, credited, w[0], w[1], prefix, rowid, ts, dur) for i, w, prefix in rows],
    )
    # The windows' text a batch at a time: all at once it was one more copy of a transcript of tens of MB.
    for at in range(0, len(rows), _FTS_BATCH):
        yield Op.many(
            "INSERT INTO chunk_fts(rowid, body) VALUES(?, CAST(? AS TEXT))",
            [(i, _prefixed(prefix, text_of(w))) for i, w, prefix in rows[at : at + _FTS_BATCH]],
        )


def _prefixed(prefix: str, text: str | Buffer) -> str | Buffer:
    if not prefix:
        return text
    return prefix + text if isinstance(text, str) else prefix.encode() + text


def index_new_contents_steps(texts: Sequence[tuple[str, str, str, str, tuple[float, float] | None]]) -> Steps[None]:
    """:func:`index_content_steps` for sessions with no text indexed yet, a statement a table for the lot:
    ``(session_id, kind, parent_id, body, posted)`` each, where ``posted`` is the session's own posting ``(ts, dur)``
    or None (each is credited to itself: not a subagent with a parent). The rows are those one at a time
    leaves: content rowids and window ids follow on from the largest, in order."""
    if not texts:
        return
    found = yield Op.row("SELECT COALESCE(MAX(rowid), 0) FROM content")
    row = int(found[0]) if found else 0
    found = yield Op.row("SELECT COALESCE(MAX(id), 0) FROM chunks")
    chunk = int(found[0]) if found else 0
    contents: list[tuple[int, str, str, str, str]] = []
    windows: list[tuple[int, str, str, int, int, str, int, float | None, float]] = []
    fts: list[tuple[int, str]] = []
    for session_id, kind, parent_id, body, posted in texts:
        row += 1
        contents.append((row, session_id, kind, parent_id, body))
        ts, dur = posted if posted is not None else (None, 0.0)
        date = date_words(body)
        for i, (start, stop) in enumerate(chunk_spans(body)):
            chunk += 1
            prefix = f"{date}\n" if i == 0 and date else ""
            windows.append((chunk, session_id, session_id, start, stop, prefix, row, ts, dur))
            fts.append((chunk, prefix + body[start:stop]))
    yield Op.many("INSERT INTO content(rowid, session_id, kind, parent_id, body) VALUES(?, ?, ?, ?, ?)", contents)
    yield Op.many("INSERT OR REPLACE INTO content_rows(session_id, row) VALUES(?, ?)", [(c[1], c[0]) for c in contents])
    yield Op.many(
        "INSERT INTO chunks(id, session_id, handoff_id, start, stop, prefix, row, ts, dur)"
        " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
        windows,
    )
    yield Op.many("INSERT INTO chunk_fts(rowid, body) VALUES(?, ?)", fts)


async def unindex_content(conn: aiosqlite.Connection, session_id: str) -> None:
    """Remove a session's text from the full-text indexes (no-op when absent)."""
    await run_async(conn, _unindex_content(session_id))


def _unindex_content(session_id: str) -> Steps[None]:
    found = yield Op.row(
        "SELECT r.row, c.body FROM content_rows AS r LEFT JOIN content AS c ON c.rowid = r.row "
        "AND c.session_id = r.session_id WHERE r.session_id = ?",
        (session_id,),
    )
    body = None if found is None or found[1] is None else str(found[1])
    chunks = yield Op.rows("SELECT id, start, stop, prefix FROM chunks WHERE session_id = ?", (session_id,))
    if body is not None and chunks:
        # A contentless FTS5 table forgets a row only when given back the very text it indexed.
        yield Op.many(
            "INSERT INTO chunk_fts(chunk_fts, rowid, body) VALUES('delete', ?, ?)",
            [(int(i), str(p) + body[int(a) : int(b)]) for i, a, b, p in chunks],
        )
    if chunks:
        yield Op.run("DELETE FROM chunks WHERE session_id = ?", (session_id,))
    if found is not None:
        yield Op.run("DELETE FROM content WHERE rowid = ? AND session_id = ?", (int(found[0]), session_id))
        yield Op.run("DELETE FROM content_rows WHERE session_id = ?", (session_id,))
