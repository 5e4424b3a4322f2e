"""Webhook mode: only Telegram, which knows the registered secret token, can deliver updates."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp

from bot.app import BotApp
from tests.bot.app_harness import FAST, OWNER, harness
from tests.doubles.telegram import TelegramDouble


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_webhook_post_without_the_secret_is_refused_and_runs_nothing(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    async with harness(tmp_path, telegram_double, MACUPOS_WEBHOOK_URL=url) as h:
        h.claude.enqueue("hello from the webhook")
        settings = h.settings()
        app = BotApp(settings, h.relay(settings), tuning=FAST, webhook_listen=("127.0.0.1", port))
        await app.start()
        h.apps.append(app)
        secret = str(h.tg.webhook.get("secret_token", ""))
        assert h.tg.webhook.get("url") == url and len(secret) >= 32

        forged = {
            "update_id": 900,
            "message": {
                "message_id": 1,
                "date": 0,
                "text": "rm -rf everything",
                "chat": {"id": OWNER, "type": "private"},
                "from": {"id": OWNER, "is_bot": False, "first_name": "O"},
            },
        }
        real = {**forged, "update_id": 901, "message": {**forged["message"], "message_id": 2, "text": "say hello"}}
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=forged) as resp:
                assert resp.status == 403
            async with http.post(
                url, json=forged, headers={"X-Telegram-Bot-Api-Secret-Token": "guessed-" + secret[:8]}
            ) as resp:
                assert resp.status == 403
            async with http.post(url, json=real, headers={"X-Telegram-Bot-Api-Secret-Token": secret}) as resp:
                assert resp.status == 200
        await h.wait_text(lambda t: t == "hello from the webhook")
        assert h.claude.arrivals == 1
        assert "rm -rf" not in str(h.claude.bodies)
