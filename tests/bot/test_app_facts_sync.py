"""The bot git-syncs the facts folder when it is a repository with a remote, and redacts what it stores."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from tests.bot.app_harness import OWNER, harness
from tests.doubles.telegram import TelegramDouble


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60).stdout


async def test_remembered_facts_reach_the_private_remote(tmp_path: Path, telegram_double: TelegramDouble) -> None:
    remote = tmp_path / "facts.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    async with harness(
        tmp_path, telegram_double, MACUPOS_FACTS_PUSH_EVERY_S="0.2", MACUPOS_SECRETS="hunter2-hunter2"
    ) as h:
        facts = h.home / "facts"
        facts.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=facts)
        git("remote", "add", "origin", str(remote), cwd=facts)
        app = await h.start()
        h.tg.push_message(OWNER, OWNER, "/remember deploys use the vault phrase hunter2-hunter2")
        await h.wait_text(lambda t: t.startswith("🧠 Remembered"))
        await h.wait_handled(app)
        pushed = ""
        async with asyncio.timeout(30):  # a bounded wait for the sync loop's next push (every 0.2 s here)
            while "deploys use the vault phrase" not in pushed:
                await asyncio.sleep(0.1)  # poll interval; git runs off the event loop the bot's sync task shares
                pushed = await asyncio.to_thread(git, "log", "--all", "-p", cwd=remote)
        assert "deploys use the vault phrase" in pushed
        assert "hunter2-hunter2" not in pushed  # the owner's secret is redacted before it is stored
