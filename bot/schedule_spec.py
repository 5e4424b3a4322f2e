"""The schedule language of ``/at`` and ``/every``, and of spoken schedules ("every weekday at nine run the tests").

A pure module: it reads a schedule in the owner's zone and says when it fires next; storing and firing are done
elsewhere. A ``Spec`` is one of three kinds:

* ``once``: one instant. ``/at 18:30 …`` is today at 18:30, or tomorrow once that has passed; ``/at 30m …``,
  ``/at 1h30m …``, ``/at 90s …`` count from now; ``/at tomorrow 9:00 …``; ``/at monday 9:00 …`` is the nearest
  Monday whose 09:00 is still ahead (today, on a Monday morning); ``/at 2026-12-24 09:00 …``. A day without a
  time (``/at tomorrow …``), a date or ``today`` already past, are refused. Spans from now keep now's second
  (``/at 30m`` at 10:07:23 is 10:37:23); a clock time whose minute has begun (``/at 10:07`` then) is tomorrow's.
* ``interval``: every fixed span of real time (``/every 2h …``, ``/every 30m …``, ``/every hour …``), at least a
  minute, counted from the moment it was made (its anchor, stored) so fires never drift: every 2h made at 10:07
  fires at 12:07, 14:07, … Daylight saving does not change the span, so the fires shift an hour on the clock.
* ``cron``: wall-clock schedules, in words (``/every day 09:00``, ``/every weekday 9am``, ``/every mon,wed,fri
  18:00``, ``/every monday at 9:00``) or as five cron fields (``/every 0 9 * * 1-5 …``; see ``bot.schedule_cron``).
  They follow the owner's clock across daylight-saving changes: a wall time skipped by spring-forward fires once,
  at the first valid minute after the gap (02:30 → 03:00); one repeated by fall-back fires once, the first time.
  A once-time given on the clock follows the same two rules.

This module reads phrases; the words they are made of (times, durations, days, dates) are read by
``bot.schedule_words``, which lists the forms it takes.

Spoken text (a Whisper transcript: casing, punctuation and number words vary) is a schedule only when it *starts*
with one: ``every <interval> …``, ``every <days> at <time> …``, ``in <duration> …``, ``at <time> …``,
``today/tomorrow at <time> …``, ``on <weekday> at <time> …``. After a leading ``at`` the time must be
unmistakable (``6 pm``, ``6:30``, ``half past six``, ``noon``), never a bare number ("at 5 call sites …"); an
instruction must follow. Anything else is ``None``: the bot confirms spoken schedules, so doubt reads as no
schedule.

Canonical text (``Spec.text``, stored; ``Spec.parse_canonical`` reads it back): ``once 2026-12-04T18:30+01:00``,
``every 2h since 2026-12-04T10:07+01:00`` (the anchor), ``every weekday at 09:00``, ``cron 0 9 * * 1-5``.

``next_fire`` answers in UTC, and every sum and comparison of instants is made in UTC: Python compares two
datetimes of one zone by their wall time (fold ignored), and never calls one with ``fold=1`` equal to a datetime of
another zone. For the same reason a spec keeps its instants at fixed offsets (the zone's offset at that moment).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal, TypeVar
from zoneinfo import ZoneInfo

from bot.schedule_cron import CronExpr, ScheduleSpecError, day_runs, next_wall_fire
from bot.schedule_words import (
    ALL_DAYS,
    DAY_WORDS,
    WEEKDAYS,
    WEEKEND,
    Token,
    canonical_days,
    clock_then_day,
    compact_duration,
    compact_span,
    day_named,
    days_word,
    human_span,
    next_clock,
    on_day,
    raw_text,
    read_clock,
    read_date,
    read_days,
    read_duration,
    text_from,
    tokenize,
    when_text,
    word_at,
)

__all__ = [
    "AT_EXAMPLES",
    "EVERY_EXAMPLES",
    "MIN_INTERVAL",
    "CronExpr",
    "Kind",
    "ScheduleSpecError",
    "Spec",
    "describe",
    "next_fire",
    "parse_at",
    "parse_every",
    "parse_spoken",
]

Kind = Literal["once", "interval", "cron"]
MIN_INTERVAL = timedelta(minutes=1)
AT_EXAMPLES = ("/at 18:30 run the tests", "/at 30m check the build", "/at tomorrow 9:00 review the open PRs")
EVERY_EXAMPLES = ("/every 2h check the build", "/every weekday 09:00 run the tests", "/every 0 9 * * 1-5 run the tests")
_Read = TypeVar("_Read")  # what a command's reader finds: an instant (/at) or a spec (/every)
_FIELDS_OF: dict[str, set[str]] = {"once": {"at"}, "interval": {"every", "anchor"}, "cron": {"cron"}}


@dataclass(frozen=True, slots=True)
class Spec:
    """When a schedule fires. ``once``: ``at``. ``interval``: ``every`` counted from ``anchor``. ``cron``: ``cron``,
    ``words`` when it was written as words (``/every weekday 09:00``) and is shown and stored that way."""

    kind: Kind
    at: datetime | None = None
    every: timedelta | None = None
    anchor: datetime | None = None
    cron: CronExpr | None = None
    words: bool = False

    def __post_init__(self) -> None:
        # Kept at their own fixed offset: readable in the text, and free of the fold quirks of zone-aware equality.
        for name in ("at", "anchor"):
            moment = getattr(self, name)
            if _aware(moment):
                offset = moment.utcoffset()
                object.__setattr__(self, name, moment.replace(microsecond=0).astimezone(timezone(offset)))
        present = {name for name in ("at", "every", "anchor", "cron") if getattr(self, name) is not None}
        if present != _FIELDS_OF[self.kind] or (self.kind == "once" and not _aware(self.at)):
            raise ValueError(f"a {self.kind} spec has exactly {sorted(_FIELDS_OF[self.kind])}, instants aware")
        if self.every is not None:
            if not _aware(self.anchor) or self.every % timedelta(seconds=1):
                raise ValueError("an interval is whole seconds from an aware anchor")
            if self.every < MIN_INTERVAL:
                raise ScheduleSpecError(
                    f"every {compact_span(self.every)} is too often: 1 minute at the least", *EVERY_EXAMPLES
                )
        if self.words and (self.cron is None or len(self.cron.minutes) != 1 or len(self.cron.hours) != 1):
            raise ValueError("a spec in words fires once a day")

    @classmethod
    def once(cls, at: datetime) -> Spec:
        return cls("once", at=at)

    @classmethod
    def interval(cls, every: timedelta, anchor: datetime) -> Spec:
        return cls("interval", every=every, anchor=anchor)

    @classmethod
    def from_cron(cls, text: str) -> Spec:
        return cls("cron", cron=CronExpr.parse(text))

    @classmethod
    def daily(cls, weekdays: frozenset[int], hour: int, minute: int) -> Spec:
        """At ``hour:minute`` on the cron ``weekdays`` (0 is Sunday), stored and shown as words."""
        field = "*" if weekdays == ALL_DAYS else ",".join(str(day) for day in sorted(weekdays))
        return cls("cron", cron=CronExpr.parse(f"{minute} {hour} * * {field}"), words=True)

    @property
    def text(self) -> str:
        """The canonical form: ``Spec.parse_canonical(spec.text) == spec``."""
        if self.at is not None:
            return f"once {_iso(self.at)}"
        if self.every is not None and self.anchor is not None:
            return f"every {compact_span(self.every)} since {_iso(self.anchor)}"
        assert self.cron is not None
        if self.words:
            return f"every {days_word(self.cron.weekdays)} at {self.cron.hours[0]:02d}:{self.cron.minutes[0]:02d}"
        return f"cron {self.cron.text}"

    @classmethod
    def parse_canonical(cls, text: str) -> Spec:
        """Read back ``Spec.text``."""
        kind, _, rest = text.strip().partition(" ")
        try:
            if kind == "once":
                return cls.once(_read_iso(rest))
            if kind == "cron":
                return cls.from_cron(rest)
            if kind == "every" and (found := re.fullmatch(r"(\S+) since (\S+)", rest)):
                every = compact_duration(found[1])
                if every is not None:
                    return cls.interval(every, _read_iso(found[2]))
            if kind == "every" and (found := re.fullmatch(r"(\S+) at ([0-9]{2}):([0-9]{2})", rest)):
                weekdays = canonical_days(found[1])
                if weekdays is not None:
                    return cls.daily(weekdays, int(found[2]), int(found[3]))
        except (ScheduleSpecError, ValueError):
            pass
        raise ScheduleSpecError(f"'{text}' is not a stored schedule")


def _aware(value: datetime | None) -> bool:
    return value is not None and value.utcoffset() is not None


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds" if moment.second else "minutes")


def _read_iso(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.utcoffset() is None:
        raise ValueError("no offset")
    return moment


# Reading -----------------------------------------------------------------------------------------------------------


def _now(now: datetime) -> datetime:
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return now.replace(microsecond=0).astimezone(UTC)  # compared in UTC: one zone compares by wall time


def _in(span: timedelta, now: datetime, written: str) -> datetime:
    if span <= timedelta(0):
        raise ScheduleSpecError(f"'{written}' is no time from now")
    return now + span


def _read_when(
    tokens: list[Token], index: int, now: datetime, tz: ZoneInfo, *, spoken: bool
) -> tuple[datetime, int] | None:
    """The instant a ``/at`` (or a spoken once-schedule) names, and where the instruction starts; None when the
    words at ``index`` are no time at all."""
    lead = word_at(tokens, index)
    if lead == "in" or not spoken:
        start = index + 1 if lead == "in" else index
        span = read_duration(tokens, start)
        if span is not None:
            return _in(span[0], now, raw_text(tokens, start, span[1])), span[1]
        if spoken:
            return None
    if spoken and lead == "at":  # at 6 pm …, at half past six …: never a bare number (at 5 call sites …)
        found = read_clock(tokens, index + 1)
        if found is None or not found[0].strong:
            return None
        return clock_then_day(found, tokens, index + 1, now, tz, spoken=True)
    at = index + (not spoken and lead in ("at", "on"))
    word, day = word_at(tokens, at), ""
    weekdays: frozenset[int] | None = None
    if word in ("on", "next", "this") and (weekday := day_named(word_at(tokens, at + 1), short=not spoken)) is not None:
        weekdays, day, at = frozenset({weekday}), raw_text(tokens, at, at + 2), at + 2
    elif (weekday := day_named(word, short=not spoken)) is not None:
        weekdays, day, at = frozenset({weekday}), tokens[at].raw, at + 1
    elif word in ("today", "tomorrow"):
        day, at = word, at + 1
    elif not spoken and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(t.+)?", word):
        return read_date(tokens, at, now, tz)
    elif spoken:
        return None
    said_at = word_at(tokens, at) == "at"
    found = read_clock(tokens, at + said_at)
    if found is None or (spoken and not said_at and not found[0].strong):
        if day and not spoken:
            raise ScheduleSpecError(f"'{day}' needs a time, as in /at {day} 9:00")
        return None
    if weekdays is not None:
        return next_clock(found[0], now, tz, weekdays=weekdays), found[1]
    if day:
        return on_day(day, found[0], now, tz, raw_text(tokens, at + said_at, found[1])), found[1]
    return clock_then_day(found, tokens, at + said_at, now, tz, spoken=spoken)


def _read_every(
    tokens: list[Token], index: int, now: datetime, tz: ZoneInfo, *, spoken: bool
) -> tuple[Spec, int] | None:
    """The schedule after ``every``, and where the instruction starts; None when the words are none."""
    if not spoken and word_at(tokens, index) == "cron":
        return _read_cron(tokens, index + 1)
    days = read_days(tokens, index, short=not spoken)
    if days is not None:
        weekdays, at = days
        said_at = word_at(tokens, at) == "at"
        found = read_clock(tokens, at + said_at)
        if found is None or (spoken and not said_at and not found[0].strong):
            if spoken:
                return None
            written = raw_text(tokens, index, at)
            raise ScheduleSpecError(f"'every {written}' needs a time, as in /every {written} 09:00")
        clock, end = found
        return Spec.daily(weekdays, clock.hour, clock.minute), end
    span = read_duration(tokens, index, bare_unit=True)
    if span is not None:
        return Spec.interval(span[0], now.astimezone(tz)), span[1]
    if not spoken and re.match(r"[0-9*]", word_at(tokens, index)):
        return _read_cron(tokens, index)
    return None


def _read_cron(tokens: list[Token], index: int) -> tuple[Spec, int]:
    fields = [token.raw.rstrip(",;:") for token in tokens[index : index + 5]]
    if len(fields) < 5:
        raise ScheduleSpecError(
            f"a cron spec has five fields (minute hour day-of-month month day-of-week), '{' '.join(fields)}' has "
            f"{len(fields)}, and the instruction follows them"
        )
    return Spec.from_cron(" ".join(fields)), index + 5


def _with_examples(error: ScheduleSpecError, examples: tuple[str, ...]) -> ScheduleSpecError:
    return error if error.examples else ScheduleSpecError(error.problem, *examples)


def _read_command(
    tokens: list[Token], read: Callable[[], tuple[_Read, int] | None], say: str, what: str, examples: tuple[str, ...]
) -> tuple[_Read, int]:
    """What ``read`` finds first in a command's words, and where the instruction starts; errors carry ``examples``."""
    try:
        if not tokens:
            raise ScheduleSpecError(f"Say {say}, then what to do")
        found = read()
        if found is None:
            raise ScheduleSpecError(f"I could not read '{tokens[0].raw}' as {what}")
    except ScheduleSpecError as error:
        raise _with_examples(error, examples) from None
    return found


def parse_at(args: str, now: datetime, tz: ZoneInfo) -> tuple[Spec, str]:
    """``/at WHEN TEXT`` → the once-spec and the instruction; ScheduleSpecError (for the chat) when unreadable."""
    now = _now(now)
    tokens = tokenize(args)
    when, end = _read_command(
        tokens, lambda: _read_when(tokens, 0, now, tz, spoken=False), "when", "a time", AT_EXAMPLES
    )
    spec, text = Spec.once(when.astimezone(tz)), text_from(args, tokens, end)
    if not text:
        raise ScheduleSpecError(f"What should I do on {when_text(when, tz)}? Say it after the time", AT_EXAMPLES[0])
    return spec, text


def parse_every(args: str, now: datetime, tz: ZoneInfo) -> tuple[Spec, str]:
    """``/every SPEC TEXT`` → the repeating spec and the instruction; ScheduleSpecError when unreadable."""
    now = _now(now)
    tokens = tokenize(args)
    spec, end = _read_command(
        tokens, lambda: _read_every(tokens, 0, now, tz, spoken=False), "how often", "a schedule", EVERY_EXAMPLES
    )
    text = text_from(args, tokens, end)
    if not text:
        raise ScheduleSpecError(f"What should I do {describe(spec, tz)}? Say it after the schedule", EVERY_EXAMPLES[0])
    return spec, text


_FILLERS = frozenset({"ok", "okay", "please", "so", "alright", "hey"})
# "every minute counts", "every day at nine is too late": a verb like these right after is a sentence, not an order.
_NOT_AN_ORDER = frozenset(
    {"is", "are", "was", "were", "be", "been", "counts", "count", "matters", "matter", "seems", "seem", "feels"}
    | {"will", "would", "should", "could", "can", "might", "must", "has", "have", "had", "of", "or"}
)


def parse_spoken(transcript: str, now: datetime, tz: ZoneInfo) -> tuple[Spec, str] | None:
    """A spoken schedule and its instruction, or None when the transcript does not start with a schedule."""
    now = _now(now)
    tokens = tokenize(transcript)
    index = 0
    while word_at(tokens, index) in _FILLERS:
        index += 1
    try:
        if word_at(tokens, index) == "every":
            found = _read_every(tokens, index + 1, now, tz, spoken=True)
        else:
            when = _read_when(tokens, index, now, tz, spoken=True)
            found = (Spec.once(when[0].astimezone(tz)), when[1]) if when else None
    except ScheduleSpecError:
        return None
    if found is None:
        return None
    text = text_from(transcript, tokens, found[1])
    if not re.search(r"[^\W\d_]", text) or word_at(tokens, found[1]) in _NOT_AN_ORDER:
        return None
    return found[0], text


# Firing and describing ---------------------------------------------------------------------------------------------


def next_fire(spec: Spec, after: datetime, tz: ZoneInfo) -> datetime | None:
    """The first fire strictly after the aware ``after``, in UTC; None for a once-spec already past."""
    if after.utcoffset() is None:
        raise ValueError("after must be an aware datetime")
    after = after.astimezone(UTC)
    if spec.at is not None:
        return spec.at.astimezone(UTC) if spec.at > after else None
    if spec.every is not None and spec.anchor is not None:
        anchor = spec.anchor.astimezone(UTC)
        passed = max(0, (after - anchor) // spec.every)
        return anchor + (passed + 1) * spec.every
    assert spec.cron is not None
    return next_wall_fire(spec.cron, after, tz)


def describe(spec: Spec, tz: ZoneInfo, now: datetime | None = None) -> str:
    """The spec for the chat: ``once, Fri 4 Dec 18:30``, ``every 2 hours from 12:07``, ``every weekday at 09:00
    (Europe/Berlin)``, ``cron 0 9 * * 1-5 (at 09:00 on Mon–Fri, Europe/Berlin)``. With ``now``, a year other than
    now's is written out, and an interval's first fire today is shown by its time alone."""
    if spec.at is not None:
        other_year = now is not None and now.astimezone(tz).year != spec.at.astimezone(tz).year
        return f"once, {when_text(spec.at, tz, year=other_year)}"
    if spec.every is not None and spec.anchor is not None:
        first = (spec.anchor.astimezone(UTC) + spec.every).astimezone(tz)
        same_day = now is None or now.astimezone(tz).date() == first.date()
        return f"every {human_span(spec.every)} from {f'{first:%H:%M}' if same_day else when_text(first, tz)}"
    assert spec.cron is not None
    if spec.words:
        days = {ALL_DAYS: "day", WEEKDAYS: "weekday", WEEKEND: "Sat and Sun"}.get(spec.cron.weekdays)
        if days is None:
            days = day_runs(spec.cron.weekdays)
            if len(spec.cron.weekdays) == 1:
                days = next(name for name, day in DAY_WORDS.items() if day in spec.cron.weekdays).title()
        clock = f"{spec.cron.hours[0]:02d}:{spec.cron.minutes[0]:02d}"
        return f"every {days} at {clock} ({tz.key})"
    return f"cron {spec.cron.text} ({spec.cron.explain()}, {tz.key})"
