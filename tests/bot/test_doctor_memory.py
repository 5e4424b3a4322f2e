"""macupos doctor's memory-service check against a real service: reachable, the key known, its scope, the
outbox; each failure with its fix, and never the key."""

from __future__ import annotations

from pathlib import Path

from bot.doctor import format_checks, run_doctor
from memory.redact.redactor import Redactor
from memory.remote.outbox import Outbox
from tests.bot.test_doctor import by_name, settings_for
from tests.memory.remote_harness import blackhole, closed_port, remote_service
from tests.service.conftest import transcript_bytes

BOGUS = "mpk_000000000000_" + "x" * 43


async def _check(tmp_path: Path, url: str, key: str, *, quick: bool = False) -> tuple[str, str]:
    settings = settings_for(tmp_path, MACUPOS_MEMORY_URL=url, MACUPOS_API_KEY=key)
    checks = await run_doctor(
        settings, telegram=False, whisper=False, clis=False, thorough_db=False, service=not quick, timeout_s=1.0
    )
    check = by_name(checks)["memory service"]
    text = format_checks([check])
    assert key not in text
    return ("ok" if check.ok and not check.warning else "warning" if check.ok else "failed"), text


async def test_the_memory_service_check_names_each_problem_and_its_fix(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (srv, client):
        verdict, text = await _check(tmp_path, srv.url, client.api_key)
        assert verdict == "ok" and "tenant alice, write key" in text

        verdict, text = await _check(tmp_path, srv.url, BOGUS)
        assert verdict == "failed" and "the key is unknown or revoked" in text and "macupos serve keys create" in text

        read_key = await srv.add_key("alice", "read")
        verdict, text = await _check(tmp_path, srv.url, read_key)
        assert verdict == "failed" and "may only read" in text and "--scope write" in text

        src = tmp_path / "s.jsonl"
        src.write_bytes(transcript_bytes("s", "zebra"))
        Outbox(Path(settings_for(tmp_path).memory.outbox_dir)).enqueue(src, "files/s.jsonl", Redactor())
        verdict, text = await _check(tmp_path, srv.url, client.api_key)
        assert verdict == "warning" and "1 upload(s) wait" in text and "fix: macupos memory sync" in text

    for unreachable in (closed_port, blackhole):
        with unreachable() as url:
            verdict, text = await _check(tmp_path, url, BOGUS)
        assert verdict == "failed" and "macupos serve" in text

    with closed_port() as url:  # --quick contacts nothing
        verdict, text = await _check(tmp_path, url, BOGUS, quick=True)
    assert verdict == "warning" and "not contacted" in text  # the outbox still waits

    verdict, text = await _check(tmp_path, "http://192.0.2.1:8750", BOGUS, quick=True)
    assert verdict == "warning" and "unencrypted" in text
