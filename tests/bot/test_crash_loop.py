"""`macupos bot` SIGKILLed at 20 random points across receive / claim / run / reply while Telegram delivers
every update three times: each instruction runs exactly once, or is reported with its Resume button and not
run again (a run cut mid-way reached the model once); none is lost, none runs twice. Resume on the last card
then runs what waited behind the cut run, once each.

The points are drawn from a seeded RNG inside four windows measured on a clean first run (from the update's
delivery: until it is stored, until its run starts, until the model is asked, until the answer is sent). The
seed is in every failure message. The real bot runs as a subprocess against the Telegram double, the real
Claude Code CLI against the Anthropic double; what is checked is what the owner sees (answers, restart cards
and their buttons), what the model was asked, and bot.db.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.bot.kill_loop import BotProcess, Seen, answering, bot_db, latest_card
from tests.doubles.telegram import TelegramDouble

KILLS = 20  # the count docs/decisions.md promises
SEED = 20261201
PHASES = ("receive", "claim", "run", "reply")
_INSTRUCTION = re.compile(r"instruction \d\d of the crash loop")


def _instruction(n: int) -> str:
    return f"instruction {n:02d} of the crash loop"  # none is a part of another


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        hh.write_config_toml()
        hh.claude.default = answering(_INSTRUCTION)
        telegram_double.deliver_each(3)
        yield hh


class _Seen(Seen):
    """What the owner and the model saw of the loop's instructions."""

    def __init__(self, h: Harness) -> None:
        super().__init__(h, _INSTRUCTION)

    def answered(self, x: str) -> bool:
        return self.answers(x) > 0

    def started(self, x: str) -> bool:
        return any(t.startswith("⏳") and x in t for t in self.texts())

    def cut(self, x: str) -> bool:
        return any("I stopped while handling" in t and x in t for t in self.texts())


@dataclass
class _Windows:
    """Seconds after an update's delivery at which each phase ended in a clean run."""

    claimed: float
    run_started: float
    model_asked: float
    answered: float
    bounds: dict[str, tuple[float, float]] = field(init=False)

    def __post_init__(self) -> None:
        self.bounds = {
            "receive": (0.0, self.claimed),
            "claim": (self.claimed, self.run_started),
            "run": (self.run_started, self.model_asked),
            "reply": (self.model_asked, self.answered + 0.2),
        }


async def _measure(h: Harness, bot: BotProcess, seen: _Seen) -> _Windows:
    """A clean first instruction, timed from its delivery: the windows the kill points are drawn from."""
    loop = asyncio.get_running_loop()
    x = _instruction(0)
    uid = h.tg.push_message(OWNER, OWNER, x)["update_id"]
    await bot.start()
    await h.tg.wait_for(lambda: h.tg.deliveries(uid) >= 1, timeout=120)
    t0, wall0 = loop.time(), time.time()
    await h.tg.wait_for(lambda: seen.started(x), timeout=60)
    run_started = loop.time() - t0
    await h.tg.wait_for(lambda: seen.asked(x) >= 1 or seen.answered(x), timeout=90)
    model_asked = loop.time() - t0
    await h.tg.wait_for(lambda: seen.answered(x), timeout=90)
    answered = loop.time() - t0
    with bot_db(h) as conn:
        received_at = conn.execute("SELECT received_at FROM updates WHERE update_id = ?", (uid,)).fetchone()[0]
    claimed = min(max(received_at - wall0, 0.001), run_started)
    return _Windows(claimed, run_started, model_asked, answered)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 21 starts of the real bot, each importing its whole stack: minutes on 2 cores
async def test_a_bot_killed_at_20_random_points_runs_each_instruction_once_or_reports_it(h: Harness) -> None:
    rng = random.Random(SEED)
    seen = _Seen(h)
    with (h.tmp / "bot.log").open("ab") as log:
        bot = BotProcess(h, log)
        windows = await _measure(h, bot, seen)
        await bot.kill()
        sent = [_instruction(0)]
        ids_sent = [1]
        kills: list[tuple[str, float]] = []
        for i in range(KILLS):
            phase = PHASES[i % len(PHASES)]
            lo, hi = windows.bounds[phase]
            at = rng.uniform(lo, hi)
            # Now and then two at once: the second waits in the chat's queue behind the first.
            new = [_instruction(len(sent) + k) for k in range(2 if i % 5 == 4 else 1)]
            ids = [h.tg.push_message(OWNER, OWNER, x)["update_id"] for x in new]
            sent += new
            ids_sent += ids
            await bot.start()
            first: int = ids[0]
            await h.tg.wait_for(lambda: h.tg.deliveries(first) >= 1, timeout=120)  # noqa: B023 - awaited here
            await asyncio.sleep(at)  # the drawn kill point: a random wait is the point of this test
            await bot.kill()
            kills.append((phase, round(at, 3)))

        # The last start runs to the end: whatever is left is handled, or reported.
        await bot.start()
        where = f"seed {SEED}, kills {kills}, log {h.tmp / 'bot.log'}"

        def settled() -> bool:
            return not h.tg.pending and all(seen.answered(x) or seen.carded(x) or x in _held(h) for x in sent)

        try:
            await h.tg.wait_for(settled, timeout=240)
        except TimeoutError as e:
            left = [x for x in sent if not (seen.answered(x) or seen.carded(x) or x in _held(h))]
            raise AssertionError(
                f"unsettled: pending {h.tg.pending}, left {left}; {_rows(h)}; texts {seen.texts()[-12:]}; {where}"
            ) from e
        # The owner presses Resume on the latest card: its run continues and what waited behind it runs.
        held = _held(h)
        card = latest_card(h)
        resumed = ""
        if card is not None:
            resumed = _INSTRUCTION.findall(str(card["text"]))[0]
            before = seen.answers(resumed)  # the cut run may have answered before it was cut: count a new one
            h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "Resume"))
            await h.tg.wait_for(
                lambda: seen.answers(resumed) > before and all(seen.answered(x) for x in held), timeout=240
            )

        def finished() -> bool:  # the answers are out; their runs' bookkeeping follows them
            with bot_db(h) as conn:
                return not conn.execute("SELECT id FROM runs WHERE status = 'running'").fetchall()

        await h.tg.wait_for(finished, timeout=60)
        assert await bot.stop() == 0, where

    for x in sent:
        asked, answers = seen.asked(x), seen.answers(x)
        assert asked <= 1 and answers <= 1 + (x == resumed), f"{x!r} ran {asked} times; {where}"
        if x in held:
            assert asked == 1 and answers == 1, f"{x!r} waited behind a cut run, then ran {asked} times; {where}"
        elif answers and x != resumed:
            assert asked == 1, f"{x!r} answered without a run; {where}"
        elif not answers:
            assert seen.carded(x), f"{x!r} was lost: neither run nor reported with its Resume button; {where}"
        assert not seen.cut(x), f"{x!r} was reported cut without a Resume button; {where}"
    with bot_db(h) as conn:
        open_updates = conn.execute("SELECT update_id, status FROM updates WHERE status IN ('received', 'handling')")
        assert open_updates.fetchall() == [], where
        assert conn.execute("SELECT id FROM runs WHERE status = 'running'").fetchall() == [], where
        waiting = conn.execute("SELECT text FROM queue WHERE status IN ('queued', 'running')").fetchall()
        assert waiting == [], f"instructions left to run later: {waiting}; {where}"
    assert all(h.tg.deliveries(u) >= 3 for u in ids_sent), where  # every update came three times at least
    outcomes = {
        "ran": sum(seen.asked(x) == 1 for x in sent),
        "answered": sum(seen.answers(x) > 0 for x in sent),
        "carded": sum(seen.carded(x) for x in sent),
        "held": len(held),
    }
    print(f"{len(sent)} instructions, {len(kills)} kills {kills}: {outcomes}")


def _held(h: Harness) -> set[str]:
    """Instructions waiting behind a run cut by a restart: its card counts them and its Resume runs them."""
    path = h.home / "bot.db"
    if not path.exists():
        return set()
    with bot_db(h) as conn:
        return {str(r[0]) for r in conn.execute("SELECT text FROM queue WHERE status = 'held'")}


def _rows(h: Harness) -> str:
    """bot.db's updates, runs and queue, for a failure message."""
    with bot_db(h) as conn:
        parts = [
            f"{table}: {conn.execute(f'SELECT * FROM {table}').fetchall()}" for table in ("updates", "runs", "queue")
        ]
    return "; ".join(parts)
