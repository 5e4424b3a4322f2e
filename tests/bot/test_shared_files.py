"""`macupos bot` shares memory.db with the CLI and never loses what it said it remembered.

The real bot runs as a subprocess against the Telegram double; each round the owner sends `/remember`
while another process (`memory stats`, `memory ingest`, a read-only sqlite3) opens and closes the same
file. What the bot acknowledged is read by other processes at once, the bot keeps SQLite's lock throughout
(/proc/locks), and after a kill -9 and a restart everything is there and the file passes SQLite's check.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from tests.bot.app_harness import OWNER, harness
from tests.cli_env import MACUPOS
from tests.doubles.telegram import TelegramDouble
from tests.locks import holds_sqlite_lock
from tests.soak import ROUNDS, Beside, integrity, visible_rows

_REMEMBERED = re.compile(r"Remembered \((tg-[0-9a-f-]+)\)")


async def test_the_bot_keeps_what_it_said_it_remembered_beside_the_cli(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with harness(tmp_path, telegram_double) as h:
        h.write_config_toml()
        beside = Beside(h.home, tmp_path / "beside")
        beside.scratch.mkdir()
        with (tmp_path / "bot.log").open("ab") as log:

            async def start() -> asyncio.subprocess.Process:
                return await asyncio.create_subprocess_exec(
                    str(MACUPOS), "-v", "bot", env=h.env, cwd=str(h.tmp), stdout=log, stderr=log
                )

            def remembered() -> list[str]:
                return [m.group(1) for t in h.texts(OWNER) if (m := _REMEMBERED.search(t))]

            bot = await start()
            try:
                for n in range(ROUNDS):
                    if n:  # memory.db exists once the bot has answered
                        beside.start(n)
                    telegram_double.push_message(OWNER, OWNER, f"/remember soak fact {n:04d}")
                    await telegram_double.wait_for(lambda n=n: len(remembered()) > n or None, timeout=60)
                    if n:
                        await asyncio.to_thread(beside.finish)
                    if n % 10 == 0 or n == ROUNDS - 1:
                        assert holds_sqlite_lock(bot.pid, beside.db), f"round {n}: the bot lost its lock"
                        seen = visible_rows(beside.db, "SELECT id FROM facts")
                        assert set(remembered()) <= seen, f"round {n}: 'Remembered' yet unseen by other processes"
            finally:
                bot.kill()  # SIGKILL, as a power cut
                await bot.wait()
            acknowledged = remembered()
            assert len(acknowledged) == ROUNDS

            bot = await start()
            try:
                telegram_double.push_message(OWNER, OWNER, "/facts")
                await telegram_double.wait_for(lambda: any("soak fact" in t for t in h.texts(OWNER)[ROUNDS:]) or None)
            finally:
                bot.terminate()
                await asyncio.wait_for(bot.wait(), 120)
    assert integrity(beside.db) == "ok"
    assert set(acknowledged) <= visible_rows(beside.db, "SELECT id FROM facts")
    assert set(beside.ingested) <= visible_rows(beside.db, "SELECT session_id FROM sessions")
