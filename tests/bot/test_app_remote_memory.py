"""The bot with a memory service (MACUPOS_MEMORY_URL): /remember, /facts and /recall answer from it, and a
session starts grounded on its facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.remote.client import RemoteEywa
from tests.bot.app_harness import OWNER, harness
from tests.doubles.telegram import TelegramDouble
from tests.memory.remote_harness import remote_service
from tests.service.conftest import transcript_bytes

pytestmark = pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")


async def test_the_bot_remembers_and_recalls_through_the_service(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with remote_service(tmp_path / "svc") as (srv, client):
        earlier = tmp_path / "earlier.jsonl"
        earlier.write_bytes(transcript_bytes("earlier", "okapi", "migration"))
        async with await RemoteEywa.open(client) as eywa:
            await eywa.ingest([earlier])
        async with harness(tmp_path, telegram_double, MACUPOS_MEMORY_URL=srv.url, MACUPOS_API_KEY=client.api_key) as h:
            await h.start()
            h.tg.push_message(OWNER, OWNER, "/remember deploys go through make release")
            await h.wait_text(lambda t: t.startswith("🧠 Remembered"))
            h.tg.push_message(OWNER, OWNER, "/facts")
            assert "make release" in await h.wait_text(lambda t: "Injected into new sessions" in t)
            h.tg.push_message(OWNER, OWNER, "/recall okapi")
            assert "earlier" in await h.wait_text(lambda t: "okapi" in t.lower() and "earlier" in t)
            h.claude.enqueue("noted")
            h.tg.push_message(OWNER, OWNER, "hello")
            await h.wait_text(lambda t: t == "noted")
            assert "make release" in str(h.claude.bodies[0]["system"])
        async with await RemoteEywa.open(client) as eywa:  # the fact lives in the service, not on this machine
            assert (await eywa.stats())["facts"]["memories"] == 1
