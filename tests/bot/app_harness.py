"""End-to-end harness for the bot: the real python-telegram-bot against the Bot API double and the real
Claude Code CLI against the Anthropic double, with real SQLite files under tmp_path."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.app import BotApp
from bot.services import Tuning
from bot.settings import BotSettings
from bot.voice.speak import Speaker
from bot.voice.transcribe import Transcriber
from relay.process import kill_marked
from relay.settings import RelaySettings
from tests.doubles.anthropic import AnthropicDouble, cli_env
from tests.doubles.telegram import Call, TelegramDouble

OWNER = 42  # private chat: chat id == user id
FRIEND = 43  # also on the allowlist, but not the owner of the owner's runs
STRANGER = 666

FAST = Tuning(session_idle_s=0.0, min_edit_interval_s=0.05, heartbeat_s=5.0, poll_timeout_s=5.0)


class GatedDouble(AnthropicDouble):
    """The Messages double that can hold the next ``hold`` requests until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = 0
        self.arrivals = 0  # every POST /v1/messages, held or not
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.arrived: list[dict[str, Any]] = []  # every request body as it arrives, held ones included

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.arrivals += 1
        body = await request.json()  # aiohttp keeps the body: the logging below reads it again
        if isinstance(body, dict):
            self.arrived.append(body)
        if self.hold > 0:
            self.hold -= 1
            self.held.set()
            await self.release.wait()
        return await super()._messages(request)


@dataclass
class Harness:
    tg: TelegramDouble
    claude: GatedDouble
    tmp: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    apps: list[BotApp] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.tmp / "home"

    @property
    def project(self) -> Path:
        return self.tmp / "billing"

    @property
    def env(self) -> dict[str, str]:
        claude_home = self.tmp / "claude-home"
        return {
            **cli_env(self.claude.base_url, str(claude_home)),
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "TELEGRAM_BOT_TOKEN": self.tg.token,
            "MACUPOS_ALLOWED_USERS": f"{OWNER},{FRIEND}",
            "MACUPOS_TELEGRAM_API_URL": self.tg.api_url,
            "MACUPOS_HOME": str(self.home),
            "MACUPOS_PROJECTS": f"billing={self.project},other={self.tmp / 'other'}",
            "MACUPOS_MEMORY_LLM": "0",
            "CODEX_HOME": str(self.tmp / "codex"),
            **self.extra_env,
        }

    def settings(self) -> BotSettings:
        return BotSettings.from_env(self.env, cwd=self.tmp)

    def relay(self, settings: BotSettings, **table: Any) -> RelaySettings:
        relay_table = {"setting_sources": [], "memory_mcp": "0", **table}
        return RelaySettings.from_env(settings.agent_env, {"relay": relay_table}, memory=settings.memory)

    def write_config_toml(self) -> None:
        """What ``macupos bot`` in a subprocess reads: the same hermetic relay settings."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "config.toml").write_text('[relay]\nsetting_sources = []\nmemory_mcp = "0"\n', encoding="utf-8")

    async def start(
        self,
        *,
        tuning: Tuning = FAST,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
        **relay_table: Any,
    ) -> BotApp:
        settings = self.settings()
        relay = self.relay(settings, **relay_table)
        app = BotApp(settings, relay, tuning=tuning, transcriber=transcriber, speaker=speaker)
        await app.start()
        self.apps.append(app)
        return app

    # -- reading what the bot did -------------------------------------------------------------------

    def sent(self, chat_id: int = OWNER, method: str = "sendMessage") -> list[Call]:
        return [c for c in self.tg.sent if c.method == method and c.params.get("chat_id") == chat_id]

    def texts(self, chat_id: int = OWNER) -> list[str]:
        return self.tg.texts(chat_id)

    async def wait_text(
        self,
        predicate: Callable[[str], bool],
        chat_id: int = OWNER,
        timeout: float = 60.0,  # noqa: ASYNC109
    ) -> str:
        def find() -> str:
            return next((t for t in self.texts(chat_id) if predicate(t)), "")

        return await self.tg.wait_for(find, timeout=timeout)

    async def wait_message(
        self,
        predicate: Callable[[Mapping[str, Any]], bool],
        chat_id: int = OWNER,
        timeout: float = 60.0,  # noqa: ASYNC109 - bounded waits, as TelegramDouble.wait_for
    ) -> dict[str, Any]:
        """A bot message as it stands now (edits applied)."""

        def find() -> dict[str, Any] | None:
            return next((m for m in self.tg.messages(chat_id).values() if predicate(m)), None)

        found = await self.tg.wait_for(find, timeout=timeout)
        assert found is not None
        return found

    async def wait_handled(self, app: BotApp) -> None:
        """Every pushed update fetched and every dispatched handler finished."""
        await self.tg.wait_for(lambda: not self.tg.pending, timeout=30)
        assert app.intake is not None
        await asyncio.wait_for(app.intake.idle(), 60)

    async def wait_sessions_idle(self, app: BotApp) -> None:
        """Every lane's worker finished (the runs' bookkeeping after their answers included)."""
        sessions = app.sessions
        assert sessions is not None
        await self.tg.wait_for(lambda: sessions.idle, timeout=120)


def buttons(message: Mapping[str, Any]) -> dict[str, str]:
    """Label → callback_data of a message's inline keyboard."""
    rows = (message.get("reply_markup") or {}).get("inline_keyboard") or []
    return {b["text"]: b["callback_data"] for row in rows for b in row}


def button(message: Mapping[str, Any], label_part: str) -> str:
    found = [data for label, data in buttons(message).items() if label_part in label]
    assert found, f"no button with {label_part!r} in {buttons(message)}"
    return found[0]


@asynccontextmanager
async def harness(tmp_path: Path, tg: TelegramDouble, **extra_env: str) -> AsyncIterator[Harness]:
    claude = GatedDouble()
    await claude.start()
    h = Harness(tg, claude, tmp_path, dict(extra_env))
    h.project.mkdir(parents=True, exist_ok=True)
    (tmp_path / "other").mkdir(exist_ok=True)
    try:
        yield h
    finally:
        claude.release.set()
        for app in reversed(h.apps):
            await app.stop()
        kill_marked("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home" / ".claude"))
        await claude.stop()
