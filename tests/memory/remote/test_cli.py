"""`macupos memory …` as a real process with MACUPOS_MEMORY_URL and MACUPOS_API_KEY: the same commands, the
same output, against a real service; what works on local files only says so in one line (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.memory.remote_harness import client_env, closed_port, macupos, pointed, remote_service
from tests.service.conftest import transcript_bytes


async def test_the_memory_commands_use_the_service(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (_, settings):
        env = client_env(settings)
        folder = settings.claude_projects_dir / "-srv-app"
        folder.mkdir(parents=True)
        (folder / "s1.jsonl").write_bytes(transcript_bytes("s1", "zebra", "quokka"))

        rc, out, err = await macupos(env, "memory", "ingest")
        assert rc == 0, err
        assert out.startswith("1 files (0 unchanged); sessions: 1 new, 0 updated, 0 unchanged; 1 handoffs extracted")
        rc, out, _ = await macupos(env, "memory", "get", "zebra", "--as-of", "2026-03-05T00:00:00Z")
        assert rc == 0 and "[[RECALLED" in out and "zebra" in out
        rc, out, _ = await macupos(env, "memory", "list", "--json")
        assert rc == 0 and [h["session_id"] for h in json.loads(out)] == ["s1"]
        rc, out, _ = await macupos(env, "memory", "stats", "--json")
        stats = json.loads(out)
        assert rc == 0 and stats["tenant"] == "alice" and stats["service"] == settings.memory_url
        rc, out, _ = await macupos(env, "memory", "script", "remember e user Fact predicate p object Helix")
        assert rc == 0
        rc, out, _ = await macupos(env, "memory", "facts", "show")
        assert rc == 0 and "Helix" in out
        rc, out, _ = await macupos(env, "memory", "export", str(tmp_path / "out"))
        assert rc == 0 and out.startswith("exported 1 handoff(s)")
        for args in (("recover",), ("rebuild",), ("extract", "s1")):
            rc, out, err = await macupos(env, "memory", *args)
            assert rc == 1 and err.startswith("Error: ") and err.count("\n") == 1, (args, err)
            assert "memory service" in err and settings.api_key not in err
        rc, out, _ = await macupos(env, "memory", "forget", "s1")
        assert rc == 0 and out.strip() == "forgot 1 session(s): s1"

        with closed_port() as dead:
            down = client_env(pointed(settings, dead))
            (folder / "s2.jsonl").write_bytes(transcript_bytes("s2", "walrus"))
            rc, out, err = await macupos(down, "memory", "ingest")
            assert rc == 0, err  # read and queued: nothing is lost
            assert "1 upload(s) wait in" in err and "memory sync" in err
            rc, out, err = await macupos(down, "memory", "get", "zebra")
            assert rc == 1 and err.startswith("Error: memory service at http://127.0.0.1:") and err.count("\n") == 1
        rc, out, err = await macupos(env, "memory", "sync")
        assert rc == 0 and out.startswith("sent 1 upload(s) (1 session(s)); 0 waiting"), err
