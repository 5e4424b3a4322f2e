"""Five-field cron expressions and local wall time, for the bot's schedules (``bot.schedule_spec`` builds on it).

Cron as Vixie cron reads it: ``minute hour day-of-month month day-of-week``. Each field is a comma list of
``*``, ``N`` or ``A-B``, each with an optional step ``/S`` (``*/15``, ``9-17/2``; ``N/S`` runs from N to the
field's end). Months ``jan``–``dec`` and days ``sun``–``sat`` may be named; ``0`` and ``7`` are both Sunday
(``fri-sun`` wraps to Sunday). When both day fields are restricted a day matches either (``0 9 1 * 1``: the 1st
of the month *or* a Monday); when either starts with ``*`` a day must match both. An expression that can never
fire (``0 0 31 2 *``) is refused.

Wall time: a naive local time means one instant in a zone, by two rules. A time inside a spring-forward gap
(02:30 in Berlin on the last Sunday of March) means the gap's end, the first valid minute after it (03:00 CEST);
a time that happens twice at a fall-back (02:30 on the last Sunday of October) means its first occurrence
(CEST). A cron schedule is searched in wall time, so every matching wall minute fires once and none twice:
all the minutes of a gap fire once together at its end, and the repeated hour of a fall-back fires only in
its first pass.

The search jumps by fields (next matching month, then day, then hour, then minute); it never walks minute by
minute, and a valid expression matches within one 400-year Gregorian cycle.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from bot.errors import BotError

__all__ = [
    "CRON_EXAMPLE",
    "DAY_NAMES",
    "MONTH_NAMES",
    "CronExpr",
    "ScheduleSpecError",
    "day_runs",
    "next_wall_fire",
    "resolve_wall",
]

DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron numbering: 0 (and 7) is Sunday
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
CRON_EXAMPLE = "/every 0 9 * * 1-5 run the tests"
_MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # by month, in a leap year
_HORIZON_YEARS = 400  # one Gregorian cycle: every date and weekday combination has occurred within it


class ScheduleSpecError(BotError):
    """A schedule could not be read (``/at``, ``/every``, or a stored spec).

    The message is phrased for the chat: what is wrong, then examples of what works. ``problem`` is the first
    part alone, ``examples`` the second.
    """

    def __init__(self, problem: str, *examples: str) -> None:
        super().__init__(f"{problem}. Examples: {', '.join(examples)}" if examples else problem)
        self.problem = problem
        self.examples = examples


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_named: int = 0  # the number of names[0]


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, MONTH_NAMES, 1),
    _Field("day of week", 0, 7, DAY_NAMES, 0),
)
_DOW = _FIELDS[4]


def _fail(problem: str) -> ScheduleSpecError:
    return ScheduleSpecError(problem, CRON_EXAMPLE)


def _value(text: str, field: _Field, part: str) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
    elif text in field.names:
        value = field.names.index(text) + field.first_named
    else:
        hint = f" or {field.names[0]}-{field.names[-1]}" if field.names else ""
        raise _fail(f"'{part}' is not a valid {field.name} in a cron spec ({field.low}-{field.high}{hint})")
    if not field.low <= value <= field.high:
        raise _fail(f"{value} is out of range for the {field.name} in a cron spec ({field.low}-{field.high})")
    return value


def _parse_field(text: str, field: _Field) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) == 0:
                raise _fail(f"'{part}' needs a whole step of 1 or more after the '/'")
            step = int(step_text)
        if base == "*":
            low, high = field.low, field.high
        elif "-" in base:
            first, _, last = base.partition("-")
            low, high = _value(first, field, part), _value(last, field, part)
            if field is _DOW and high == 0 < low:
                high = 7  # fri-sun
            if low > high:
                raise _fail(f"the range '{base}' in a cron spec runs backwards")
        else:
            low = _value(base, field, part)
            high = field.high if slash else low
        values.update(range(low, high + 1, step))
    if field is _DOW and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed cron expression; ``text`` is its five fields as written, lowercased, single-spaced."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]  # of the month
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0 is Sunday
    either_day: bool  # both day fields restricted: a day matches either (else both)

    @classmethod
    def parse(cls, text: str) -> CronExpr:
        fields = text.lower().split()
        if len(fields) != 5:
            raise _fail(
                f"a cron spec has five fields (minute hour day-of-month month day-of-week), "
                f"'{text.strip()}' has {len(fields)}"
            )
        minutes, hours, days, months, weekdays = (
            _parse_field(f, spec) for f, spec in zip(fields, _FIELDS, strict=True)
        )
        either = not fields[2].startswith("*") and not fields[4].startswith("*")
        if not either and not any(day <= _MAX_DAYS[month] for month in months for day in days):
            raise _fail(f"the cron spec '{' '.join(fields)}' never fires: none of its months has those days")
        return cls(
            text=" ".join(fields),
            minutes=tuple(sorted(minutes)),
            hours=tuple(sorted(hours)),
            days=days,
            months=tuple(sorted(months)),
            weekdays=weekdays,
            either_day=either,
        )

    def _next_day(self, year: int, month: int, day: int) -> int | None:
        """The first matching day of this month from ``day`` on."""
        last = _MAX_DAYS[month] - (month == 2 and not calendar.isleap(year))
        if day > last:
            return None
        weekday = (date(year, month, day).weekday() + 1) % 7
        for candidate in range(day, last + 1):
            on_day, on_weekday = candidate in self.days, weekday in self.weekdays
            if (on_day or on_weekday) if self.either_day else (on_day and on_weekday):
                return candidate
            weekday = (weekday + 1) % 7
        return None

    def next_after(self, wall: datetime) -> datetime | None:
        """The first matching wall minute strictly after the naive ``wall``; None past the search horizon."""
        start = wall.replace(second=0, microsecond=0) + timedelta(minutes=1)
        year, month, day, hour, minute = start.year, start.month, start.day, start.hour, start.minute
        last_year = min(start.year + _HORIZON_YEARS, datetime.max.year)
        while year <= last_year:
            if month not in self.months:
                index = bisect_left(self.months, month)
                if index == len(self.months):
                    year, month = year + 1, self.months[0]
                else:
                    month = self.months[index]
                day, hour, minute = 1, 0, 0
                continue
            found = self._next_day(year, month, day)
            if found is None:
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
                day, hour, minute = 1, 0, 0
                continue
            if found != day:
                day, hour, minute = found, 0, 0
            index = bisect_left(self.hours, hour)
            if index == len(self.hours):
                day, hour, minute = day + 1, 0, 0
                continue
            if self.hours[index] != hour:
                hour, minute = self.hours[index], 0
            index = bisect_left(self.minutes, minute)
            if index == len(self.minutes):
                hour, minute = hour + 1, 0
                continue
            return datetime(year, month, day, hour, self.minutes[index])
        return None

    def explain(self) -> str:
        """What the expression means in words: "at 09:00 on Mon–Fri"."""
        parts = [self._explain_time()]
        every_day, every_weekday = len(self.days) == 31, len(self.weekdays) == 7
        if self.either_day:
            parts.append(f"on day {_runs(sorted(self.days))} of the month or on {day_runs(self.weekdays)}")
        elif not every_day and not every_weekday:
            parts.append(f"on day {_runs(sorted(self.days))} of the month if it is a {day_runs(self.weekdays)}")
        elif not every_day:
            parts.append(f"on day {_runs(sorted(self.days))} of the month")
        elif not every_weekday:
            parts.append(f"on {day_runs(self.weekdays)}")
        if len(self.months) < 12:
            parts.append(f"in {_runs(list(self.months), lambda m: MONTH_NAMES[m - 1].title())}")
        return " ".join(parts)

    def _explain_time(self) -> str:
        if len(self.minutes) * len(self.hours) <= 4:
            return "at " + ", ".join(f"{h:02d}:{m:02d}" for h in self.hours for m in self.minutes)
        if len(self.minutes) == 60:
            minutes = "every minute"
        else:
            minutes = f"at minute{'s' if len(self.minutes) > 1 else ''} {_runs(list(self.minutes))}"
        if len(self.hours) == 24:
            return minutes if len(self.minutes) == 60 else f"{minutes} of every hour"
        return f"{minutes} of hour{'s' if len(self.hours) > 1 else ''} {_runs(list(self.hours))}"


def _runs(values: list[int], write: Callable[[int], str] = str) -> str:
    """``1, 2, 3, 5`` → ``1–3, 5``: runs of three or more as ranges (``write`` writes one value)."""
    groups: list[list[int]] = []
    for value in values:
        if groups and value == groups[-1][-1] + 1:
            groups[-1].append(value)
        else:
            groups.append([value])
    pieces: list[str] = []
    for group in groups:
        if len(group) >= 3:
            pieces.append(f"{write(group[0])}–{write(group[-1])}")
        else:
            pieces.extend(write(value) for value in group)
    return ", ".join(pieces)


def day_runs(weekdays: frozenset[int]) -> str:
    """Cron weekdays in words, Monday first: ``{1, 2, 3, 4, 5}`` → ``Mon–Fri``, ``{0, 6}`` → ``Sat, Sun``."""
    monday_first = sorted((day + 6) % 7 for day in weekdays)
    return _runs(monday_first, lambda index: DAY_NAMES[(index + 1) % 7].title())


def resolve_wall(wall: datetime, tz: tzinfo) -> datetime:
    """The instant the naive local ``wall`` time means in ``tz``, aware in UTC.

    Inside a spring-forward gap: the gap's end (the first valid minute after it). Repeated at a fall-back:
    the first occurrence.
    """
    first = wall.replace(tzinfo=tz, fold=0)
    instant = first.astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) == wall:
        return instant
    # A gap: fold=0 reads the wall time with the offset before the change, fold=1 with the one after; the change
    # itself lies between the two readings. Bisect for it to the second (a gap is an hour or so: a dozen steps).
    before = int(wall.replace(tzinfo=tz, fold=1).timestamp())
    after = int(first.timestamp())
    offset_after = datetime.fromtimestamp(after, tz).utcoffset()
    while after - before > 1:
        middle = (before + after) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == offset_after:
            after = middle
        else:
            before = middle
    return datetime.fromtimestamp(after, UTC)


def next_wall_fire(expr: CronExpr, after: datetime, tz: tzinfo) -> datetime | None:
    """The first instant strictly after the aware ``after`` at which ``expr`` fires on ``tz``'s wall clock, in UTC.

    Instants are compared in UTC: Python compares two datetimes of one zone by their wall time, fold ignored."""
    after = after.astimezone(UTC)
    wall = after.astimezone(tz).replace(tzinfo=None)
    while (match := expr.next_after(wall)) is not None:
        fire = resolve_wall(match, tz)
        if fire > after:
            return fire
        wall = match  # a gap's minutes all fire at its end, a fall-back's second pass not at all: skip them
    return None
