"""Detail recall's snippets: FTS5's ``snippet()`` over a bounded passage of each hit's text.

``snippet()`` tries a span at every instance of a query word and scores each one against every instance
in the text (and every sentence start): its work grows with the square of the matches it is handed. Over a
10 MB session in which "timeout" occurs about 100,000 times one call took 387 s (docs/benchmarks.md,
"Detail recall over 10 MB sessions"). So it never reads more than ``SNIPPET_TEXT_MAX`` characters:

- a session that short is handed whole (by :func:`memory.retrieval.search_content`): the snippet it always had;
- a longer one through its windows of turns (:mod:`memory.index`): its ``_WINDOWS`` best windows by bm25 in
  ``chunk_fts``, cut at line starts into passages of at most ``SNIPPET_TEXT_MAX`` characters; the passage
  bm25 ranks first among them gives the snippet. A window longer than ``_SCAN_MAX`` (one turn of thousands
  of tool calls, or a session indexed before windows existed) is first narrowed to the stretch of
  ``_SCAN_MAX`` characters where the query words (their stems, as case-folded substrings) occur most.

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

import aiosqlite

__all__ = ["SNIPPET_SQL_ARGS", "SNIPPET_TEXT_MAX", "long_snippet", "passages", "window_texts"]

# 16 Ki characters: snippet() costs at most a few milliseconds even when every other word matches
# (docs/benchmarks.md), and most sessions of a few turns fit whole.
SNIPPET_TEXT_MAX = 16_384
SNIPPET_SQL_ARGS = "'[', ']', '…', 16"  # markers, ellipsis and tokens of every snippet
_WINDOWS = 2  # a long session's best windows whose passages compete
_SCAN_MAX = 65_536  # characters of one window cut into passages (and tokenized again, in memory)
_TOKENIZER = "porter unicode61"  # the content tables' (memory/migrations.py)
_WORD = re.compile(r"[^\W_]+")

# The session's own windows: their ids are one run (memory/index.py numbers them as it inserts them), so
# FTS5 reads the matches of that rowid range only, not every window in the tenant that has the word.
_BEST_WINDOWS_SQL = (
    "SELECT c.start, c.stop FROM chunk_fts CROSS JOIN chunks AS c ON c.id = chunk_fts.rowid"
    " WHERE chunk_fts MATCH ?1 AND chunk_fts.rowid BETWEEN (SELECT min(id) FROM chunks WHERE session_id = ?2)"
    " AND (SELECT max(id) FROM chunks WHERE session_id = ?2) AND c.session_id = ?2"
    " ORDER BY bm25(chunk_fts), c.id LIMIT ?3"
)


async def long_snippet(conn: aiosqlite.Connection, session_id: str, row: int, match: str, words: Sequence[str]) -> str:
    """The snippet of a session longer than ``SNIPPET_TEXT_MAX``: its best passage's (module docstring).

    ``row`` is the session's ``content`` rowid, ``match`` the FTS5 query, ``words`` its words."""
    texts = await window_texts(conn, session_id, row, match)
    return await asyncio.to_thread(_best_snippet, texts, match, words)


async def window_texts(conn: aiosqlite.Connection, session_id: str, row: int, match: str) -> list[str]:
    """The text of the session's best windows for ``match``, best first (its whole text if it has none)."""
    spans = [(int(a), int(b)) for a, b in await conn.execute_fetchall(_BEST_WINDOWS_SQL, (match, session_id, _WINDOWS))]
    # One read of the row for all of them: substr() counts characters, as the spans do (Python str offsets).
    parts = ", ".join(["substr(body, ?, ?)"] * len(spans)) or "body"
    args = [x for a, b in spans for x in (a + 1, b - a)]
    found = list(await conn.execute_fetchall(f"SELECT {parts} FROM content WHERE rowid = ?", (*args, row)))
    return [str(t) for t in found[0]] if found else []


def passages(texts: Sequence[str], words: Sequence[str]) -> list[str]:
    """``texts`` cut at line starts into passages of at most ``SNIPPET_TEXT_MAX`` characters, each text first
    narrowed to ``_SCAN_MAX`` characters where ``words`` occur most."""
    needles = _needles(words) if any(len(t) > _SCAN_MAX for t in texts) else []
    return [p for t in texts for p in _cut(_narrow(t, needles), SNIPPET_TEXT_MAX)]


def _best_snippet(texts: Sequence[str], match: str, words: Sequence[str]) -> str:
    found = passages(texts, words)
    if not found:
        return ""
    with closing(sqlite3.connect(":memory:")) as mem:
        mem.execute(f"CREATE VIRTUAL TABLE p USING fts5(body, tokenize = '{_TOKENIZER}')")
        mem.executemany("INSERT INTO p(rowid, body) VALUES(?, ?)", enumerate(found, 1))
        best = mem.execute("SELECT rowid FROM p WHERE p MATCH ? ORDER BY bm25(p), rowid LIMIT 1", (match,)).fetchone()
        if best is None:  # the windows matched only on their date words (memory/index.py), not on their text
            return _head(found[0])
        sql = f"SELECT snippet(p, 0, {SNIPPET_SQL_ARGS}) FROM p WHERE p MATCH ? AND rowid = ?"
        return str(mem.execute(sql, (match, best[0])).fetchone()[0])


def _head(text: str) -> str:
    """The first 16 words of ``text`` and an ellipsis, as snippet() shows a passage without a match."""
    ends = [m.end() for m in islice(_WORD.finditer(text), 16)]
    return text[: ends[-1]].strip() + "…" if ends else ""


def _cut(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at line starts (a longer line at a space)."""
    out: list[str] = []
    start, n = 0, len(text)
    while n - start > size:
        stop = text.rfind("\n", start, start + size) + 1
        if stop <= start:  # one line longer than a piece
            stop = text.rfind(" ", start, start + size) + 1
            if stop <= start:
                stop = start + size
        out.append(text[start:stop])
        start = stop
    if start < n:
        out.append(text[start:])
    return out


def _needles(words: Sequence[str]) -> list[str]:
    """What to count for each word in raw text: the start it shares with its porter stem (``timeouts`` →
    ``timeout``, ``happiness`` → ``happ``), case-folded; the stem itself where they share none."""
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
        out.append(folded[:shared] or stem)
    return list(dict.fromkeys(n for n in out if n))


def _narrow(text: str, needles: Sequence[str]) -> str:
    """The stretch of ``_SCAN_MAX`` characters of ``text`` (from a line start) where ``needles`` score best:
    per needle, bm25's idf over half-stretches × a saturating count, summed; the first best stretch."""
    if len(text) <= _SCAN_MAX:
        return text
    folded = text.lower()
    if len(folded) != len(text):  # a few characters fold to two: count in the text as it is
        folded = text
    half = _SCAN_MAX // 2
    cuts = range(0, len(text), half)
    counts = [[folded.count(n, a, a + half) for a in cuts] for n in needles]
    blocks = len(cuts)
    scores = [0.0] * (blocks - 1)  # stretch i: half-stretches i and i + 1 (there are at least three)
    for per_block in counts:
        df = sum(1 for c in per_block if c)
        idf = math.log(1 + (blocks - df + 0.5) / (df + 0.5))
        for i in range(len(scores)):
            c = per_block[i] + per_block[i + 1]
            scores[i] += idf * c / (c + 1.2)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    start = best * half
    line = text.rfind("\n", max(0, start - 1024), start) + 1  # a line start just before, when near
    start = line if line > 0 else start
    return text[start : start + _SCAN_MAX]
