"""Schedules across kill -9: `macupos bot` SIGKILLed at 12 random points around its fires. Each fire is queued
exactly once (its row in schedule_fires, keyed by schedule and fire time), its instruction reaches the model at
most once, and it either ran or, cut mid-way, is reported with its Resume button; no fire is lost, none is
queued twice, missed fires collapse into one (the newest due one) with the count of those folded in.

bot.db is seeded (BotState, as /at and /every store them) with schedules already due at distinct past times
(``once``, ``every 1h`` / ``every 30m`` with several missed fires, ``every day at HH:MM``), a few due seconds
after the start (``once``, ``every 1h``) and one ``every 1m`` that fires again and again through the loop. No
test waits on the wall clock for a fire: the bot's scheduler wakes itself at the next due time, and the test
waits (bounded) for what the owner and the model see.

The kill points are drawn from a seeded RNG in windows measured on a clean first start (from the bot's getMe:
until the fire is committed, until the model is asked, until the answer is out), and around fire times: a
``once`` schedule is added just before a start, due a moment after the bot should be up, and the kill falls
shortly before or after it. The seed is in every failure message. The real bot runs as a subprocess against the
Telegram double, the real Claude Code CLI against the Anthropic double (tests/bot/kill_loop.py, the machinery
tests.bot.test_crash_loop uses too).
At the end the owner pauses the every-minute schedule (bot down), the last start finishes what is due, and
Resume on the latest card runs its cut fire again and the fires held behind it, once each.

The second test kills a start right after it has marked a cut fire's run interrupted: the next start must still
report it, and the fire held behind it: a cut run's card is marked sent only once it was (runs.reported_at).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.profiles import DEFAULT_PROFILE
from bot.schedule_spec import Spec, next_fire
from bot.state import BotState
from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.bot.kill_loop import BotProcess, Seen, answering, bot_db, latest_card
from tests.doubles.telegram import TelegramDouble

KILLS = 12
SEED = 20261207
PHASES = ("boot", "fired", "run", "at-fire")
TZ = "Europe/Berlin"  # not UTC: the daily schedule's wall time is the owner's
_JOB = re.compile(r"scheduled job \d\d\b")


def _job(n: int) -> str:
    return f"scheduled job {n:02d}"  # none is a part of another


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_TIMEZONE=TZ) as hh:
        hh.write_config_toml()
        hh.claude.default = answering(_JOB)
        yield hh


@dataclass
class _Planned:
    """A schedule the test stored: its id, instruction, spec, first fire, and when it was stored."""

    id: int
    job: str
    spec: Spec
    first_at: float
    seeded_at: float


class _Bot(BotProcess):
    """The bot process, each start awaited until its getMe."""

    async def boot(self) -> tuple[float, float]:
        """Start it; (loop time, wall time) of its getMe, the first thing a start does."""
        seen = len(self.h.tg.calls("getMe"))
        await self.start()
        await self.h.tg.wait_for(lambda: len(self.h.tg.calls("getMe")) > seen, timeout=120)
        return asyncio.get_running_loop().time(), time.time()


class _Seen(Seen):
    """What the owner and the model saw of the scheduled jobs."""

    def __init__(self, h: Harness) -> None:
        super().__init__(h, _JOB)

    def late_notes(self) -> int:
        return sum(t.startswith("⏰ Schedule #") for t in self.texts())


@dataclass
class _Windows:
    """Seconds after a start's getMe at which each step of a fire ended on a clean start."""

    fired: float
    asked: float
    answered: float
    boot: float  # process spawn to getMe
    bounds: dict[str, tuple[float, float]] = field(init=False)

    def __post_init__(self) -> None:
        self.bounds = {
            "boot": (0.0, self.fired),  # state, memory, restart recovery, the scheduler's first tick
            "fired": (self.fired, self.asked),  # committed: the lane takes it, Claude Code starts
            "run": (self.asked, self.answered + 0.3),  # the model answers, the answer goes out
        }


async def _until(predicate: Callable[[], bool], timeout: float) -> None:  # noqa: ASYNC109 - a bounded wait
    """Wait (bounded) until ``predicate()``, looking again every quarter second: some of it is in bot.db,
    which the bot changes without a Telegram request to wake on."""
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110 - bot.db changes come without an event to wait on
            await asyncio.sleep(0.25)


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def _fires(spec: Spec, first: float, until: float, tz: ZoneInfo) -> list[float]:
    """The spec's fires from ``first`` (its first fire) up to ``until``."""
    out: list[float] = []
    at: float | None = first
    while at is not None and at <= until:
        out.append(at)
        found = next_fire(spec, datetime.fromtimestamp(at, UTC), tz)
        at = found.timestamp() if found is not None else None
    return out


def _after(spec: Spec, at: float, tz: ZoneInfo) -> float | None:
    found = next_fire(spec, datetime.fromtimestamp(at, UTC), tz)
    return found.timestamp() if found is not None else None


async def _store(h: Harness, plans: list[tuple[str, Spec, float]]) -> list[_Planned]:
    """Store schedules as /at and /every do (bot down): (instruction, spec, first fire) each."""
    state = await BotState.open(h.home / "bot.db")
    made: list[_Planned] = []
    try:
        for job, spec, first in plans:
            s = await state.add_schedule(
                OWNER, OWNER, spec.text, f"{job}: say done", "billing", "", DEFAULT_PROFILE, None, first
            )
            made.append(_Planned(s.id, job, spec, first, time.time()))
    finally:
        await state.close()
    return made


def _seed_plans(now: int, tz: ZoneInfo, first_job: int) -> list[tuple[str, Spec, float]]:
    """Due at distinct past times (several missed fires among them), a few due seconds ahead, one every minute."""

    def at(offset: int) -> datetime:
        return datetime.fromtimestamp(now + offset, UTC)

    hour, half = timedelta(hours=1), timedelta(minutes=30)
    daily_at = datetime.fromtimestamp(now - 3 * 3600, tz)
    daily = Spec.daily(frozenset(range(7)), daily_at.hour, daily_at.minute)
    daily_first = next_fire(daily, at(-2 * 86400 - 4 * 3600), tz)
    assert daily_first is not None
    minutely = Spec.interval(timedelta(minutes=1), at(5 - 60))
    specs: list[tuple[Spec, float]] = [
        (Spec.once(at(-600)), now - 600),  # ten minutes late
        (Spec.once(at(-240)), now - 240),
        (Spec.interval(hour, at(-12600)), now - 9000),  # fires at -9000, -5400, -1800: one run, 2 missed
        (Spec.interval(hour, at(-3690)), now - 90),  # 90 s late: one run, nothing missed
        (Spec.interval(half, at(-7500)), now - 5700),  # -5700 … -300: one run, 3 missed
        (daily, _epoch(daily_first)),  # two days ago, yesterday, today 3 h ago: one run, 2 missed
        (Spec.once(at(8)), now + 8),  # due seconds after the start
        (Spec.interval(hour, at(20 - 3600)), now + 20),
        (Spec.once(at(45)), now + 45),
        (minutely, now + 5),  # again and again through the loop
    ]
    return [(_job(first_job + i), spec, first) for i, (spec, first) in enumerate(specs)]


async def _measure(h: Harness, bot: _Bot, seen: _Seen) -> tuple[_Windows, list[_Planned]]:
    """A clean start with one schedule due: the windows the kill points are drawn from."""
    now = int(time.time())
    planned = await _store(h, [(_job(0), Spec.once(datetime.fromtimestamp(now - 30, UTC)), now - 30)])
    x = planned[0].job
    spawned = time.time()
    t0, wall0 = await bot.boot()
    loop = asyncio.get_running_loop()
    await h.tg.wait_for(lambda: seen.asked(x) >= 1 or seen.answers(x) > 0, timeout=120)
    asked = loop.time() - t0
    await h.tg.wait_for(lambda: seen.answers(x) > 0, timeout=120)
    answered = loop.time() - t0
    await _until(lambda: _finished(h), timeout=60)  # killed after its bookkeeping: a clean run
    with bot_db(h) as conn:
        fired_at = conn.execute("SELECT created_at FROM schedule_fires").fetchone()[0]
    fired = min(max(fired_at - wall0, 0.001), asked)
    return _Windows(fired, asked, answered, wall0 - spawned), planned


@pytest.mark.slow
@pytest.mark.timeout(600)  # 14 starts of the real bot, each importing its whole stack: minutes on 2 cores
async def test_a_bot_killed_around_its_fires_runs_each_fire_once_or_reports_it(h: Harness) -> None:
    rng = random.Random(SEED)
    seen = _Seen(h)
    tz = ZoneInfo(TZ)
    kills: list[tuple[str, float]] = []
    where = f"seed {SEED}, log {h.tmp / 'bot.log'}"
    with (h.tmp / "bot.log").open("ab") as log:
        bot = _Bot(h, log)
        windows, planned = await _measure(h, bot, seen)
        await bot.kill()
        planned += await _store(h, _seed_plans(int(time.time()), tz, first_job=1))
        minutely = planned[-1]
        for i in range(KILLS):
            phase = PHASES[i % len(PHASES)]
            if phase == "at-fire":
                # A once-schedule due a moment after this start's scheduler should be up; killed around it.
                due = math.ceil(time.time() + windows.boot + windows.fired + rng.uniform(0.5, 2.5))
                job = _job(len(planned))
                planned += await _store(h, [(job, Spec.once(datetime.fromtimestamp(due, UTC)), due)])
                at = rng.uniform(-0.5, windows.answered - windows.fired + 0.5)  # from the fire time
                await bot.boot()
                wait = due + at - time.time()
            else:
                lo, hi = windows.bounds[phase]
                at = wait = rng.uniform(lo, hi)  # from the getMe
                await bot.boot()
            await asyncio.sleep(max(wait, 0.0))  # the drawn kill point: a random wait is the point of this test
            await bot.kill()
            kills.append((phase, round(at, 3)))
        where = f"seed {SEED}, kills {kills}, log {h.tmp / 'bot.log'}"

        # The owner pauses the every-minute schedule (bot down, as the Pause button stores it): the last start
        # then has a fixed set of fires to finish.
        state = await BotState.open(h.home / "bot.db")
        try:
            current = await state.schedule(minutely.id)
            assert current is not None, where
            await state.set_schedule_state(minutely.id, "paused", current.next_at)
        finally:
            await state.close()

        _, ref = await bot.boot()  # whatever was due by now fires at this start's first tick

        def settled() -> bool:
            with bot_db(h) as conn:
                open_fire = conn.execute(
                    "SELECT count(*) FROM schedules WHERE state = 'active' AND (next_at <= ? OR spec LIKE 'once %')",
                    (ref,),
                ).fetchone()[0]
                waiting = conn.execute("SELECT count(*) FROM queue WHERE status IN ('queued', 'running')").fetchone()
                running = conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone()
            return open_fire == 0 and waiting[0] == 0 and running[0] == 0

        try:
            await _until(settled, timeout=240)
        except TimeoutError as e:
            raise AssertionError(f"unsettled: {_rows(h)}; texts {seen.texts()[-12:]}; {where}") from e
        # The owner presses Resume on the latest card: its run continues and what waited behind it runs.
        held = _held(h)
        card = latest_card(h)
        resumed = ""
        if card is not None:
            resumed = _JOB.findall(str(card["text"]))[0]
            before = seen.answers(resumed)  # a cut run may have answered before it was cut
            h.tg.push_callback(OWNER, OWNER, card["message_id"], button(card, "Resume"))
            await h.tg.wait_for(
                lambda: seen.answers(resumed) > before and all(seen.answers(x) for x in held), timeout=240
            )
            await _until(settled, timeout=120)
        assert await bot.stop() == 0, where

    outcomes = _check(h, seen, planned, tz, ref, resumed, held, where)
    print(
        f"{len(planned)} schedules, {bot.starts} starts, {len(kills)} kills {kills}: {outcomes}; "
        f"{seen.late_notes()} late-fire notes"
    )


async def test_a_kill_while_a_start_reports_a_cut_fire_loses_neither_it_nor_the_fire_held_behind_it(
    h: Harness,
) -> None:
    seen = _Seen(h)
    cut, behind = _job(1), _job(2)
    now = int(time.time())
    plans = [
        (job, Spec.once(datetime.fromtimestamp(now - 60 + i, UTC)), now - 60 + i) for i, job in enumerate((cut, behind))
    ]
    planned = await _store(h, plans)
    # As a process killed mid-run leaves it: both fired, the first one's run under way, the second queued.
    state = await BotState.open(h.home / "bot.db")
    try:
        queue_ids = []
        for p in planned:
            s = await state.schedule(p.id)
            assert s is not None and s.next_at is not None
            queue_ids.append(await state.fire_schedule(s, s.next_at, None))
        assert queue_ids[0] is not None
        await state.mark_queued(queue_ids[0], "running")
        await state.start_run(OWNER, f"{cut}: say done", "", "billing", queue_id=queue_ids[0])
    finally:
        await state.close()
    with (h.tmp / "bot.log").open("ab") as log:
        bot = _Bot(h, log)
        await bot.boot()
        await _until_marked(h, timeout=120)
        await bot.kill()  # right after the start marked the run cut, before (or as) it sends the card
        polls = len(h.tg.calls("deleteWebhook"))
        await bot.boot()
        try:
            # deleteWebhook comes after the recovery, right before polling starts.
            await h.tg.wait_for(lambda: len(h.tg.calls("deleteWebhook")) > polls, timeout=120)
            held = _held(h)
            assert seen.carded(cut), f"the cut fire {cut!r} was never reported; {_rows(h)}"
            counted = any("1 more instruction(s) were waiting" in t for t in seen.texts())
            assert behind not in held or counted, f"{behind!r} is held behind a cut run no card counts; {_rows(h)}"
        finally:
            await bot.kill()


async def _until_marked(h: Harness, timeout: float) -> None:  # noqa: ASYNC109 - a bounded wait
    """Until the start has marked the run cut (looked at every millisecond: the kill must follow at once)."""
    async with asyncio.timeout(timeout):
        while True:
            with bot_db(h) as conn:
                if conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone()[0] == 0:
                    return
            await asyncio.sleep(0.001)


def _check(
    h: Harness,
    seen: _Seen,
    planned: list[_Planned],
    tz: ZoneInfo,
    ref: float,
    resumed: str,
    held: set[str],
    where: str,
) -> dict[str, int]:
    outcomes = {"fires": 0, "ran": 0, "cut": 0, "held then ran": 0}
    with bot_db(h) as conn:
        for p in planned:
            rows = conn.execute(
                "SELECT fire_at, queue_id, missed FROM schedule_fires WHERE schedule_id = ? ORDER BY fire_at", (p.id,)
            ).fetchall()
            state, next_at = conn.execute("SELECT state, next_at FROM schedules WHERE id = ?", (p.id,)).fetchone()
            what = f"schedule #{p.id} ({p.job}, {p.spec.text}, first {p.first_at}): fires {rows}, {state} {next_at}"
            # No fire lost, none twice: the fires, each with those it folded in, are the spec's fires in order,
            # and the schedule waits for the very next one.
            assert rows, f"{what} never fired; {where}"
            expect = p.first_at
            for fire_at, _, missed in rows:
                skipped = _fires(p.spec, expect, fire_at, tz)
                assert skipped and skipped[-1] == fire_at, f"{what}: {fire_at} is not a fire of its spec; {where}"
                assert len(skipped) - 1 == missed, f"{what}: {missed} missed recorded, {len(skipped) - 1} were; {where}"
                expect = _after(p.spec, fire_at, tz) or math.inf
            assert (next_at if next_at is not None else math.inf) == expect, f"{what}: next fire skips; {where}"
            if state == "active":
                assert next_at > ref, f"{what} is still due; {where}"
            due = _fires(p.spec, p.first_at, ref, tz)
            if due and (len(due) == 1 or due[-1] <= p.seeded_at):
                # All its due fires were due before the bot saw it: they collapse into one run, the newest.
                assert [(r[0], r[2]) for r in rows] == [(due[-1], len(due) - 1)], f"{what}: expected one; {where}"
            # One queue row per fire, written in the fire's transaction; one run at most per queue row.
            origin = f"schedule:{p.id}"
            queued = conn.execute("SELECT id, status FROM queue WHERE origin = ? ORDER BY id", (origin,)).fetchall()
            assert [q[0] for q in queued] == sorted(r[1] for r in rows), f"{what}: queue rows {queued}; {where}"
            ran = cut = 0
            for queue_id, status in queued:
                runs = conn.execute("SELECT status FROM runs WHERE queue_id = ?", (queue_id,)).fetchall()
                assert len(runs) <= 1, f"{what}: queue row {queue_id} started {len(runs)} runs; {where}"
                if status == "done":
                    assert [r[0] for r in runs] == ["done"], f"{what}: {queue_id} done with runs {runs}; {where}"
                    ran += 1
                elif status == "interrupted":
                    # Reported with Resume (whose button is gone once pressed: the run is then "resumed").
                    assert [r[0] for r in runs] in (["interrupted"], ["resumed"]), f"{what}: {runs}; {where}"
                    pressed = runs[0][0] == "resumed" and p.job == resumed
                    assert pressed or seen.carded(p.job), f"{what}: its cut run has no Resume card; {where}"
                    cut += 1
                else:
                    raise AssertionError(f"{what}: queue row {queue_id} left {status}; {where}")
            # The model was asked at most once per fire (a Resume's own request aside), once per fire that ran.
            asked, answers = seen.asked(p.job), seen.answers(p.job)
            assert ran <= asked <= ran + cut, f"{what}: asked {asked} times, {ran} ran, {cut} cut; {where}"
            assert answers <= asked + (p.job == resumed), f"{what}: answered {answers} times; {where}"
            assert answers >= ran, f"{what}: {ran} ran but {answers} answers; {where}"
            outcomes["fires"] += len(rows)
            outcomes["ran"] += ran
            outcomes["cut"] += cut
            outcomes["held then ran"] += p.job in held
        assert conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone()[0] == 0, where
    return outcomes


def _finished(h: Harness) -> bool:
    with bot_db(h) as conn:
        return conn.execute("SELECT count(*) FROM queue WHERE status != 'done'").fetchone()[0] == 0


def _held(h: Harness) -> set[str]:
    """Fires waiting behind a run cut by a restart: its card counts them and its Resume runs them."""
    with bot_db(h) as conn:
        rows = conn.execute("SELECT text FROM queue WHERE status = 'held'").fetchall()
    return {found for (text,) in rows for found in _JOB.findall(str(text))}


def _rows(h: Harness) -> str:
    """bot.db's schedules, fires, runs and queue, for a failure message."""
    with bot_db(h) as conn:
        parts = [
            f"{table}: {conn.execute(f'SELECT * FROM {table}').fetchall()}"
            for table in ("schedules", "schedule_fires", "runs", "queue")
        ]
    return "; ".join(parts)
