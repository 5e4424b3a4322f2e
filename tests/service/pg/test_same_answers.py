"""Same data, same answers: `get` (k = 5 and 10) and `search` (5 and 10) through PostgreSQL return the sessions
the embedded engine returns, in the same order, with the same scores (relative difference ≤ 1e-9), for every
query of a LoCoMo-shaped corpus (conversations ingested through the public path) and of the synthetic
handoff corpus of the latency benchmark (moved in with `migrate --from-sqlite`), read through a store that
wrote them, one that caught up read by read, and one that built its copy from the database afterwards."""

from __future__ import annotations

import random
import shutil
from collections.abc import Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._synthetic import build, generate
from bench.latency import query_mix
from bench.locomo import questions, sessions_of, write_transcripts
from memory.facade import Eywa
from memory.index.retrieval import retrieve
from memory.storage.database import Database
from service.pg.link import PgLink
from service.pg.migrate import from_sqlite
from service.pg.store import PgTenantStore
from tests.service.conftest import memory_settings
from tests.service.pg.conftest import tenant_store

TOPICS = (
    "pottery camping adoption painting guitar marathon violin sunflowers museum hiking beach parade concert"
    " counseling volunteering library bakery garden bicycle chess kayak mentor festival recipe novel puppy"
).split()
NAMES = ("Caroline", "Melanie")


def locomo_sample(sample_id: str, seed: int, sessions: int = 9, turns: int = 14) -> dict[str, Any]:
    """A conversation in LoCoMo's JSON shape (sessions with dated turns of two speakers, questions with their
    evidence), made up from a fixed vocabulary: each session dwells on a few topics, as LoCoMo's do."""
    rng = random.Random(seed)
    conv: dict[str, Any] = {"speaker_a": NAMES[0], "speaker_b": NAMES[1]}
    qa = []
    day = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    for n in range(1, sessions + 1):
        day += timedelta(days=rng.randint(3, 20), minutes=rng.randint(0, 300))
        conv[f"session_{n}_date_time"] = day.strftime("%I:%M %p on %d %B, %Y").lower().lstrip("0")
        focus = rng.sample(TOPICS, 3)
        said = []
        for i in range(turns):
            words = [rng.choice(focus), rng.choice(TOPICS), rng.choice(focus)]
            said.append(
                {
                    "speaker": NAMES[i % 2],
                    "dia_id": f"D{n}:{i + 1}",
                    "text": f"I keep thinking about {' and '.join(words)} lately.",
                }
            )
        conv[f"session_{n}"] = said
        qa.append(
            {
                "question": f"When did {NAMES[0]} talk about {focus[0]} and {focus[1]}?",
                "evidence": [f"D{n}:2"],
                "category": 2,
            }
        )
        qa.append({"question": f"What does {NAMES[1]} think of {focus[2]}?", "evidence": [f"D{n}:3"], "category": 1})
    return {"sample_id": sample_id, "conversation": conv, "qa": qa}


def same(embedded: Sequence[tuple[str, float]], pg: Sequence[tuple[str, float]]) -> bool:
    if [sid for sid, _ in embedded] != [sid for sid, _ in pg]:
        return False
    return all(abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300) for (_, a), (_, b) in zip(embedded, pg, strict=True))


async def answers(eywa: Eywa, queries: Sequence[str], as_of: datetime) -> list[tuple[str, list[tuple[str, float]]]]:
    out = []
    for q in queries:
        g = await eywa.get(q, max_handoffs=5, as_of=as_of, days_back=100_000)
        out.append((f"get {q!r}", [(r.session_id, r.score) for r in g.results]))
        for k in (5, 10):
            ranked = await retrieve(eywa.db, q, max_k=k, as_of=as_of, window_days=eywa.settings.window_days)
            out.append((f"retrieve k={k} {q!r}", [(r.session_id, r.score) for r in ranked]))
            hits = await eywa.search(q, k)
            out.append((f"search k={k} {q!r}", [(h.session_id, h.score) for h in hits]))
    return out


def assert_same(
    embedded: list[tuple[str, list[tuple[str, float]]]], pg: list[tuple[str, list[tuple[str, float]]]]
) -> None:
    assert [name for name, _ in embedded] == [name for name, _ in pg]
    differ = [(name, a, b) for (name, a), (_, b) in zip(embedded, pg, strict=True) if not same(a, b)]
    assert differ == []
    assert sum(1 for _, a in embedded if a) > len(embedded) // 2  # most queries find something: a real test


async def pg_answers(s: PgTenantStore, tenant: str, queries: Sequence[str], as_of: datetime) -> list[Any]:
    async with s.lease(tenant) as t:
        return await answers(await t.eywa(), queries, as_of)


async def test_locomo_shaped_conversations_answer_the_same_through_postgresql(tmp_path: Path, pg_url: str) -> None:
    samples = [locomo_sample("conv-a", 1), locomo_sample("conv-b", 2)]
    files: list[Path] = []
    for sample in samples:
        write_transcripts(sample, tmp_path / "data" / sample["sample_id"])
        files += sorted((tmp_path / "data" / sample["sample_id"]).glob("*.jsonl"))
    queries = [q for sample in samples for q, _ in questions(sample)] + ["pottery", "museum parade", "zzz"]
    last = max(sessions_of(sample["conversation"])[-1][1] for sample in samples)
    as_of = last + timedelta(hours=1)
    forgotten = "conv-a-s3"

    home = tmp_path / "embedded"
    async with await Eywa.open(memory_settings(home)) as eywa:
        for f in files:
            await eywa.ingest([f], use_llm=False)
        await eywa.forget(forgotten)
        want = await answers(eywa, queries, as_of)

    async with AsyncExitStack() as stack:
        early = await stack.enter_async_context(tenant_store(tmp_path / "early", pg_url))
        async with early.lease("alice") as t:
            await t.eywa()  # its copy exists (empty) before any write: it catches up read by read
        writer = await stack.enter_async_context(tenant_store(tmp_path / "writer", pg_url))
        async with writer.lease("alice") as t:
            eywa = await t.eywa()
            for f in files:
                await eywa.ingest([f], use_llm=False)
            await eywa.forget(forgotten)
        late = await stack.enter_async_context(tenant_store(tmp_path / "late", pg_url))
        for s in (writer, early, late):
            assert_same(want, await pg_answers(s, "alice", queries, as_of))


async def test_the_synthetic_corpus_answers_the_same_after_migrating_in(tmp_path: Path, pg_url: str) -> None:
    corpus = generate(3000, seed=11)
    source = tmp_path / "embedded" / "memory.db"
    source.parent.mkdir()
    await (await Database.open(source)).close()
    build(corpus, source)
    mixed, selective, _ = query_mix(corpus, random.Random(5), 60)
    queries = mixed + selective
    as_of = datetime.fromtimestamp(corpus.end_ts, UTC)
    # The embedded engine goes on writing after the copy is taken; the same writes go through PostgreSQL.
    copied = tmp_path / "copied.db"
    shutil.copy(source, copied)
    gone = [h.session_id for h in corpus.handoffs[:25]]
    settings = memory_settings(source.parent)
    async with Eywa(settings, await Database.open(source)) as eywa:
        for sid in gone:
            await eywa.forget(sid)
        want = await answers(eywa, queries, as_of)

    link = await PgLink.open(pg_url, max_size=2)
    try:
        report = await from_sqlite(link, copied, "alice")
        assert report.equal and report.rows["handoffs"][1] == 3000
    finally:
        await link.close()
    async with tenant_store(tmp_path / "a", pg_url) as a, tenant_store(tmp_path / "b", pg_url) as b:
        async with b.lease("alice") as t:
            await t.eywa()  # built from the database before the forgets
        async with a.lease("alice") as t:
            eywa = await t.eywa()
            for sid in gone:
                await eywa.forget(sid)
        assert_same(want, await pg_answers(a, "alice", queries, as_of))
        assert_same(want, await pg_answers(b, "alice", queries, as_of))
