"""The bot end to end: follow-up → first request at the Claude double in a live session, and a stranger flood.

Both run the whole bot (``bot.app.BotApp``) under the real python-telegram-bot against the Bot API double,
with the real Claude Code CLI against a zero-latency Anthropic double.

- ``followup``: after one warm-up instruction (the CLI starts), each follow-up's time from the push of the
  update to the arrival of its request at the Claude double (target p50 ≤ 150 ms).
- ``strangers``: N updates of every kind from users not on the allowlist: wall time, updates/s, and the
  proof that nothing ran (0 requests at the Claude double, 0 stored updates, ≤ 1 refusal per chat).

Run: .venv/bin/python -m bench.bot_latency [--followups 20] [--strangers 10000] [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench._harness import run_and_emit
from bot.auth import REFUSAL_TEXT
from tests.bot.app_harness import FAST, OWNER, harness
from tests.bot.test_app_security import _stranger_update
from tests.doubles.telegram import TelegramDouble


async def followup(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        async with TelegramDouble() as tg, harness(Path(folder), tg) as h:
            h.claude.default = "done"
            await h.start(tuning=replace(FAST, session_idle_s=600.0))
            h.tg.push_message(OWNER, OWNER, "warm up")
            await h.tg.wait_for(lambda: "done" in h.texts(), timeout=120)
            samples: list[float] = []
            for n in range(runs):
                before = h.claude.arrivals
                answers = h.texts().count("done")
                started = time.perf_counter()
                h.tg.push_message(OWNER, OWNER, f"follow-up {n}")
                await h.tg.wait_for(lambda b=before: h.claude.arrivals > b, timeout=60)
                samples.append((time.perf_counter() - started) * 1000)
                await h.tg.wait_for(lambda a=answers: h.texts().count("done") > a, timeout=60)
    return {
        "runs": runs,
        "p50_ms": round(statistics.median(samples), 1),
        "max_ms": round(max(samples), 1),
        "target_p50_ms": 150,
    }


async def strangers(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        async with TelegramDouble() as tg, harness(Path(folder), tg) as h:
            app = await h.start()
            assert app.services is not None
            started = time.perf_counter()
            for n in range(count):
                _stranger_update(h.tg, n)
            await h.wait_handled(app)
            elapsed = time.perf_counter() - started
            refusals = Counter(
                int(c.params["chat_id"])
                for c in h.tg.sent
                if c.method == "sendMessage" and c.params.get("text") == REFUSAL_TEXT
            )
            stored = await app.services.state.last_update_id()
            return {
                "updates": count,
                "seconds": round(elapsed, 2),
                "updates_per_s": round(count / elapsed),
                "claude_requests": h.claude.arrivals,
                "stored_updates": 0 if stored is None else stored,
                "max_refusals_per_chat": max(refusals.values(), default=0),
            }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    return {"followup": await followup(args.followups), "strangers": await strangers(args.strangers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followups", type=int, default=20)
    parser.add_argument("--strangers", type=int, default=10_000)
    run_and_emit(parser, main_async)


if __name__ == "__main__":
    main()
