"""IDF over the stored content: a session's table does not depend on what other extractions do meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory.facade import Eywa
from memory.index.idf import Vocabulary, idf_table
from memory.index.tokenize import tokenize
from memory.settings import MemorySettings


async def test_concurrent_lookups_sharing_a_vocabulary_give_each_session_its_own_table(
    settings: MemorySettings, transcripts: Path
) -> None:
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False, extract=False)
        async with eywa.db.conn.execute("SELECT markdown FROM sessions ORDER BY session_id") as cur:
            texts = [str(md) async for (md,) in cur]
        alone = [await idf_table(eywa.db.conn, text, Vocabulary()) for text in texts]
        shared = Vocabulary()
        # Started together, each one's lookups are in flight while the next one checks the shared cache.
        together = await asyncio.gather(*(idf_table(eywa.db.conn, text, shared) for text in texts))
        # A cache emptied after a table was made (a run past its term bound) leaves that table as it was.
        shared.df.clear()
    assert len(texts) >= 15
    for text, one, other in zip(texts, alone, together, strict=True):
        words = set(tokenize(text))
        assert {w: other(w) for w in words} == {w: one(w) for w in words}
    # The counts are real, not all zero: some word of the first session is rarer than no word at all. (Not
    # "its most widespread word": among ties that depended on set order, and it can be a header word the
    # content index never holds.)
    unseen = together[0]("a-term-no-session-has")
    assert min(together[0](w) for w in set(tokenize(texts[0]))) < unseen
