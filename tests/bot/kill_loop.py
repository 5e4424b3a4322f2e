"""What the kill -9 loops share (tests/bot/test_crash_loop.py, tests/bot/test_schedule_crash.py): the real
`macupos bot` as a subprocess that is SIGKILLed as in a power cut, what the owner and the model saw, and bot.db
read as it is on disk."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from relay.process import kill_marked
from tests.bot.app_harness import OWNER, Harness, buttons
from tests.cli_env import MACUPOS
from tests.doubles.anthropic import last_user_text

RESUME_NOTE = "restarted while you were working"


@dataclass
class BotProcess:
    """One `macupos bot` process at a time; all of them write one log file."""

    h: Harness
    log: BinaryIO
    process: asyncio.subprocess.Process | None = None
    starts: int = 0

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            str(MACUPOS), "-v", "bot", env=self.h.env, cwd=str(self.h.tmp), stdout=self.log, stderr=self.log
        )
        self.starts += 1

    async def kill(self) -> None:
        """SIGKILL, as a power cut: no cleanup of any kind. Its Claude Code CLI goes with it, as in a power cut."""
        assert self.process is not None
        self.process.kill()
        await self.process.wait()
        kill_marked("CLAUDE_CONFIG_DIR", str(self.h.tmp / "claude-home" / ".claude"))

    async def stop(self) -> int:
        assert self.process is not None
        self.process.terminate()
        return await asyncio.wait_for(self.process.wait(), 120)


@dataclass
class Seen:
    """What the owner and the model saw, read from the doubles; ``tasks`` finds the test's instructions in a text
    (each answered ``done: <instruction>``)."""

    h: Harness
    tasks: re.Pattern[str]

    def texts(self) -> list[str]:
        return self.h.texts(OWNER)

    def asked(self, x: str) -> int:
        """How many requests asked the model to do ``x`` (a Resume's note, which says so, not counted)."""
        return sum(
            1
            for body in self.h.claude.bodies
            if self.tasks.findall(last_user_text(body))[-1:] == [x] and RESUME_NOTE not in last_user_text(body)
        )

    def answers(self, x: str) -> int:
        return sum(f"done: {x}" in t for t in self.texts())

    def carded(self, x: str) -> bool:
        """A restart card names ``x`` and carries its Resume button."""
        return any(
            "restarted while working on" in str(m.get("text", ""))
            and x in str(m.get("text", ""))
            and any("Resume" in label for label in buttons(m))
            for m in self.h.tg.messages(OWNER).values()
        )


def latest_card(h: Harness) -> dict[str, Any] | None:
    """The newest restart card that still carries its Resume button."""
    cards = [
        m
        for m in h.tg.messages(OWNER).values()
        if "restarted while working on" in str(m.get("text", "")) and any("Resume" in b for b in buttons(m))
    ]
    return max(cards, key=lambda m: int(m["message_id"])) if cards else None


def bot_db(h: Harness) -> contextlib.closing[sqlite3.Connection]:
    """bot.db, read-only, as the killed and the running bot left it."""
    return contextlib.closing(sqlite3.connect(f"file:{h.home / 'bot.db'}?mode=ro", uri=True, timeout=30))


def answering(tasks: re.Pattern[str]) -> Callable[[Mapping[str, Any]], str]:
    """The model double's answer: ``done: <instruction>`` for the last instruction ``tasks`` finds in the request."""

    def answer(body: Mapping[str, Any]) -> str:
        found = tasks.findall(last_user_text(body))
        return f"done: {found[-1]}" if found else "ok"

    return answer
