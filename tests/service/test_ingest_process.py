"""An upload past `Limits.ingest_in_process_bytes` is ingested in a child process (service/ingest_process.py):
the same answers as on a thread, a spare child kept ready, and a child killed mid-ingest is a clear error
that loses nothing the server had acknowledged."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

from service.settings import Limits
from tests.service.conftest import running_service, transcript_bytes

_CHILD = b"service.ingest_process"


def _children() -> set[int]:
    """The ingest processes under this test process (the in-process server's children)."""
    pid = os.getpid()
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if _CHILD in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.add(int(child))
            except OSError:
                continue  # ended meanwhile
    return found


async def _spare(not_in: frozenset[int] = frozenset()) -> int:
    for _ in range(600):  # a spare starts in about 0.3 s: at most 30 s
        ready = _children() - not_in
        if ready:
            return min(ready)
        await asyncio.sleep(0.05)
    raise AssertionError("no spare ingest process started")


async def test_a_large_upload_is_ingested_in_a_child_with_the_same_answers(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, ingest_in_process_bytes=0)  # every upload goes to a child
    async with running_service(tmp_path / "home", limits=limits) as srv:
        key = await srv.add_key("alice")
        first = await _spare()
        async with srv.client(key) as c:
            body = transcript_bytes("big-1", "zeppelin", turns=6)
            made = await c.post("/v1/transcripts", params={"name": "big-1.jsonl"}, content=body)
            assert made.status_code == 200, made.text
            assert made.json()["sessions"] == ["big-1"] and made.json()["counts"]["new"] == 1
            assert made.json()["handoffs_extracted"] == 1
            assert first not in _children()  # the spare did the ingest and is gone
            second = await _spare(frozenset({first}))
            again = await c.post("/v1/transcripts", params={"name": "big-1.jsonl"}, content=body)
            assert again.json()["counts"] == {"new": 0, "updated": 0, "unchanged": 1}
            assert second not in _children()
            junk = await c.post("/v1/transcripts", params={"name": "notes.jsonl"}, content=b"not json at all\n" * 50)
            assert junk.status_code == 422 and "not a transcript" in junk.text
            found = (await c.get("/v1/get", params={"q": "zeppelin", "as_of": "2026-03-05T00:00:00Z"})).json()
            assert [r["session_id"] for r in found] == ["big-1"]
    assert _children() == set()  # the spare is stopped with the server


async def test_a_child_killed_mid_ingest_is_a_clear_error_and_the_next_upload_goes_in(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, ingest_in_process_bytes=0)
    async with running_service(tmp_path / "home", limits=limits) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            first = transcript_bytes("a0", "w")
            seeded = await c.post("/v1/transcripts", params={"name": "a0.jsonl"}, content=first)
            assert seeded.status_code == 200
            grown = transcript_bytes("a0", "w", turns=5)
            worker = await _spare()
            # The next ingest waits at its first write while another connection holds the write lock.
            holder = sqlite3.connect(srv.home / "tenants" / "alice" / "memory.db", timeout=5, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            try:
                upload = asyncio.create_task(c.post("/v1/transcripts", params={"name": "a0.jsonl"}, content=grown))
                db = srv.home / "tenants" / "alice" / "memory.db"
                for _ in range(600):  # until the spare has taken the job and opened the database: at most 30 s
                    if upload.done() or _has_open(worker, db):
                        break
                    await asyncio.sleep(0.05)
                assert not upload.done(), upload.result().text
                os.kill(worker, signal.SIGKILL)  # a power cut of the ingest alone
                answer = await upload
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            assert answer.status_code == 500
            assert "memory store failed" in answer.text
            assert (await c.get("/v1/sessions/a0")).status_code == 200  # acknowledged before: still there
            spooled = [p for p in (srv.home / "tenants" / "alice" / "spool" / "transcripts").rglob("*") if p.is_file()]
            assert [p.read_bytes() for p in spooled] == [first]  # the last good upload of the name, no .prev left
            retry = await c.post("/v1/transcripts", params={"name": "a0.jsonl"}, content=grown)
            assert retry.status_code == 200 and retry.json()["counts"]["updated"] == 1


def _has_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (SQLite opened it: the child is at work)."""
    want = str(path.resolve())
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == want:
                return True
        except OSError:
            continue
    return False
