"""IDF over the stored sessions' content: the rarity signal the deterministic extractor ranks words by."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import aiosqlite

from memory.index.tokenize import tokenize

__all__ = ["Vocabulary", "distinct_words", "idf_table"]


@dataclass(slots=True)
class Vocabulary:
    """What the stored sessions' content says of terms, read once per extraction run.

    Extraction writes handoffs and postings, never content, so within one ``extract_pending`` run the session
    count and each term's document frequency stay put: a term looked up for one session is not looked up
    again for the next (extractions running side by side may each look up a term neither has yet).
    (fts5vocab counts a term's documents by walking its whole doclist, so the lookups of common words,
    repeated per session, made a bulk ingest quadratic.)
    """

    n: int | None = None
    df: dict[str, int] = field(default_factory=dict)


_VOCAB_TERMS = 500_000  # terms a run remembers before it starts again (a few tens of MB at most)
_PIECE = 1 << 16  # characters tokenized at a time (then on to the next line end)


def distinct_words(text: str) -> set[str]:
    """``set(tokenize(text))``, tokenized a piece at a time.

    A piece ends just after a line end, which no token, NFKC composition or lowercasing context crosses, so
    the words are the same. Whole, a 50 MB transcript's token list took hundreds of MB, and normalizing and
    lowercasing it was one C call holding the GIL for a second: the server's event loop stalled that long."""
    words: set[str] = set()
    start = 0
    while start < len(text):
        stop = text.find("\n", start + _PIECE)
        stop = len(text) if stop < 0 else stop + 1
        words.update(tokenize(text[start:stop]))
        start = stop
    return words


async def idf_table(
    conn: aiosqlite.Connection, markdown: str, vocab: Vocabulary | None = None
) -> Callable[[str], float]:
    """IDF over the stored sessions' content for the words of one session (the fallback's rarity signal)."""
    vocab = vocab if vocab is not None else Vocabulary()
    if vocab.n is None:
        async with conn.execute("SELECT count(*) FROM sessions") as cur:
            row = await cur.fetchone()
        vocab.n = int(row[0]) if row else 0
    n = vocab.n
    words = sorted(distinct_words(markdown))[:5000]
    if len(vocab.df) + len(words) > _VOCAB_TERMS:
        vocab.df.clear()
    # This session's own counts, kept apart from the shared cache: another extraction running meanwhile may
    # add to the cache or clear it, and must not change this table (its keywords would depend on timing).
    own = {w: vocab.df[w] for w in words if w in vocab.df}
    missing = [w for w in words if w not in own]
    for i in range(0, len(missing), 500):
        chunk = missing[i : i + 500]
        found = dict.fromkeys(chunk, 0)
        marks = ",".join("?" * len(chunk))
        async with conn.execute(f"SELECT term, doc FROM content_vocab WHERE term IN ({marks})", chunk) as cur:
            for term, doc in await cur.fetchall():
                found[str(term)] = int(doc)
        own.update(found)
        vocab.df.update(found)

    def idf(term: str) -> float:
        return math.log((n + 1) / (own.get(term, 0) + 1)) + 1.0

    return idf
