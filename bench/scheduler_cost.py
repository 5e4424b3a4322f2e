"""The scheduler's own cost with 1,000 schedules: CPU a minute, time to list them, time to compute their fires.

A bot.db (``bot.state.BotState``, a real SQLite file) holds ``--schedules`` active schedules of one chat, of
mixed specs: every N minutes (5 m–2 h) and every N hours (1–24 h) from varied anchors, ``every <days> at
HH:MM`` (a fifth of them weekdays at 09:00: a burst), five-field crons (``*/15 9-17 * * 1-5``, ``0 */2 * * *``
…) and ``once`` within the coming week, zone Europe/Berlin. The real ``bot.schedules.Scheduler`` and
``bot.schedule_commands.ScheduleCommands`` run against it; what they would hand on is counted, not done: the
lanes (``SessionManager.run_queued``, which would start each fire's Claude Code run: the run's cost, not the
scheduler's) and Telegram (the late-fire notes, the /schedules cards) are stand-ins that count calls. CPU is
this process's (``time.process_time``: the event loop and aiosqlite's thread).

- ``quiet``: one wake of the loop when nothing is due (``tick`` finds nothing, ``next_due_at``), and what that
  is a minute: the loop then wakes every 300 s at the most (bot.schedules._MAX_WAIT_S).
- ``simulated``: ``Scheduler.tick`` driven as ``Scheduler.run`` drives it (tick, then sleep until the next due
  fire or 300 s), over ``--hours`` simulated hours from a Monday 07:00 with its own clock: wakes, fires, CPU per
  simulated minute (mean, median, the worst minute: the 09:00 burst), CPU per fire.
- ``catch_up``: one tick after the bot was down a day: every schedule due, missed fires collapsed to one each.
- ``run_loop``: the real ``Scheduler.run`` for ``--window`` seconds of wall time with nothing due (its clock
  set just before the next fire is ``--window`` + 60 s away): its wakes and CPU.
- ``list``: what /schedules does without Telegram: ``BotState.schedules(chat)``, ``ScheduleCommands.card`` for
  each, and ``ScheduleCommands.show`` whole (three button rows stored per card; the messages counted).
- ``next_fire``: ``bot.schedule_spec.next_fire`` for all of them (specs parsed, and parse included).

Run: .venv/bin/python -m bench.scheduler_cost [--schedules 1000] [--hours 6] [--window 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from bench._harness import run_and_emit
from bot.profiles import DEFAULT_PROFILE
from bot.schedule_commands import ScheduleCommands
from bot.schedule_spec import Spec, next_fire
from bot.schedules import Scheduler
from bot.state import BotState

TZ = "Europe/Berlin"
CHAT = 42
_MAX_WAIT_S = 300.0  # bot.schedules._MAX_WAIT_S
T = TypeVar("T")


class CountingSender:
    """Telegram's stand-in: the late-fire notes and the /schedules cards, counted."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, chat_id: int, text: str, *, html_text: bool = True, buttons: Any = None, **_: Any) -> None:
        self.sent += 1


class CountingLanes:
    """SessionManager's stand-in: the scheduler registers ``after_run`` and calls ``run_queued`` per fire."""

    def __init__(self) -> None:
        self.after_run: list[Any] = []
        self.started = 0

    async def run_queued(self, chat_id: int, user_id: int, branch: str = "") -> bool:
        self.started += 1
        return True


def services(state: BotState, sender: CountingSender) -> Any:
    """What Scheduler and ScheduleCommands read of bot.services.Services."""
    return SimpleNamespace(settings=SimpleNamespace(memory=SimpleNamespace(timezone=TZ)), state=state, sender=sender)


def monday_morning(tz: ZoneInfo) -> float:
    """07:00 local on the next Monday."""
    day = datetime.now(tz).date() + timedelta(days=1)
    while day.weekday() != 0:
        day += timedelta(days=1)
    return datetime(day.year, day.month, day.day, 7, 0, tzinfo=tz).timestamp()


_CRONS = (
    "*/15 9-17 * * 1-5",
    "0 */2 * * *",
    "30 8 * * 1",
    "0 9,13,17 * * 1-5",
    "5 4 * * 0",
    "0 0 1 * *",
    "*/30 * * * *",
    "45 23 * * 5",
    "0 9 * * 1-5",
    "10 7-19 * * *",
)


def mixed_specs(n: int, start: float, rng: random.Random) -> list[Spec]:
    """Every N minutes 25 %, every N hours 20 %, days at a time 25 % (a fifth of all: weekdays 09:00), cron 15 %,
    once 15 %."""
    at = datetime.fromtimestamp(start, UTC)
    specs: list[Spec] = []
    for i in range(n):
        kind = i % 20
        if kind < 5:
            every = timedelta(minutes=rng.choice((5, 10, 15, 20, 30, 45, 60, 90, 120)))
            specs.append(Spec.interval(every, at - timedelta(seconds=rng.randrange(int(every.total_seconds())))))
        elif kind < 9:
            every = timedelta(hours=rng.choice((1, 2, 3, 4, 6, 8, 12, 24)))
            specs.append(Spec.interval(every, at - timedelta(seconds=rng.randrange(int(every.total_seconds())))))
        elif kind < 13:
            specs.append(Spec.daily(frozenset(range(1, 6)), 9, 0))
        elif kind < 14:
            days = rng.choice((frozenset(range(7)), frozenset({0, 6}), frozenset({1, 3, 5})))
            specs.append(Spec.daily(days, rng.randrange(6, 21), rng.choice((0, 15, 30, 45))))
        elif kind < 17:
            specs.append(Spec.from_cron(rng.choice(_CRONS)))
        else:
            specs.append(Spec.once(at + timedelta(seconds=rng.randrange(600, 7 * 86400))))
    return specs


async def make_db(path: Path, n: int, start: float, seed: int) -> tuple[BotState, float]:
    """``n`` active schedules made just before ``start``, as /at and /every store them; (state, seconds taken)."""
    state = await BotState.open(path)
    tz = ZoneInfo(TZ)
    began = time.perf_counter()
    for i, spec in enumerate(mixed_specs(n, start, random.Random(seed))):
        found = next_fire(spec, datetime.fromtimestamp(start - 1, UTC), tz)
        assert found is not None
        text = f"scheduled job {i}: run the tests and report what failed"
        await state.add_schedule(CHAT, CHAT, spec.text, text, "billing", "", DEFAULT_PROFILE, None, found.timestamp())
    return state, time.perf_counter() - began


async def timed(fn: Callable[[], Awaitable[T]], repeat: int) -> tuple[T, list[float]]:
    """(the last result, wall ms of each call)."""
    samples: list[float] = []
    result: Any = None
    for _ in range(repeat):
        began = time.perf_counter()
        result = await fn()
        samples.append((time.perf_counter() - began) * 1000)
    return result, samples


def ms(samples: Sequence[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples), 2), "max_ms": round(max(samples), 2)}


async def quiet(scheduler: Scheduler, before: float, repeat: int = 200) -> dict[str, Any]:
    """Wakes with nothing due: the tick's query finds nothing, then the next due time is read."""
    cpu0 = time.process_time()
    for _ in range(repeat):
        assert await scheduler.tick(before) == []
        await scheduler.services.state.next_due_at()
    per_wake = (time.process_time() - cpu0) / repeat * 1000
    return {
        "cpu_ms_per_wake": round(per_wake, 3),
        "wakes_per_min": 60 / _MAX_WAIT_S,
        "cpu_ms_per_min": round(per_wake * 60 / _MAX_WAIT_S, 4),
    }


async def simulated(scheduler: Scheduler, lanes: CountingLanes, start: float, hours: float) -> dict[str, Any]:
    """``Scheduler.run``'s loop on a simulated clock: tick, then on to the next due fire (300 s at the most)."""
    state = scheduler.services.state
    end = start + hours * 3600
    now, wakes, fires, spins = start, 0, 0, 0
    per_minute: dict[int, float] = defaultdict(float)
    per_wake: list[float] = []
    cpu_total = 0.0
    while now < end:
        cpu0 = time.process_time()
        fires += len(await scheduler.tick(now))
        due = await state.next_due_at()
        cpu = time.process_time() - cpu0
        wakes += 1
        cpu_total += cpu
        per_wake.append(cpu * 1000)
        per_minute[int((now - start) // 60)] += cpu * 1000
        following = now + _MAX_WAIT_S if due is None else min(now + _MAX_WAIT_S, max(now, due))
        if following <= now:  # still due after a tick: the real loop would spin here
            spins += 1
            following = now + 0.001
        now = following
    minutes = int(hours * 60)
    every_minute = [per_minute.get(m, 0.0) for m in range(minutes)]
    worst = max(range(minutes), key=lambda m: every_minute[m])
    return {
        "simulated_hours": hours,
        "from": datetime.fromtimestamp(start, ZoneInfo(TZ)).strftime("%a %H:%M %Z"),
        "wakes": wakes,
        "fires": fires,
        "lane_starts": lanes.started,
        "spins": spins,
        "cpu_s": round(cpu_total, 3),
        "cpu_ms_per_sim_min": {
            "mean": round(cpu_total * 1000 / minutes, 2),
            "median": round(statistics.median(every_minute), 2),
            "max": round(every_minute[worst], 1),
            "max_at": datetime.fromtimestamp(start + worst * 60, ZoneInfo(TZ)).strftime("%H:%M"),
        },
        "cpu_ms_per_wake_median": round(statistics.median(per_wake), 3),
        "cpu_ms_per_fire": round(cpu_total * 1000 / max(fires, 1), 3),
    }


async def catch_up(scheduler: Scheduler, lanes: CountingLanes, sender: CountingSender, at: float) -> dict[str, Any]:
    """One tick after a day down: every schedule due, each fired once with its missed fires folded in."""
    state = scheduler.services.state
    due = len(await state.due_schedules(at))
    started, notes = lanes.started, sender.sent
    cpu0, wall0 = time.process_time(), time.perf_counter()
    made = await scheduler.tick(at)
    return {
        "due": due,
        "fired": len(made),
        "late_notes": sender.sent - notes,
        "lane_starts": lanes.started - started,
        "wall_s": round(time.perf_counter() - wall0, 3),
        "cpu_s": round(time.process_time() - cpu0, 3),
    }


class CountingScheduler(Scheduler):
    wakes = 0

    async def tick(self, now: float | None = None) -> list[int]:
        self.wakes += 1
        return await super().tick(now)


async def run_loop(state: BotState, window: float) -> dict[str, Any]:
    """The real loop for ``window`` s of wall time, its clock set so the next fire is ``window`` + 60 s away."""
    first = await state.next_due_at()
    assert first is not None
    shift = first - (window + 60) - time.time()
    sender, lanes = CountingSender(), CountingLanes()
    scheduler = CountingScheduler(services(state, sender), lanes, clock=lambda: time.time() + shift)  # type: ignore[arg-type]
    stop = asyncio.Event()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(window)
    stop.set()
    await task
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {
        "wall_s": round(wall, 2),
        "wakes": scheduler.wakes,
        "fires": lanes.started,
        "cpu_ms": round(cpu * 1000, 2),
        "cpu_ms_per_min": round(cpu * 1000 * 60 / wall, 3),
    }


async def listing(state: BotState, commands: ScheduleCommands, sender: CountingSender) -> dict[str, Any]:
    found, read = await timed(lambda: state.schedules(CHAT), 5)

    async def cards() -> list[str]:
        return [commands.card(s) for s in found]

    texts, carded = await timed(cards, 5)
    sent = sender.sent
    _, shown = await timed(lambda: commands.show(CHAT, CHAT), 1)
    return {
        "schedules": len(found),
        "BotState.schedules": ms(read),
        "card_each": ms(carded),
        "card_chars_total": sum(len(t) for t in texts),
        "read_and_cards_median_ms": round(statistics.median(read) + statistics.median(carded), 2),
        "show_whole_ms": round(shown[0], 1),
        "show_messages": sender.sent - sent,
    }


async def next_fires(state: BotState, at: float) -> dict[str, Any]:
    tz = ZoneInfo(TZ)
    texts = [s.spec for s in await state.schedules(CHAT)]
    after = datetime.fromtimestamp(at, UTC)
    specs = [Spec.parse_canonical(t) for t in texts]

    async def fires() -> int:
        return sum(next_fire(spec, after, tz) is not None for spec in specs)

    async def parse_and_fire() -> int:
        return sum(next_fire(Spec.parse_canonical(t), after, tz) is not None for t in texts)

    found, plain = await timed(fires, 7)
    _, parsed = await timed(parse_and_fire, 7)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for spec in specs:
        began = time.perf_counter()
        for _ in range(20):
            next_fire(spec, after, tz)
        by_kind[spec.kind if spec.kind != "cron" or not spec.words else "days at"].append(
            (time.perf_counter() - began) / 20 * 1e6
        )
    return {
        "specs": len(specs),
        "with_a_next_fire": found,
        "all": ms(plain),
        "all_with_parse": ms(parsed),
        "us_each_median_by_kind": {k: round(statistics.median(v), 1) for k, v in sorted(by_kind.items())},
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    tz = ZoneInfo(TZ)
    start = monday_morning(tz)
    with tempfile.TemporaryDirectory() as folder:
        state, made_s = await make_db(Path(folder) / "bot.db", args.schedules, start, args.seed)
        try:
            sender, lanes = CountingSender(), CountingLanes()
            scheduler = Scheduler(services(state, sender), lanes, clock=lambda: start)  # type: ignore[arg-type]
            commands = ScheduleCommands(services(state, sender), lanes, scheduler)  # type: ignore[arg-type]
            result: dict[str, Any] = {"schedules": args.schedules, "made_s": round(made_s, 2)}
            result["list"] = await listing(state, commands, sender)
            result["next_fire"] = await next_fires(state, start)
            result["quiet"] = await quiet(scheduler, start - 3600)
            result["simulated"] = await simulated(scheduler, lanes, start, args.hours)
            result["run_loop"] = await run_loop(state, args.window)
            result["catch_up_after_1d"] = await catch_up(scheduler, lanes, sender, start + args.hours * 3600 + 86400)
        finally:
            await state.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=6.0, help="simulated hours from Monday 07:00")
    parser.add_argument("--window", type=float, default=30.0, help="wall seconds of the real loop, nothing due")
    parser.add_argument("--seed", type=int, default=20261207)
    run_and_emit(parser, main_async)


if __name__ == "__main__":
    main()
