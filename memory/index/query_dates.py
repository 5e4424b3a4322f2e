"""Absolute dates a query names ("on 3 June, 2023", "June 3rd", "in May 2023", "in June", "2023-06-03"),
and how near a handoff's date is to them: the date term of retrieval (docs/retrieval.md, "Date term").

Dates are UTC calendar days or months. A bare month counts only after a preposition that makes it one
(``in``, ``during``, ``since``, ``before``, ``after``, ``early``, ``late``, ``mid``): "may" is a verb too.
A date without a year means the nearest such day or month to the handoff's own date.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

__all__ = ["NamedDate", "date_match", "query_dates"]

_DAY_S = 86_400.0
_MONTHS = "january february march april may june july august september october november december".split()
_MONTH = "|".join([*_MONTHS, *(m[:3] for m in _MONTHS if m != "may"), "sept"])
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b\.?(?:,?\s+(\d{{4}})\b)?", re.I)
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)
_IN_MONTH = re.compile(rf"\b(?:in|during|since|before|after|early|late|mid)\s+({_MONTH})\b", re.I)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# Most queries name no date: one cheap search decides whether the patterns above need to run at all.
_ANY = re.compile(rf"\d|\b(?:{_MONTH})\b", re.I)


class NamedDate(NamedTuple):
    year: int | None  # None: the nearest year to the handoff's date
    month: int
    day: int | None  # None: the whole month


def _month(name: str) -> int:
    return [m[:3] for m in _MONTHS].index(name.lower()[:3]) + 1


def query_dates(query: str) -> list[NamedDate]:
    """The absolute dates ``query`` names, in the order the patterns find them; overlapping matches once."""
    if not _ANY.search(query):
        return []
    out: list[NamedDate] = []
    used: list[tuple[int, int]] = []

    def take(m: re.Match[str], date: NamedDate) -> None:
        if all(m.end() <= a or m.start() >= b for a, b in used):
            out.append(date)
            used.append(m.span())

    for m in _ISO_DAY.finditer(query):
        if 1 <= int(m.group(2)) <= 12 and 1 <= int(m.group(3)) <= 31:
            take(m, NamedDate(int(m.group(1)), int(m.group(2)), int(m.group(3))))
    for m in _DAY_MONTH.finditer(query):
        if 1 <= int(m.group(1)) <= 31:
            take(m, NamedDate(int(m.group(3)) if m.group(3) else None, _month(m.group(2)), int(m.group(1))))
    for m in _MONTH_DAY.finditer(query):
        if 1 <= int(m.group(2)) <= 31:
            take(m, NamedDate(int(m.group(3)) if m.group(3) else None, _month(m.group(1)), int(m.group(2))))
    for m in _MONTH_YEAR.finditer(query):
        take(m, NamedDate(int(m.group(2)), _month(m.group(1)), None))
    for m in _IN_MONTH.finditer(query):
        take(m, NamedDate(None, _month(m.group(1)), None))
    return out


def date_match(ts: float, dates: list[NamedDate], scale_days: float) -> float:
    """exp(−d / scale) for the nearest of ``dates``, d = days from ``ts`` to that day or month (0 inside
    it); 0.0 when there are none (or none is a real calendar date). scale 0: 1.0 inside, else 0.0."""
    if not dates:
        return 0.0
    t = datetime.fromtimestamp(ts, UTC)
    best = math.inf
    for year, month, day in dates:
        for y in [year] if year else [t.year - 1, t.year, t.year + 1]:
            try:
                start = datetime(y, month, day or 1, tzinfo=UTC)
                stop = start + timedelta(days=1) if day else datetime(y + month // 12, month % 12 + 1, 1, tzinfo=UTC)
            except (ValueError, OverflowError):  # 31 June, or a year out of range
                continue
            gap = (start - t) if t < start else (t - stop) if t >= stop else timedelta(0)
            best = min(best, gap.total_seconds() / _DAY_S)
    if best == math.inf:
        return 0.0
    return math.exp(-best / scale_days) if scale_days > 0 else float(best == 0.0)
