"""Detail recall's snippets: FTS5's ``snippet()`` over a bounded passage of each hit's text.

``snippet()`` tries a span at every instance of a query word and scores each one against every instance
in the text (and every sentence start): its work grows with the square of the matches it is handed. Over a
10 MB session in which "timeout" occurs about 100,000 times one call took 387 s (docs/benchmarks.md,
"Detail recall over 10 MB sessions"). So it never reads more than ``SNIPPET_TEXT_MAX`` characters:

- a session that short is handed whole (by :func:`memory.index.retrieval.search_content`): the snippet it always had;
- a longer one through its windows of turns (:mod:`memory.index.postings`): its ``_WINDOWS`` best windows by bm25 in
  ``chunk_fts``, cut at line starts into passages of at most ``SNIPPET_TEXT_MAX`` characters; the passage
  bm25 ranks first among them gives the snippet. A window longer than ``_SCAN_MAX`` (one turn of thousands
  of tool calls, or a session indexed before windows existed) is first narrowed to the stretch of
  ``_SCAN_MAX`` bytes where the query words (their stems, as case-folded substrings) occur most.

Hits, their order and their scores are bm25 over whole sessions as before; only where a long session's
snippet is taken from changes: its best passage rather than the first best span of the whole text.
"""

from __future__ import annotations

import asyncio
import math
import re
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from itertools import islice
from typing import NamedTuple

import aiosqlite

__all__ = ["SNIPPET_SQL_ARGS", "SNIPPET_TEXT_MAX", "Passage", "Window", "long_snippets", "passages", "window_texts"]

# 16 Ki characters: snippet() costs at most a few milliseconds even when every other word matches
# (docs/benchmarks.md), and tokenizing that much again costs no more than reading the windows.
SNIPPET_TEXT_MAX = 16_384
SNIPPET_SQL_ARGS = "'[', ']', '…', 16"  # markers, ellipsis and tokens of every snippet
_WINDOWS = 2  # the best window, and the next for when the best matched only on its date words
_SCAN_MAX = 65_536  # characters (bytes of a longer one) of a window cut into passages and tokenized again
_TOKENIZER = "porter unicode61"  # the content tables' (memory/storage/migrations.py)
_WORD = re.compile(r"[^\W_]+")

# The session's best windows and their text, in one statement. Its windows' ids are one run (memory/index/postings.py
# numbers them as it inserts them), so FTS5 reads the matches of that rowid range only, not those of every
# window in the tenant. The body is read at most once a branch (an uncorrelated subquery); substr() counts
# characters, as the spans do (str offsets). A window longer than _SCAN_MAX comes as UTF-8 bytes: it is
# narrowed as bytes (str.lower() of megabytes that are not ASCII takes a tenth of a second), then decoded.
_WINDOW_TEXTS_SQL = (
    "WITH w AS MATERIALIZED (SELECT c.start, c.stop FROM chunk_fts CROSS JOIN chunks AS c ON c.id = chunk_fts.rowid"
    " WHERE chunk_fts MATCH ?1 AND chunk_fts.rowid BETWEEN (SELECT min(id) FROM chunks WHERE session_id = ?2)"
    " AND (SELECT max(id) FROM chunks WHERE session_id = ?2) AND c.session_id = ?2"
    " ORDER BY bm25(chunk_fts), c.id LIMIT ?3)"
    " SELECT w.start = 0, w.stop >= (SELECT max(stop) FROM chunks WHERE session_id = ?2),"
    " CASE WHEN w.stop - w.start > ?5"
    " THEN CAST(substr((SELECT body FROM content WHERE rowid = ?4), w.start + 1, w.stop - w.start) AS BLOB)"
    " ELSE substr((SELECT body FROM content WHERE rowid = ?4), w.start + 1, w.stop - w.start) END FROM w"
)
_WHOLE_SQL = (
    "SELECT 1, 1, CASE WHEN length(body) > ?2 THEN CAST(body AS BLOB) ELSE body END FROM content WHERE rowid = ?1"
)
_PASSAGE_SQL = "INSERT INTO p(rowid, body) VALUES(?, ?)"
_BEST_SQL = "SELECT rowid FROM p WHERE p MATCH ? ORDER BY bm25(p), rowid LIMIT 1"
_SNIPPET_SQL = f"SELECT snippet(p, 0, {SNIPPET_SQL_ARGS}) FROM p WHERE p MATCH ? AND rowid = ?"


class Passage(NamedTuple):
    """Some of a session's text, and whether it begins and ends where the session does."""

    text: str
    head: bool
    tail: bool


class Window(NamedTuple):
    """A window as read: one longer than ``_SCAN_MAX`` characters comes as its UTF-8 bytes."""

    text: str | bytes
    head: bool
    tail: bool


async def long_snippets(
    conn: aiosqlite.Connection, hits: Sequence[tuple[str, int]], match: str, words: Sequence[str]
) -> list[str]:
    """The snippets of sessions longer than ``SNIPPET_TEXT_MAX``: each one's best passage's (module docstring).

    ``hits``: (session id, ``content`` rowid) pairs; ``match``: the FTS5 query; ``words``: its words."""
    windows = [await window_texts(conn, sid, row, match) for sid, row in hits]
    return await asyncio.to_thread(_best_snippets, windows, match, words) if windows else []


async def window_texts(conn: aiosqlite.Connection, session_id: str, row: int, match: str) -> list[Window]:
    """The session's best windows for ``match``, best first (its whole text if it has no window)."""
    found = await conn.execute_fetchall(_WINDOW_TEXTS_SQL, (match, session_id, _WINDOWS, row, _SCAN_MAX))
    if not found:  # no window matched (none indexed): the session's text is one window
        found = await conn.execute_fetchall(_WHOLE_SQL, (row, _SCAN_MAX))
    return [Window(t, bool(h), bool(e)) for h, e, t in found]


def passages(windows: Sequence[Window], words: Sequence[str]) -> list[Passage]:
    """``windows`` cut at line starts into passages of at most ``SNIPPET_TEXT_MAX`` characters, each window
    first narrowed to the ``_SCAN_MAX`` characters (bytes, when it comes as bytes) where ``words`` occur most."""
    needles = _needles(words) if any(len(w.text) > _SCAN_MAX for w in windows) else []
    return [p for w in windows for p in _cut(_narrow(w, needles), SNIPPET_TEXT_MAX)]


def _best_snippets(windows: Sequence[Sequence[Window]], match: str, words: Sequence[str]) -> list[str]:
    with closing(sqlite3.connect(":memory:")) as mem:
        mem.execute(f"CREATE VIRTUAL TABLE p USING fts5(body, tokenize = '{_TOKENIZER}')")
        return [_best_snippet(mem, each, match, words) for each in windows]


def _best_snippet(mem: sqlite3.Connection, windows: Sequence[Window], match: str, words: Sequence[str]) -> str:
    first = None
    # The next window only when this one matched on its date words alone (memory/index/postings.py).
    for window in windows:
        found = passages([window], words)
        if not found:
            continue
        first = first or found[0]
        mem.execute("DELETE FROM p")
        mem.executemany(_PASSAGE_SQL, ((i, p.text) for i, p in enumerate(found, 1)))
        best = mem.execute(_BEST_SQL, (match,)).fetchone() if len(found) > 1 else (1,)
        snip = mem.execute(_SNIPPET_SQL, (match, best[0])).fetchone() if best else None
        if snip is not None:
            return _ellipsized(str(snip[0]), found[best[0] - 1])
    return _ellipsized(_head(first.text), first) if first else ""


def _ellipsized(snip: str, passage: Passage) -> str:
    """snippet() marks where its span stops short of the passage; mark where the passage stops short of the
    session too, as snippet() over the whole text did."""
    if not passage.head and not snip.startswith("…"):
        snip = "…" + snip.lstrip()
    if not passage.tail and not snip.endswith("…"):
        snip = snip.rstrip() + "…"
    return snip


def _head(text: str) -> str:
    """The first 16 words of ``text``, as snippet() shows them (an ellipsis follows when there is more)."""
    ends = [m.end() for m in islice(_WORD.finditer(text), 16)]
    return text[: ends[-1]] + ("…" if text[ends[-1] :].strip() else "") if ends else ""


def _cut(window: Passage, size: int) -> list[Passage]:
    """``window`` in passages of at most ``size`` characters, cut at line starts (a longer line at a space)."""
    text = window.text
    out: list[Passage] = []
    start, n = 0, len(text)
    while n - start > size:
        stop = text.rfind("\n", start, start + size) + 1
        if stop <= start:  # one line longer than a passage
            stop = text.rfind(" ", start, start + size) + 1
            if stop <= start:
                stop = start + size
        out.append(Passage(text[start:stop], window.head and start == 0, False))
        start = stop
    if start < n or not out:
        out.append(Passage(text[start:], window.head and start == 0, window.tail))
    return out


def _needles(words: Sequence[str]) -> list[str]:
    """What to count for each word in raw text: the start it shares with its porter stem, less the stem's last
    letter when the stem is not the word (``timeouts`` → ``timeou``, ``happiness`` → ``happ``), case-folded."""
    with closing(sqlite3.connect(":memory:")) as mem:
        mem.execute(f"CREATE VIRTUAL TABLE w USING fts5(t, tokenize = '{_TOKENIZER}')")
        mem.execute("CREATE VIRTUAL TABLE v USING fts5vocab(w, 'instance')")
        mem.executemany("INSERT INTO w(rowid, t) VALUES(?, ?)", enumerate(words, 1))
        stems = {int(doc): str(term) for term, doc in mem.execute("SELECT term, doc FROM v")}
    out = []
    for i, word in enumerate(words, 1):
        stem, folded = stems.get(i, word), word.lower()
        shared = 0
        while shared < min(len(folded), len(stem)) and folded[shared] == stem[shared]:
            shared += 1
        needle = folded[:shared] or stem
        # A stem that is not the word may end in what the stemmer changed (happy, happiness → happi): drop it.
        out.append(needle[:-1] if stem != folded and len(needle) > 3 else needle)
    return list(dict.fromkeys(n for n in out if n))


def _narrow(window: Window, needles: Sequence[str]) -> Passage:
    """The stretch of ``_SCAN_MAX`` bytes of ``window`` (from a line start) where ``needles`` score best: per
    needle, bm25's idf over half-stretches × a saturating count, summed; the first best stretch. Counted in
    the UTF-8 bytes with ASCII letters folded (fast over megabytes), decoded once chosen."""
    text = window.text
    if len(text) <= _SCAN_MAX:
        return Passage(text if isinstance(text, str) else text.decode("utf-8", "ignore"), window.head, window.tail)
    if isinstance(text, str):
        text = text.encode()
    folded = text.lower()
    half = _SCAN_MAX // 2
    cuts = range(0, len(text), half)
    counts = [[folded.count(n.encode(), a, a + half) for a in cuts] for n in needles]
    blocks = len(cuts)
    scores = [0.0] * (blocks - 1)  # stretch i: half-stretches i and i + 1 (there are three or more)
    for per_block in counts:
        df = sum(1 for c in per_block if c)
        idf = math.log(1 + (blocks - df + 0.5) / (df + 0.5))
        for i in range(blocks - 1):
            c = per_block[i] + per_block[i + 1]
            scores[i] += idf * c / (c + 1.2)
    start = max(range(len(scores)), key=lambda i: (scores[i], -i)) * half
    line = text.rfind(b"\n", max(0, start - 1024), start) if start else -1
    start = line + 1 if line >= 0 else start  # from the line start just before, when it is near
    stop = min(len(text), start + _SCAN_MAX)
    end = text.rfind(b"\n", max(start, stop - 1024), stop) if stop < len(text) else -1
    stop = end + 1 if end >= 0 else stop  # to a line end, when one is near
    # A cut that is no line start may split a character: its stray bytes are dropped.
    part = text[start:stop].decode("utf-8", "ignore")
    return Passage(part, window.head and start == 0, window.tail and stop >= len(text))
