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

Times: ``18:30``, ``9:00``, ``6pm``, ``6:30 pm``, ``noon``, ``midnight``, ``half past six``, ``quarter to
seven``; a bare hour (``9``, ``nine``) is on the 24-hour clock (09:00). Durations: ``30m``, ``2h``, ``1h30m``,
``90s``, ``2d``, ``1w``, ``30 minutes``, ``two hours``, ``an hour and a half``.

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
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from fractions import Fraction
from typing import Literal
from zoneinfo import ZoneInfo

from bot.schedule_cron import (
    DAY_NAMES,
    MONTH_NAMES,
    CronExpr,
    ScheduleSpecError,
    day_runs,
    next_wall_fire,
    resolve_wall,
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
_MAX_DELAY = timedelta(days=3660)
AT_EXAMPLES = ("/at 18:30 run the tests", "/at 30m check the build", "/at tomorrow 9:00 review the open PRs")
EVERY_EXAMPLES = ("/every 2h check the build", "/every weekday 09:00 run the tests", "/every 0 9 * * 1-5 run the tests")
_FIELDS_OF: dict[str, set[str]] = {"once": {"at"}, "interval": {"every", "anchor"}, "cron": {"cron"}}
_ALL_DAYS = frozenset(range(7))
_WEEKDAYS = frozenset(range(1, 6))
_WEEKEND = frozenset({0, 6})


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
                    f"every {_compact(self.every)} is too often: 1 minute at the least", *EVERY_EXAMPLES
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
        field = "*" if weekdays == _ALL_DAYS else ",".join(str(day) for day in sorted(weekdays))
        return cls("cron", cron=CronExpr.parse(f"{minute} {hour} * * {field}"), words=True)

    @property
    def text(self) -> str:
        """The canonical form: ``Spec.parse_canonical(spec.text) == spec``."""
        if self.at is not None:
            return f"once {_iso(self.at)}"
        if self.every is not None and self.anchor is not None:
            return f"every {_compact(self.every)} since {_iso(self.anchor)}"
        assert self.cron is not None
        if self.words:
            return f"every {_days_word(self.cron.weekdays)} at {self.cron.hours[0]:02d}:{self.cron.minutes[0]:02d}"
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
                every = _compact_duration(found[1])
                if every is not None:
                    return cls.interval(every, _read_iso(found[2]))
            if kind == "every" and (found := re.fullmatch(r"(\S+) at ([0-9]{2}):([0-9]{2})", rest)):
                weekdays = _canonical_days(found[1])
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


def _days_word(weekdays: frozenset[int]) -> str:
    named = {_ALL_DAYS: "day", _WEEKDAYS: "weekday", _WEEKEND: "weekend"}
    return named.get(weekdays) or ",".join(DAY_NAMES[day] for day in sorted(weekdays, key=lambda d: (d + 6) % 7))


def _canonical_days(word: str) -> frozenset[int] | None:
    named = {"day": _ALL_DAYS, "weekday": _WEEKDAYS, "weekend": _WEEKEND}
    if word in named:
        return named[word]
    days = word.split(",")
    return frozenset(DAY_NAMES.index(day) for day in days) if all(day in DAY_NAMES for day in days) else None


# Durations ---------------------------------------------------------------------------------------------------------

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604800),
}
_BARE_UNITS = {"second": 1, "minute": 60, "hour": 3600}  # "every hour"; "every day" and "every week" need more
_PART = r"([0-9]+(?:\.[0-9]+)?)(weeks?|wks?|w|days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)"


def _compact_duration(word: str) -> timedelta | None:
    """``30m``, ``1h30m``, ``90s``, ``1.5h``: one token of amounts and units."""
    if not re.fullmatch(f"(?:{_PART})+", word):
        return None
    total = sum((Fraction(amount) * _UNITS[unit] for amount, unit in re.findall(_PART, word)), Fraction(0))
    return _seconds(total, word)


def _seconds(total: Fraction, written: str) -> timedelta:
    if total.denominator != 1:
        raise ScheduleSpecError(f"'{written}' is not a whole number of seconds")
    if total > _MAX_DELAY.total_seconds():
        raise ScheduleSpecError(f"'{written}' is too far away: ten years at the most")
    return timedelta(seconds=int(total))


def _compact(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    parts = [(seconds // 86400, "d"), (seconds // 3600 % 24, "h"), (seconds // 60 % 60, "m"), (seconds % 60, "s")]
    return "".join(f"{amount}{unit}" for amount, unit in parts if amount) or "0s"


def _human(span: timedelta) -> str:
    """``2 hours``, ``hour``, ``1 hour 30 minutes``: how long, for ``every …``."""
    seconds = int(span.total_seconds())
    names = ((604800, "week"), (86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))
    if any(seconds == size for size, _ in names):
        return next(name for size, name in names if size == seconds)
    parts = []
    for size, name in names[1:]:
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount} {name}{'s' if amount > 1 else ''}")
    return " ".join(parts)


# Words -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    word: str  # lowercased, outer punctuation stripped: what the grammar reads
    raw: str  # as written
    start: int  # where it begins in the text


_OUTER = "\"'“”‘’()[]{}<>.,;:!?…–—"


def _tokens(text: str) -> list[_Token]:
    found = []
    for match in re.finditer(r"\S+", text):
        word = match[0].lower().replace("a.m", "am").replace("p.m", "pm").strip(_OUTER)
        word = {"o'clock": "oclock", "o’clock": "oclock"}.get(word, word)
        if word:
            found.append(_Token(word, match[0], match.start()))
    return found


def _word(tokens: list[_Token], index: int) -> str:
    return tokens[index].word if index < len(tokens) else ""


def _rest(text: str, tokens: list[_Token], index: int) -> str:
    """The text from token ``index`` on: the instruction after the schedule."""
    return text[tokens[index].start :].strip().lstrip(",;:-–— \t\n").strip() if index < len(tokens) else ""


def _written(tokens: list[_Token], start: int, end: int) -> str:
    return " ".join(token.raw for token in tokens[start:end]).strip(",;")


_ONES = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}


def _number(tokens: list[_Token], index: int, *, words_only: bool = False) -> tuple[int, int] | None:
    """A whole number at ``index``: digits, or words below a hundred (``nine``, ``forty-five``, ``forty five``)."""
    word = _word(tokens, index)
    if re.fullmatch(r"[0-9]{1,6}", word):
        return None if words_only else (int(word), index + 1)
    tens, _, ones = word.partition("-")
    if ones:
        return (_TENS[tens] + _ONES[ones], index + 1) if tens in _TENS and 0 < _ONES.get(ones, 0) < 10 else None
    if word in _ONES:
        return _ONES[word], index + 1
    if word in _TENS:
        following = _ONES.get(_word(tokens, index + 1), 0)
        return (_TENS[word] + following, index + 2) if 0 < following < 10 else (_TENS[word], index + 1)
    return None


def _amount(tokens: list[_Token], index: int) -> tuple[Fraction, int] | None:
    word = _word(tokens, index)
    if word in ("a", "an"):
        return Fraction(1), index + 1
    if word == "half":
        return Fraction(1, 2), index + 2 if _word(tokens, index + 1) in ("a", "an") else index + 1
    if re.fullmatch(r"[0-9]{1,6}\.[0-9]{1,3}", word):
        return Fraction(word), index + 1
    number = _number(tokens, index)
    return (Fraction(number[0]), number[1]) if number else None


def _duration(tokens: list[_Token], index: int, *, bare_unit: bool = False) -> tuple[timedelta, int] | None:
    """A span at ``index`` (``30m``, ``1h 30m``, ``two hours``, ``an hour and a half``, ``1 hour and 30 minutes``;
    with ``bare_unit`` also ``hour``, ``minute``); None when there is none."""
    total, at, pieces = Fraction(0), index, 0
    while True:
        start = at + 1 if pieces and _word(tokens, at) in ("and", "&", "plus") else at
        compact = _compact_duration(_word(tokens, start))
        if compact is not None:
            total, at, pieces = total + int(compact.total_seconds()), start + 1, pieces + 1
            continue
        amount = _amount(tokens, start)
        if amount is None and bare_unit and not pieces and _word(tokens, start) in _BARE_UNITS:
            amount = Fraction(1), start
        if amount is None or _word(tokens, amount[1]) not in _UNITS:
            break
        size = _UNITS[_word(tokens, amount[1])]
        total, at, pieces = total + amount[0] * size, amount[1] + 1, pieces + 1
        if [_word(tokens, at + k) for k in range(3)] == ["and", "a", "half"]:
            total, at = total + Fraction(size, 2), at + 3
    return (_seconds(total, _written(tokens, index, at)), at) if pieces else None


# Times of day ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Clock:
    hour: int
    minute: int
    strong: bool  # unmistakably a time (6:30, 6 pm, half past six, noon), not a bare number


_CLOCK = re.compile(r"([0-9]{1,2})(?:[:.h]([0-9]{2}))?(am|pm)?")
_MERIDIEM = ("am", "pm")


def _clock(tokens: list[_Token], index: int) -> tuple[_Clock, int] | None:
    """A time of day at ``index``; None when there is none, an error when it looks like one but is not valid."""
    word = _word(tokens, index)
    if word in ("noon", "midday", "midnight"):
        return _Clock(0 if word == "midnight" else 12, 0, True), index + 1
    relative = _relative_clock(tokens, index)
    if relative is not None:
        return relative
    minute: int | None = None
    meridiem = ""
    if found := _CLOCK.fullmatch(word):
        hour, at = int(found[1]), index + 1
        minute = int(found[2]) if found[2] else None
        meridiem = found[3] or ""
    elif (number := _number(tokens, index, words_only=True)) is not None:
        hour, at = number
        if _word(tokens, at) in ("oh", "o") and 0 < _ONES.get(_word(tokens, at + 1), 0) < 10:
            minute, at = _ONES[_word(tokens, at + 1)], at + 2
        elif (words := _number(tokens, at, words_only=True)) is not None and words[0] >= 10:
            minute, at = words
    else:
        return None
    if not meridiem and _word(tokens, at) in _MERIDIEM:
        meridiem, at = _word(tokens, at), at + 1
    if hour == 12 and _word(tokens, at) in ("noon", "midday") and minute is None:
        return _Clock(12, 0, True), at + 1
    oclock = minute is None and _word(tokens, at) == "oclock"
    at += oclock
    return _valid_clock(
        hour, minute or 0, meridiem, tokens, index, at, strong=bool(minute is not None or meridiem or oclock)
    )


def _valid_clock(
    hour: int, minute: int, meridiem: str, tokens: list[_Token], index: int, at: int, *, strong: bool
) -> tuple[_Clock, int]:
    if meridiem:
        if not 1 <= hour <= 12:
            raise ScheduleSpecError(f"I could not read '{_written(tokens, index, at)}' as a time")
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ScheduleSpecError(f"I could not read '{_written(tokens, index, at)}' as a time")
    return _Clock(hour, minute, strong), at


def _relative_clock(tokens: list[_Token], index: int) -> tuple[_Clock, int] | None:
    """``half past six``, ``quarter to seven``, ``ten past nine pm`` (minutes in words, not digits)."""
    word = _word(tokens, index)
    if word in ("half", "quarter"):
        minutes, at = (30 if word == "half" else 15), index + 1
    elif (number := _number(tokens, index, words_only=True)) is not None and 0 < number[0] < 60:
        minutes, at = number
        at += _word(tokens, at) in ("minute", "minutes")
    else:
        return None
    direction = _word(tokens, at)
    if direction not in ("past", "after", "to", "till", "before"):
        return None
    hour_at = _number(tokens, at + 1)
    if hour_at is None:
        return None
    hour, end = hour_at
    meridiem = _word(tokens, end) if _word(tokens, end) in _MERIDIEM else ""
    clock, end = _valid_clock(hour, 0, meridiem, tokens, index, end + bool(meridiem), strong=True)
    total = clock.hour * 60 + (minutes if direction in ("past", "after") else -minutes)
    return _Clock(total % 1440 // 60, total % 60, True), end


# Days --------------------------------------------------------------------------------------------------------------

_DAY_WORDS = {
    "sunday": 0, "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6,
}  # fmt: skip
_SHORT_DAYS = {**{name: day for day, name in enumerate(DAY_NAMES)}, "tues": 2, "thur": 4, "thurs": 4}


def _weekday(word: str, *, short: bool) -> int | None:
    """One day's name (``monday``, ``mondays``; with ``short`` also ``mon``)."""
    word = word[:-1] if word.endswith("s") and word[:-1] in _DAY_WORDS else word
    return _DAY_WORDS.get(word, _SHORT_DAYS.get(word) if short else None)


def _day_part(word: str, *, short: bool) -> frozenset[int] | None:
    """``mon``, ``mon-fri``, ``mon,wed,fri`` (ranges and lists written as one token)."""
    days: set[int] = set()
    for part in word.split(","):
        first, dash, last = part.partition("-")
        low, high = _weekday(first, short=short), _weekday(last, short=short) if dash else None
        if low is None or (dash and high is None):
            return None
        span = (high if high is not None else low) - low
        days.update((low + k) % 7 for k in range(span % 7 + 1))
    return frozenset(days)


def _days(tokens: list[_Token], index: int, *, short: bool) -> tuple[frozenset[int], int] | None:
    """Which days: ``day``, ``weekday``, ``weekend``, ``monday``, ``mon,wed,fri``, ``monday and thursday``."""
    word = _word(tokens, index)
    named = {"day": _ALL_DAYS, "weekday": _WEEKDAYS, "weekend": _WEEKEND}.get(word.removesuffix("s"))
    if named is not None:
        return named, index + 1
    days: set[int] = set()
    at = index
    while True:
        start = at + 1 if days and _word(tokens, at) in ("and", "&") else at
        found = _day_part(_word(tokens, start), short=short) if _word(tokens, start) else None
        if found is None:
            break
        days |= found
        at = start + 1
    return (frozenset(days), at) if days else None


# Reading -----------------------------------------------------------------------------------------------------------


def _now(now: datetime) -> datetime:
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return now.replace(microsecond=0).astimezone(UTC)  # compared in UTC: one zone compares by wall time


def _next_clock(clock: _Clock, now: datetime, tz: ZoneInfo, *, weekdays: frozenset[int] = _ALL_DAYS) -> datetime:
    """The first ``clock`` time after ``now`` on one of ``weekdays`` (cron numbers), wall-time rules applied."""
    today = now.astimezone(tz).date()
    for ahead in range(9):
        day = today + timedelta(days=ahead)
        if (day.weekday() + 1) % 7 in weekdays and (fire := _on(day, clock, tz)) > now:
            return fire
    raise AssertionError("a weekday comes round within a week")  # pragma: no cover


def _on(day: date, clock: _Clock, tz: ZoneInfo) -> datetime:
    return resolve_wall(datetime.combine(day, time(clock.hour, clock.minute)), tz)


def _in(span: timedelta, now: datetime, written: str) -> datetime:
    if span <= timedelta(0):
        raise ScheduleSpecError(f"'{written}' is no time from now")
    return now + span


def _read_when(
    tokens: list[_Token], index: int, now: datetime, tz: ZoneInfo, *, spoken: bool
) -> tuple[datetime, int] | None:
    """The instant a ``/at`` (or a spoken once-schedule) names, and where the instruction starts; None when the
    words at ``index`` are no time at all."""
    lead = _word(tokens, index)
    if lead == "in" or not spoken:
        start = index + 1 if lead == "in" else index
        span = _duration(tokens, start)
        if span is not None:
            return _in(span[0], now, _written(tokens, start, span[1])), span[1]
        if spoken:
            return None
    if spoken and lead == "at":  # at 6 pm …, at half past six …: never a bare number (at 5 call sites …)
        found = _clock(tokens, index + 1)
        if found is None or not found[0].strong:
            return None
        return _clock_then_day(found, tokens, index + 1, now, tz, spoken=True)
    at = index + (not spoken and lead in ("at", "on"))
    word, day = _word(tokens, at), ""
    weekdays: frozenset[int] | None = None
    if word in ("on", "next", "this") and (weekday := _weekday(_word(tokens, at + 1), short=not spoken)) is not None:
        weekdays, day, at = frozenset({weekday}), _written(tokens, at, at + 2), at + 2
    elif (weekday := _weekday(word, short=not spoken)) is not None:
        weekdays, day, at = frozenset({weekday}), tokens[at].raw, at + 1
    elif word in ("today", "tomorrow"):
        day, at = word, at + 1
    elif not spoken and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(t.+)?", word):
        return _read_date(tokens, at, now, tz)
    elif spoken:
        return None
    said_at = _word(tokens, at) == "at"
    found = _clock(tokens, at + said_at)
    if found is None or (spoken and not said_at and not found[0].strong):
        if day and not spoken:
            raise ScheduleSpecError(f"'{day}' needs a time, as in /at {day} 9:00")
        return None
    if weekdays is not None:
        return _next_clock(found[0], now, tz, weekdays=weekdays), found[1]
    if day:
        return _on_day(day, found[0], now, tz, _written(tokens, at + said_at, found[1])), found[1]
    return _clock_then_day(found, tokens, at + said_at, now, tz, spoken=spoken)


def _clock_then_day(
    found: tuple[_Clock, int], tokens: list[_Token], start: int, now: datetime, tz: ZoneInfo, *, spoken: bool
) -> tuple[datetime, int]:
    """A time with no day before it: ``18:30 tomorrow``, ``18:30 today``, ``18:30 on monday``, or ``18:30``
    (today, else tomorrow)."""
    clock, end = found
    if _word(tokens, end) in ("today", "tomorrow"):
        return _on_day(_word(tokens, end), clock, now, tz, _written(tokens, start, end)), end + 1
    said_on = _word(tokens, end) == "on"
    weekday = _weekday(_word(tokens, end + said_on), short=not spoken)
    if weekday is not None and (said_on or not spoken):
        return _next_clock(clock, now, tz, weekdays=frozenset({weekday})), end + said_on + 1
    return _next_clock(clock, now, tz), end


def _on_day(word: str, clock: _Clock, now: datetime, tz: ZoneInfo, written: str) -> datetime:
    today = now.astimezone(tz).date()
    fire = _on(today + timedelta(days=word == "tomorrow"), clock, tz)
    if fire <= now:
        raise ScheduleSpecError(f"{word} {written} has passed")
    return fire


def _read_date(tokens: list[_Token], index: int, now: datetime, tz: ZoneInfo) -> tuple[datetime, int]:
    """``2026-12-24 09:00`` or ``2026-12-24T09:00[+01:00]``: a date and time, which must be ahead."""
    written = tokens[index].word.upper()
    try:
        moment = datetime.fromisoformat(written)
    except ValueError:
        raise ScheduleSpecError(f"I could not read '{tokens[index].raw}' as a date") from None
    end = index + 1
    if "T" not in written:
        found = _clock(tokens, end + (_word(tokens, end) == "at"))
        if found is None:
            raise ScheduleSpecError(f"'{tokens[index].raw}' needs a time, as in /at {written} 09:00")
        clock, end = found
        moment = moment.replace(hour=clock.hour, minute=clock.minute)
    fire = resolve_wall(moment, tz) if moment.utcoffset() is None else moment.astimezone(UTC)
    if fire <= now:
        raise ScheduleSpecError(f"{_when(fire, tz, year=True)} is in the past")
    return fire, end


def _read_every(
    tokens: list[_Token], index: int, now: datetime, tz: ZoneInfo, *, spoken: bool
) -> tuple[Spec, int] | None:
    """The schedule after ``every``, and where the instruction starts; None when the words are none."""
    if not spoken and _word(tokens, index) == "cron":
        return _read_cron(tokens, index + 1)
    days = _days(tokens, index, short=not spoken)
    if days is not None:
        weekdays, at = days
        said_at = _word(tokens, at) == "at"
        found = _clock(tokens, at + said_at)
        if found is None or (spoken and not said_at and not found[0].strong):
            if spoken:
                return None
            written = _written(tokens, index, at)
            raise ScheduleSpecError(f"'every {written}' needs a time, as in /every {written} 09:00")
        clock, end = found
        return Spec.daily(weekdays, clock.hour, clock.minute), end
    span = _duration(tokens, index, bare_unit=True)
    if span is not None:
        return Spec.interval(span[0], now.astimezone(tz)), span[1]
    if not spoken and re.match(r"[0-9*]", _word(tokens, index)):
        return _read_cron(tokens, index)
    return None


def _read_cron(tokens: list[_Token], index: int) -> tuple[Spec, int]:
    fields = [token.raw.rstrip(",;:") for token in tokens[index : index + 5]]
    if len(fields) < 5:
        raise ScheduleSpecError(
            f"a cron spec has five fields (minute hour day-of-month month day-of-week), '{' '.join(fields)}' has "
            f"{len(fields)}, and the instruction follows them"
        )
    return Spec.from_cron(" ".join(fields)), index + 5


def _with_examples(error: ScheduleSpecError, examples: tuple[str, ...]) -> ScheduleSpecError:
    return error if error.examples else ScheduleSpecError(error.problem, *examples)


def parse_at(args: str, now: datetime, tz: ZoneInfo) -> tuple[Spec, str]:
    """``/at WHEN TEXT`` → the once-spec and the instruction; ScheduleSpecError (for the chat) when unreadable."""
    now = _now(now)
    tokens = _tokens(args)
    try:
        if not tokens:
            raise ScheduleSpecError("Say when, then what to do")
        found = _read_when(tokens, 0, now, tz, spoken=False)
        if found is None:
            raise ScheduleSpecError(f"I could not read '{tokens[0].raw}' as a time")
    except ScheduleSpecError as error:
        raise _with_examples(error, AT_EXAMPLES) from None
    spec, text = Spec.once(found[0].astimezone(tz)), _rest(args, tokens, found[1])
    if not text:
        raise ScheduleSpecError(f"What should I do on {_when(found[0], tz)}? Say it after the time", AT_EXAMPLES[0])
    return spec, text


def parse_every(args: str, now: datetime, tz: ZoneInfo) -> tuple[Spec, str]:
    """``/every SPEC TEXT`` → the repeating spec and the instruction; ScheduleSpecError when unreadable."""
    now = _now(now)
    tokens = _tokens(args)
    try:
        if not tokens:
            raise ScheduleSpecError("Say how often, then what to do")
        found = _read_every(tokens, 0, now, tz, spoken=False)
        if found is None:
            raise ScheduleSpecError(f"I could not read '{tokens[0].raw}' as a schedule")
    except ScheduleSpecError as error:
        raise _with_examples(error, EVERY_EXAMPLES) from None
    spec, text = found[0], _rest(args, tokens, found[1])
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
    tokens = _tokens(transcript)
    index = 0
    while _word(tokens, index) in _FILLERS:
        index += 1
    try:
        if _word(tokens, index) == "every":
            found = _read_every(tokens, index + 1, now, tz, spoken=True)
        else:
            when = _read_when(tokens, index, now, tz, spoken=True)
            found = (Spec.once(when[0].astimezone(tz)), when[1]) if when else None
    except ScheduleSpecError:
        return None
    if found is None:
        return None
    text = _rest(transcript, tokens, found[1])
    if not re.search(r"[^\W\d_]", text) or _word(tokens, found[1]) in _NOT_AN_ORDER:
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


_DAYS_OF_WEEK = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _when(moment: datetime, tz: ZoneInfo, *, year: bool = False) -> str:
    """``Fri 4 Dec 18:30`` (with ``year``: ``Fri 4 Dec 2026 18:30``), on ``tz``'s clock."""
    local = moment.astimezone(tz)
    day = f"{_DAYS_OF_WEEK[local.weekday()]} {local.day} {MONTH_NAMES[local.month - 1].title()}"
    return f"{day}{f' {local.year}' if year else ''} {local:%H:%M}"


def describe(spec: Spec, tz: ZoneInfo, now: datetime | None = None) -> str:
    """The spec for the chat: ``once, Fri 4 Dec 18:30``, ``every 2 hours from 12:07``, ``every weekday at 09:00
    (Europe/Berlin)``, ``cron 0 9 * * 1-5 (at 09:00 on Mon–Fri, Europe/Berlin)``. With ``now``, a year other than
    now's is written out, and an interval's first fire today is shown by its time alone."""
    if spec.at is not None:
        other_year = now is not None and now.astimezone(tz).year != spec.at.astimezone(tz).year
        return f"once, {_when(spec.at, tz, year=other_year)}"
    if spec.every is not None and spec.anchor is not None:
        first = (spec.anchor.astimezone(UTC) + spec.every).astimezone(tz)
        same_day = now is None or now.astimezone(tz).date() == first.date()
        return f"every {_human(spec.every)} from {f'{first:%H:%M}' if same_day else _when(first, tz)}"
    assert spec.cron is not None
    if spec.words:
        days = {_ALL_DAYS: "day", _WEEKDAYS: "weekday", _WEEKEND: "Sat and Sun"}.get(spec.cron.weekdays)
        if days is None:
            days = day_runs(spec.cron.weekdays)
            if len(spec.cron.weekdays) == 1:
                days = next(name for name, day in _DAY_WORDS.items() if day in spec.cron.weekdays).title()
        clock = f"{spec.cron.hours[0]:02d}:{spec.cron.minutes[0]:02d}"
        return f"every {days} at {clock} ({tz.key})"
    return f"cron {spec.cron.text} ({spec.cron.explain()}, {tz.key})"
