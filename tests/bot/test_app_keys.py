"""``/key`` and ``/keys`` against a real ``macupos serve``: the owner gets a key shown once, in a message deleted
after ten minutes of the bot's clock (the test's own: no waiting), lists the tenant's keys and revokes one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.keys_command import KEY_SHOWN_S
from bot.roles import ONLY_OWNER
from tests.bot.app_harness import FRIEND, OWNER, button, harness
from tests.doubles.telegram import TelegramDouble
from tests.service.conftest import running_service

pytestmark = pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_the_owner_issues_a_key_shown_once_and_revokes_it(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with running_service(tmp_path / "server") as srv:
        admin = await srv.add_key("alice", "admin")
        async with harness(tmp_path, telegram_double, MACUPOS_MEMORY_URL=srv.url, MACUPOS_API_KEY=admin) as h:
            app = await h.start()
            clock = app.keys.clock = Clock(1_800_000_000.0)
            h.tg.push_message(FRIEND, FRIEND, "/key write")  # on the allowlist, but not the owner
            await h.wait_text(lambda t: t == ONLY_OWNER, chat_id=FRIEND)

            h.tg.push_message(OWNER, OWNER, "/key write")
            shown = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🔑 New <b>write</b> key"))
            found = re.search(r"<code>([^<]+)</code>", shown["text"])
            assert found is not None
            secret = found.group(1)
            assert "tenant <b>alice</b>" in shown["text"] and "deleted in 10 minutes" in shown["text"]
            async with srv.client(secret) as http:  # the key works, for alice
                assert (await http.get("/v1/handoffs")).status_code == 200
            async with srv.client(admin) as http:
                listed = (await http.get("/v1/keys")).json()["keys"]
            made = next(k for k in listed if k["scope"] == "write" and "telegram /key" in (k["label"] or ""))

            clock.now += KEY_SHOWN_S - 1
            assert await app.keys.sweep() == 0
            assert shown["message_id"] in h.tg.messages(OWNER)
            clock.now += 2
            assert await app.keys.sweep() == 1
            assert shown["message_id"] not in h.tg.messages(OWNER)
            assert await app.keys.sweep() == 0  # done once

            h.tg.push_message(OWNER, OWNER, "/keys")
            listing = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🔑 Keys of tenant alice"))
            h.tg.push_callback(OWNER, OWNER, listing["message_id"], button(listing, f"Revoke #{made['id']}"))
            await h.wait_text(lambda t: t.startswith(f"🗑 Key #{made['id']} revoked by @user{OWNER}"))
            async with srv.client(secret) as http:
                assert (await http.get("/v1/handoffs")).status_code == 401
            async with srv.client(admin) as http:
                listed = (await http.get("/v1/keys")).json()["keys"]
            assert next(k for k in listed if k["id"] == made["id"])["revoked_at"]


async def test_a_key_that_is_not_admin_is_named_as_the_problem(tmp_path: Path, telegram_double: TelegramDouble) -> None:
    async with running_service(tmp_path / "server") as srv:
        write = await srv.add_key("alice", "write")
        async with harness(tmp_path, telegram_double, MACUPOS_MEMORY_URL=srv.url, MACUPOS_API_KEY=write) as h:
            await h.start()
            h.tg.push_message(OWNER, OWNER, "/key")
            said = await h.wait_text(lambda t: t.startswith("🔑"))
            assert "not an admin key" in said and "--scope admin" in said
