"""The words of the schedule language: tokens, numbers, spans, clock times, days, and the moments they name.

Why apart: ``/at``, ``/every`` and speech (the phrases of ``bot.schedule_spec``) read the same words, and a Whisper
transcript writes them every way (casing, punctuation, ``nine`` or ``9``, ``p.m.``). Each reader answers ``(value,
next index)``, or None when the words there are not one, so a phrase can try one reading after another; it raises
ScheduleSpecError only for words that plainly mean one but are wrong (``25:00``, ``1.5s``).

Times: ``18:30``, ``6pm``, ``6:30 pm``, ``noon``, ``half past six``, ``quarter to seven``; a bare hour (``9``,
``nine``) is on the 24-hour clock (09:00). Durations: ``30m``, ``1h30m``, ``90s``, ``2d``, ``1w``, ``two hours``,
``an hour and a half``. Days: ``weekday``, ``monday``, ``mon,wed,fri``, ``mon-fri``, ``monday and thursday`` (cron
numbers, 0 is Sunday). A clock time on a day is an instant by ``bot.schedule_cron.resolve_wall``'s rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from fractions import Fraction
from zoneinfo import ZoneInfo

from bot.schedule_cron import DAY_NAMES, MONTH_NAMES, ScheduleSpecError, resolve_wall

__all__ = [
    "ALL_DAYS",
    "DAY_WORDS",
    "WEEKDAYS",
    "WEEKEND",
    "Clock",
    "Token",
    "canonical_days",
    "clock_then_day",
    "compact_duration",
    "compact_span",
    "day_named",
    "days_word",
    "human_span",
    "next_clock",
    "on_day",
    "raw_text",
    "read_clock",
    "read_date",
    "read_days",
    "read_duration",
    "text_from",
    "tokenize",
    "when_text",
    "word_at",
]

# Durations ---------------------------------------------------------------------------------------------------------

_MAX_DELAY = timedelta(days=3660)
_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604800),
}
_BARE_UNITS = {"second": 1, "minute": 60, "hour": 3600}  # "every hour"; "every day" and "every week" need more
_PART = r"([0-9]+(?:\.[0-9]+)?)(weeks?|wks?|w|days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)"


def compact_duration(word: str) -> timedelta | None:
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


def compact_span(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    parts = [(seconds // 86400, "d"), (seconds // 3600 % 24, "h"), (seconds // 60 % 60, "m"), (seconds % 60, "s")]
    return "".join(f"{amount}{unit}" for amount, unit in parts if amount) or "0s"


def human_span(span: timedelta) -> str:
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
class Token:
    word: str  # lowercased, outer punctuation stripped: what the grammar reads
    raw: str  # as written
    start: int  # where it begins in the text


_OUTER = "\"'“”‘’()[]{}<>.,;:!?…–—"


def tokenize(text: str) -> list[Token]:
    found = []
    for match in re.finditer(r"\S+", text):
        word = match[0].lower().replace("a.m", "am").replace("p.m", "pm").strip(_OUTER)
        word = {"o'clock": "oclock", "o’clock": "oclock"}.get(word, word)
        if word:
            found.append(Token(word, match[0], match.start()))
    return found


def word_at(tokens: list[Token], index: int) -> str:
    return tokens[index].word if index < len(tokens) else ""


def text_from(text: str, tokens: list[Token], index: int) -> str:
    """The text from token ``index`` on: the instruction after the schedule."""
    return text[tokens[index].start :].strip().lstrip(",;:-–— \t\n").strip() if index < len(tokens) else ""


def raw_text(tokens: list[Token], start: int, end: int) -> str:
    return " ".join(token.raw for token in tokens[start:end]).strip(",;")


_ONES = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}


def _number(tokens: list[Token], index: int, *, words_only: bool = False) -> tuple[int, int] | None:
    """A whole number at ``index``: digits, or words below a hundred (``nine``, ``forty-five``, ``forty five``)."""
    word = word_at(tokens, index)
    if re.fullmatch(r"[0-9]{1,6}", word):
        return None if words_only else (int(word), index + 1)
    tens, _, ones = word.partition("-")
    if ones:
        return (_TENS[tens] + _ONES[ones], index + 1) if tens in _TENS and 0 < _ONES.get(ones, 0) < 10 else None
    if word in _ONES:
        return _ONES[word], index + 1
    if word in _TENS:
        following = _ONES.get(word_at(tokens, index + 1), 0)
        return (_TENS[word] + following, index + 2) if 0 < following < 10 else (_TENS[word], index + 1)
    return None


def _amount(tokens: list[Token], index: int) -> tuple[Fraction, int] | None:
    word = word_at(tokens, index)
    if word in ("a", "an"):
        return Fraction(1), index + 1
    if word == "half":
        return Fraction(1, 2), index + 2 if word_at(tokens, index + 1) in ("a", "an") else index + 1
    if re.fullmatch(r"[0-9]{1,6}\.[0-9]{1,3}", word):
        return Fraction(word), index + 1
    number = _number(tokens, index)
    return (Fraction(number[0]), number[1]) if number else None


def read_duration(tokens: list[Token], index: int, *, bare_unit: bool = False) -> tuple[timedelta, int] | None:
    """A span at ``index`` (``30m``, ``1h 30m``, ``two hours``, ``an hour and a half``, ``1 hour and 30 minutes``;
    with ``bare_unit`` also ``hour``, ``minute``); None when there is none."""
    total, at, pieces = Fraction(0), index, 0
    while True:
        start = at + 1 if pieces and word_at(tokens, at) in ("and", "&", "plus") else at
        compact = compact_duration(word_at(tokens, start))
        if compact is not None:
            total, at, pieces = total + int(compact.total_seconds()), start + 1, pieces + 1
            continue
        amount = _amount(tokens, start)
        if amount is None and bare_unit and not pieces and word_at(tokens, start) in _BARE_UNITS:
            amount = Fraction(1), start
        if amount is None or word_at(tokens, amount[1]) not in _UNITS:
            break
        size = _UNITS[word_at(tokens, amount[1])]
        total, at, pieces = total + amount[0] * size, amount[1] + 1, pieces + 1
        if [word_at(tokens, at + k) for k in range(3)] == ["and", "a", "half"]:
            total, at = total + Fraction(size, 2), at + 3
    return (_seconds(total, raw_text(tokens, index, at)), at) if pieces else None


# Times of day ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Clock:
    hour: int
    minute: int
    strong: bool  # unmistakably a time (6:30, 6 pm, half past six, noon), not a bare number


_CLOCK = re.compile(r"([0-9]{1,2})(?:[:.h]([0-9]{2}))?(am|pm)?")
_MERIDIEM = ("am", "pm")


def read_clock(tokens: list[Token], index: int) -> tuple[Clock, int] | None:
    """A time of day at ``index``; None when there is none, an error when it looks like one but is not valid."""
    word = word_at(tokens, index)
    if word in ("noon", "midday", "midnight"):
        return Clock(0 if word == "midnight" else 12, 0, True), index + 1
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
        if word_at(tokens, at) in ("oh", "o") and 0 < _ONES.get(word_at(tokens, at + 1), 0) < 10:
            minute, at = _ONES[word_at(tokens, at + 1)], at + 2
        elif (words := _number(tokens, at, words_only=True)) is not None and words[0] >= 10:
            minute, at = words
    else:
        return None
    if not meridiem and word_at(tokens, at) in _MERIDIEM:
        meridiem, at = word_at(tokens, at), at + 1
    if hour == 12 and word_at(tokens, at) in ("noon", "midday") and minute is None:
        return Clock(12, 0, True), at + 1
    oclock = minute is None and word_at(tokens, at) == "oclock"
    at += oclock
    return _valid_clock(
        hour, minute or 0, meridiem, tokens, index, at, strong=bool(minute is not None or meridiem or oclock)
    )


def _valid_clock(
    hour: int, minute: int, meridiem: str, tokens: list[Token], index: int, at: int, *, strong: bool
) -> tuple[Clock, int]:
    if meridiem:
        if not 1 <= hour <= 12:
            raise ScheduleSpecError(f"I could not read '{raw_text(tokens, index, at)}' as a time")
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ScheduleSpecError(f"I could not read '{raw_text(tokens, index, at)}' as a time")
    return Clock(hour, minute, strong), at


def _relative_clock(tokens: list[Token], index: int) -> tuple[Clock, int] | None:
    """``half past six``, ``quarter to seven``, ``ten past nine pm`` (minutes in words, not digits)."""
    word = word_at(tokens, index)
    if word in ("half", "quarter"):
        minutes, at = (30 if word == "half" else 15), index + 1
    elif (number := _number(tokens, index, words_only=True)) is not None and 0 < number[0] < 60:
        minutes, at = number
        at += word_at(tokens, at) in ("minute", "minutes")
    else:
        return None
    direction = word_at(tokens, at)
    if direction not in ("past", "after", "to", "till", "before"):
        return None
    hour_at = _number(tokens, at + 1)
    if hour_at is None:
        return None
    hour, end = hour_at
    meridiem = word_at(tokens, end) if word_at(tokens, end) in _MERIDIEM else ""
    clock, end = _valid_clock(hour, 0, meridiem, tokens, index, end + bool(meridiem), strong=True)
    total = clock.hour * 60 + (minutes if direction in ("past", "after") else -minutes)
    return Clock(total % 1440 // 60, total % 60, True), end


# Days --------------------------------------------------------------------------------------------------------------

ALL_DAYS = frozenset(range(7))
WEEKDAYS = frozenset(range(1, 6))
WEEKEND = frozenset({0, 6})
DAY_WORDS = {
    "sunday": 0, "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6,
}  # fmt: skip
_SHORT_DAYS = {**{name: day for day, name in enumerate(DAY_NAMES)}, "tues": 2, "thur": 4, "thurs": 4}


def day_named(word: str, *, short: bool) -> int | None:
    """One day's name (``monday``, ``mondays``; with ``short`` also ``mon``)."""
    word = word[:-1] if word.endswith("s") and word[:-1] in DAY_WORDS else word
    return DAY_WORDS.get(word, _SHORT_DAYS.get(word) if short else None)


def _day_part(word: str, *, short: bool) -> frozenset[int] | None:
    """``mon``, ``mon-fri``, ``mon,wed,fri`` (ranges and lists written as one token)."""
    days: set[int] = set()
    for part in word.split(","):
        first, dash, last = part.partition("-")
        low, high = day_named(first, short=short), day_named(last, short=short) if dash else None
        if low is None or (dash and high is None):
            return None
        span = (high if high is not None else low) - low
        days.update((low + k) % 7 for k in range(span % 7 + 1))
    return frozenset(days)


def read_days(tokens: list[Token], index: int, *, short: bool) -> tuple[frozenset[int], int] | None:
    """Which days: ``day``, ``weekday``, ``weekend``, ``monday``, ``mon,wed,fri``, ``monday and thursday``."""
    word = word_at(tokens, index)
    named = {"day": ALL_DAYS, "weekday": WEEKDAYS, "weekend": WEEKEND}.get(word.removesuffix("s"))
    if named is not None:
        return named, index + 1
    days: set[int] = set()
    at = index
    while True:
        start = at + 1 if days and word_at(tokens, at) in ("and", "&") else at
        found = _day_part(word_at(tokens, start), short=short) if word_at(tokens, start) else None
        if found is None:
            break
        days |= found
        at = start + 1
    return (frozenset(days), at) if days else None


def days_word(weekdays: frozenset[int]) -> str:
    named = {ALL_DAYS: "day", WEEKDAYS: "weekday", WEEKEND: "weekend"}
    return named.get(weekdays) or ",".join(DAY_NAMES[day] for day in sorted(weekdays, key=lambda d: (d + 6) % 7))


def canonical_days(word: str) -> frozenset[int] | None:
    named = {"day": ALL_DAYS, "weekday": WEEKDAYS, "weekend": WEEKEND}
    if word in named:
        return named[word]
    days = word.split(",")
    return frozenset(DAY_NAMES.index(day) for day in days) if all(day in DAY_NAMES for day in days) else None


# Moments -----------------------------------------------------------------------------------------------------------


def next_clock(clock: Clock, now: datetime, tz: ZoneInfo, *, weekdays: frozenset[int] = ALL_DAYS) -> datetime:
    """The first ``clock`` time after ``now`` on one of ``weekdays`` (cron numbers), wall-time rules applied."""
    today = now.astimezone(tz).date()
    for ahead in range(9):
        day = today + timedelta(days=ahead)
        if (day.weekday() + 1) % 7 in weekdays and (fire := _on(day, clock, tz)) > now:
            return fire
    raise AssertionError("a weekday comes round within a week")  # pragma: no cover


def _on(day: date, clock: Clock, tz: ZoneInfo) -> datetime:
    return resolve_wall(datetime.combine(day, time(clock.hour, clock.minute)), tz)


def clock_then_day(
    found: tuple[Clock, int], tokens: list[Token], start: int, now: datetime, tz: ZoneInfo, *, spoken: bool
) -> tuple[datetime, int]:
    """A time with no day before it: ``18:30 tomorrow``, ``18:30 today``, ``18:30 on monday``, or ``18:30``
    (today, else tomorrow)."""
    clock, end = found
    if word_at(tokens, end) in ("today", "tomorrow"):
        return on_day(word_at(tokens, end), clock, now, tz, raw_text(tokens, start, end)), end + 1
    said_on = word_at(tokens, end) == "on"
    weekday = day_named(word_at(tokens, end + said_on), short=not spoken)
    if weekday is not None and (said_on or not spoken):
        return next_clock(clock, now, tz, weekdays=frozenset({weekday})), end + said_on + 1
    return next_clock(clock, now, tz), end


def on_day(word: str, clock: Clock, now: datetime, tz: ZoneInfo, written: str) -> datetime:
    today = now.astimezone(tz).date()
    fire = _on(today + timedelta(days=word == "tomorrow"), clock, tz)
    if fire <= now:
        raise ScheduleSpecError(f"{word} {written} has passed")
    return fire


def read_date(tokens: list[Token], index: int, now: datetime, tz: ZoneInfo) -> tuple[datetime, int]:
    """``2026-12-24 09:00`` or ``2026-12-24T09:00[+01:00]``: a date and time, which must be ahead."""
    written = tokens[index].word.upper()
    try:
        moment = datetime.fromisoformat(written)
    except ValueError:
        raise ScheduleSpecError(f"I could not read '{tokens[index].raw}' as a date") from None
    end = index + 1
    if "T" not in written:
        found = read_clock(tokens, end + (word_at(tokens, end) == "at"))
        if found is None:
            raise ScheduleSpecError(f"'{tokens[index].raw}' needs a time, as in /at {written} 09:00")
        clock, end = found
        moment = moment.replace(hour=clock.hour, minute=clock.minute)
    fire = resolve_wall(moment, tz) if moment.utcoffset() is None else moment.astimezone(UTC)
    if fire <= now:
        raise ScheduleSpecError(f"{when_text(fire, tz, year=True)} is in the past")
    return fire, end


_DAYS_OF_WEEK = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def when_text(moment: datetime, tz: ZoneInfo, *, year: bool = False) -> str:
    """``Fri 4 Dec 18:30`` (with ``year``: ``Fri 4 Dec 2026 18:30``), on ``tz``'s clock."""
    local = moment.astimezone(tz)
    day = f"{_DAYS_OF_WEEK[local.weekday()]} {local.day} {MONTH_NAMES[local.month - 1].title()}"
    return f"{day}{f' {local.year}' if year else ''} {local:%H:%M}"
