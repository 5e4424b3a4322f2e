"""The outbox of a memory-service client: redacted snapshots on disk, sent in order to a real service,
deleted only after a 2xx, kept when the service is unreachable, set aside when refused."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from memory.redact.redactor import Redactor
from memory.remote.client import RemoteEywa
from memory.remote.outbox import Outbox, redact_transcript
from tests.memory.remote_harness import closed_port, pointed, remote_service
from tests.service.conftest import transcript_bytes

SECRET = "ghp_" + "Z7x9Qm2Lk4Vb8Nc1Rt6Yp3Ws5Hd0Jf2Ga7Ke"


def _redacted(text: bytes, name: str = "t.jsonl", tmp: Path | None = None) -> bytes:
    assert tmp is not None
    src = tmp / name
    src.write_bytes(text)
    out = io.BytesIO()
    redact_transcript(src, out, Redactor(("hunter2-owns-this",)))
    return out.getvalue()


def test_redaction_is_line_by_line_and_leaves_clean_lines_and_ids_byte_for_byte(tmp_path: Path) -> None:
    clean = b'{"type": "user",  "sessionId": "s1", "message": {"content": "hello"}}\n'
    dirty = json.dumps(
        {
            "type": "user",
            "sessionId": "s1",
            "uuid": "ghp_notatokenbutanid",
            "message": {"content": f"use {SECRET} and hunter2-owns-this"},
            "toolUseResult": {"password": "correct-horse-battery"},
        }
    ).encode()
    text = b"not json at all: " + SECRET.encode() + b"\n"
    partial = b'{"type": "assistant", "sessionId": "s1", "message": {"content": "cut'
    out = _redacted(clean + dirty + b"\n" + text + partial, tmp=tmp_path)
    lines = out.split(b"\n")
    assert lines[0] + b"\n" == clean  # untouched: the same bytes, spacing and all
    line = json.loads(lines[1])
    assert line["sessionId"] == "s1" and line["uuid"] == "ghp_notatokenbutanid"  # ids are not words
    assert SECRET not in lines[1].decode() and "hunter2-owns-this" not in lines[1].decode()
    assert "correct-horse-battery" not in lines[1].decode() and "[REDACTED:" in lines[1].decode()
    assert SECRET.encode() not in lines[2] and lines[2].startswith(b"not json at all: ")
    assert lines[3] == partial and not out.endswith(b"\n")  # a line still being written stays as it is
    assert _redacted(clean + dirty, tmp=tmp_path) == _redacted(clean + dirty, tmp=tmp_path)  # deterministic


def test_a_later_snapshot_of_a_name_replaces_the_earlier_and_entries_keep_their_order(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox")
    src = tmp_path / "a.jsonl"
    redactor = Redactor()
    for n, name in enumerate(["a", "b", "a"]):
        src.write_bytes(transcript_bytes("s", f"v{n}"))
        outbox.enqueue(src, name, redactor, {"n": n})
    entries = outbox.entries()
    assert [(e.name, e.note["n"]) for e in entries] == [("b", 1), ("a", 2)]
    assert b"v2" in entries[1].body.read_bytes()
    assert oct(os.stat(outbox.folder).st_mode & 0o777) == "0o700"
    assert all(oct(os.stat(e.body).st_mode & 0o777) == "0o600" for e in entries)


async def test_unreachable_keeps_everything_then_a_flush_sends_in_order_and_deletes_after_2xx(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (_, settings):
        redactor = Redactor()
        for sid in ("s1", "s2"):
            src = settings.claude_projects_dir / "p" / f"{sid}.jsonl"
            src.parent.mkdir(parents=True, exist_ok=True)
            src.write_bytes(transcript_bytes(sid, "zebra"))
        with closed_port() as dead:
            async with await RemoteEywa.open(pointed(settings, dead)) as eywa:
                report = await eywa.ingest()
                assert report.files_seen == 2 and report.sessions_new == 0
                flushed = eywa.last_flush
                assert flushed is not None and flushed.waiting == 2 and flushed.sent == []
                assert flushed.error is not None and flushed.error.code == "unreachable"
        junk = tmp_path / "junk.jsonl"
        junk.write_text("this is no transcript\n")
        async with await RemoteEywa.open(settings) as eywa:
            eywa.outbox.enqueue(junk, "files/junk.jsonl", redactor)
            flushed = await eywa.sync()
            assert [e.name for e, _ in flushed.sent] == ["claude/p/s1.jsonl", "claude/p/s2.jsonl"]
            assert [a["counts"]["new"] for _, a in flushed.sent] == [1, 1]
            assert [name for name, _ in flushed.rejected] == ["files/junk.jsonl"]
            assert flushed.waiting == 0 and eywa.outbox.entries() == []
            aside = sorted(p.name for p in (settings.outbox_dir / "rejected").iterdir())
            assert len(aside) == 2 and any(n.endswith(".why.json") for n in aside)  # kept, with the reason
            # Sent again (a flush cut short before its delete): the service takes it as the same file.
            src = settings.claude_projects_dir / "p" / "s1.jsonl"
            eywa.outbox.enqueue(src, "claude/p/s1.jsonl", redactor)
            (again,) = (await eywa.sync()).sent
            assert again[1]["counts"] == {"new": 0, "updated": 0, "unchanged": 1}
            assert (await eywa.stats())["sessions"] == {"main": 2}


async def test_one_flush_at_a_time(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (_, settings), await RemoteEywa.open(settings) as eywa:
        src = tmp_path / "s1.jsonl"
        src.write_bytes(transcript_bytes("s1", "zebra"))
        eywa.outbox.enqueue(src, "files/s1.jsonl", Redactor())
        held = eywa.outbox._try_lock()  # another process's flush, as far as this one can tell
        assert held is not None
        try:
            busy = await eywa.sync(wait_s=0.2)
            assert busy.busy and busy.waiting == 1 and busy.sent == []
        finally:
            os.close(held)
        assert len((await eywa.sync()).sent) == 1
