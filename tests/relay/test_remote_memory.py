"""`macupos relay ask` with a memory service: the session is grounded on the service's handoffs and facts,
and what it leaves goes to the service (its cost stays in the local ledger)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from memory.remote.client import RemoteEywa
from memory.remote.facts import RemoteFacts
from tests.doubles.anthropic import AnthropicDouble
from tests.memory.remote_harness import remote_service
from tests.relay.test_cli import macupos
from tests.service.conftest import transcript_bytes


async def test_ask_recalls_the_services_handoffs_and_facts_and_leaves_its_session_there(
    anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str], tmp_path: Path
) -> None:
    async with remote_service(tmp_path) as (_, settings):
        earlier = tmp_path / "earlier.jsonl"
        earlier.write_bytes(transcript_bytes("earlier", "okapi", "migration", cwd=str(tmp_path)))
        async with await RemoteEywa.open(settings) as eywa:
            await eywa.ingest([earlier])
        facts = await RemoteFacts.open(settings)
        try:
            await facts.remember("editor", "user", "Fact", {"predicate": "favorite-editor", "object": "Helix"})
        finally:
            await facts.close()
        home = settings.home
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'[relay]\nsetting_sources = []\nmemory_mcp = false\n[memory]\nurl = "{settings.memory_url}"\n'
            f'api_key = "{settings.api_key}"\n',
            encoding="utf-8",
        )
        env = {
            **claude_cli_env,
            "MACUPOS_HOME": str(home),
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "MACUPOS_MEMORY_LLM": "0",
            "CODEX_HOME": str(tmp_path / "codex"),
        }
        anthropic_double.enqueue("the okapi migration is done")
        rc, out, err = await macupos(
            env, "relay", "ask", "how did the okapi migration go?", "--project", str(tmp_path), "--json", "--no-codex"
        )
        assert rc == 0, err
        session_id = json.loads(out)["session_id"]
        system = str(anthropic_double.bodies[0]["system"])
        assert "handoff of session earlier" in system and "okapi" in system  # recalled from the service
        assert "favorite-editor" in system and "Helix" in system
        async with await RemoteEywa.open(settings) as eywa:
            view = await eywa.show(session_id)  # the session went to the service, with its handoff
            assert view.handoff is not None and eywa.outbox.entries() == []
    with sqlite3.connect(home / "memory.db") as db:  # the cost stays on this machine
        assert db.execute("SELECT count(*) FROM ledger WHERE session_id = ?", (session_id,)).fetchone()[0] >= 1
