"""`macupos serve migrate`: a memory home's memory.db (and its facts events, and its tenant's keys) into
PostgreSQL without loss (row counts and answers equal), and back out into a plain memory.db; refusals that
change nothing."""

from __future__ import annotations

import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path

from memory import replica as replicate
from memory.facade import Eywa
from memory.facts.api import FactsApi
from service.keys import SqliteKeyStore
from service.pg.keys import PgKeyStore
from service.pg.link import PgLink
from tests.service.conftest import memory_settings, transcript_bytes
from tests.service.pg.conftest import MACUPOS, serve_env, tenant_store
from tests.service.pg.test_same_answers import answers, assert_same

AS_OF = datetime.fromisoformat("2026-03-05T00:00:00+00:00")
QUERIES = ["zebrafish", "quokka walrus", "step 3", "nothing-like-this", "fixed"]


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MACUPOS), "serve", *args], env=serve_env(home), capture_output=True, text=True, timeout=300, check=False
    )


def counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        out = {}
        for name in replicate.MIRROR_NAMES:
            rows = replicate.all_rows(conn, name)
            out[name] = sum(len(batch) for batch in rows)
        return out
    finally:
        conn.close()


async def make_home(home: Path) -> str:
    """A local memory home with transcripts, a forgotten session, facts (and their event log) and a key."""
    files = home / "files"
    files.mkdir(parents=True)
    async with await Eywa.open(memory_settings(home)) as eywa:
        for i, words in enumerate([("zebrafish",), ("quokka", "walrus"), ("zebrafish", "walrus"), ("gone",)]):
            (files / f"s{i}.jsonl").write_bytes(transcript_bytes(f"s{i}", *words, turns=i + 2))
            await eywa.ingest([files / f"s{i}.jsonl"], use_llm=False)
        await eywa.forget("s3")
    facts = await FactsApi.from_settings(memory_settings(home))
    try:
        assert (await facts.run_script("remember pet user Fact predicate likes object quokka")).ok
        assert (await facts.run_script("link pet walrus knows")).ok
    finally:
        await facts.close()
    keys = await SqliteKeyStore.open(home / "service.db")
    try:
        return (await keys.create_key("alice", "read")).api_key
    finally:
        await keys.close()


async def test_a_memory_home_moves_in_and_back_out_without_loss(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    key = await make_home(home)
    source = home / "memory.db"
    async with await Eywa.open(memory_settings(home)) as eywa:
        want = await answers(eywa, QUERIES, AS_OF)

    moved = cli(home, "migrate", "--from-sqlite", str(source), "--tenant", "alice", "--database", pg_url)
    assert moved.returncode == 0, moved.stderr
    assert "differs" not in moved.stdout and "sessions" in moved.stdout
    assert "1 key(s)" in moved.stderr

    link = await PgLink.open(pg_url, max_size=1)
    try:
        record = await PgKeyStore(link).verify(key)  # the key works against the database now
        assert record is not None and record.tenant == "alice" and record.scope == "read"
    finally:
        await link.close()
    async with tenant_store(tmp_path / "server", pg_url) as s, s.lease("alice") as t:
        assert_same(want, await answers(await t.eywa(), QUERIES, AS_OF))
        assert (await (await t.facts()).world())["memories"] == 2

    out = tmp_path / "out" / "memory.db"
    back = cli(home, "--database", pg_url, "migrate", "--to-sqlite", str(out), "--tenant", "alice")
    assert back.returncode == 0, back.stderr
    assert counts(out) == counts(source)
    conn = sqlite3.connect(out)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert not any(n.startswith("_replica") for n in names)  # a plain memory database
    async with await Eywa.open(memory_settings(out.parent)) as eywa:
        assert_same(want, await answers(eywa, QUERIES, AS_OF))
    events_in = sorted((home / "facts" / "events").glob("*.jsonl"))
    events_out = sorted((out.parent / "facts" / "events").glob("*.jsonl"))
    assert [p.name for p in events_in] == [p.name for p in events_out]
    assert [p.read_text() for p in events_in] == [p.read_text() for p in events_out]
    assert sorted(p.name for p in (out.parent / "handoffs").rglob("*.md")) == ["s0.md", "s1.md", "s2.md"]
    facts = await FactsApi.from_settings(memory_settings(out.parent))
    try:
        assert "quokka" in (await facts.run_script("recall pet")).text
    finally:
        await facts.close()


async def test_migrations_that_would_lose_or_mix_memory_are_refused(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    await make_home(home)
    first = cli(home, "migrate", "--from-sqlite", str(home / "memory.db"), "--tenant", "alice", "--database", pg_url)
    assert first.returncode == 0, first.stderr
    again = cli(home, "migrate", "--from-sqlite", str(home / "memory.db"), "--tenant", "alice", "--database", pg_url)
    assert again.returncode == 1 and "already holds memory" in again.stderr
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all, just words")
    bad = cli(home, "migrate", "--from-sqlite", str(junk), "--tenant", "bob", "--database", pg_url)
    assert bad.returncode == 1 and "Error:" in bad.stderr and "Traceback" not in bad.stderr
    out = tmp_path / "exists.db"
    out.write_bytes(b"")
    taken = cli(home, "migrate", "--to-sqlite", str(out), "--tenant", "alice", "--database", pg_url)
    assert taken.returncode == 1 and "exists already" in taken.stderr
    nobody = cli(home, "migrate", "--to-sqlite", str(tmp_path / "n.db"), "--tenant", "nobody", "--database", pg_url)
    assert nobody.returncode == 1 and "no tenant" in nobody.stderr
    neither = cli(home, "migrate", "--tenant", "alice", "--database", pg_url)
    assert neither.returncode == 2
    unreachable = cli(home, "migrate", "--to-sqlite", str(tmp_path / "u.db"), "--tenant", "alice", "--database",
                      "postgresql://nobody:sekrit@127.0.0.1:1/none")  # fmt: skip
    assert unreachable.returncode == 1 and "cannot connect" in unreachable.stderr
    assert "sekrit" not in unreachable.stderr + unreachable.stdout
    async with tenant_store(tmp_path / "server", pg_url) as s, s.lease("alice") as t:
        stats = await (await t.eywa()).stats()
        assert stats["sessions"] == {"main": 3} and stats["forgotten"] == 1
