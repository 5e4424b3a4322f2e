"""Reading a handoff's frontmatter values leniently: what other writers and hand edits put there (``"45m"``
durations, comma-separated lists, dates as YAML timestamps or only in the file's folders, ``None.``
placeholders). Each reader gives our own type or raises ``HandoffFormatError`` naming the value."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from memory.errors import HandoffFormatError

__all__ = ["EMPTY_MARKERS", "date_from_path", "date_value", "duration", "list_field", "shown", "substance", "text"]

# Placeholders other writers put in empty sections.
EMPTY_MARKERS = frozenset({"none", "none.", "n/a", "-", "no meaningful work.", "no meaningful work"})
_DATE_DIRS = re.compile(r"(\d{4})/(\d{2})/(\d{2})/[^/]+$")
# Matched against stripped text: three `\s*` in a row (before, between and after the parts) made the
# regex backtrack cubically: 67 s for a quoted duration of 2,000 spaces and a letter.
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)\s*h(?:ours?|rs?)?)?\s*(?:(\d+(?:\.\d+)?)\s*(?:m|min|mins|minutes?)?)?$")
_MAX_DURATION_CHARS = 40  # "12 hours 30 minutes" and the like; anything longer is not a duration


def list_field(value: Any) -> list[str]:
    """A YAML list field; a scalar is split on commas (hand edit: ``projects: a, b``)."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        out = [text(v) for v in value]
        return [v for v in out if v and v.lower() not in EMPTY_MARKERS]
    return list_field(text(value).split(","))


def shown(value: Any) -> str:
    """A value for an error message: its repr, cut short (a hostile file's value can be a megabyte)."""
    out = repr(value)
    return out if len(out) <= 60 else f"{out[:57]}..."


def text(value: Any) -> str:
    """A scalar as stripped text; a YAML date or timestamp in ISO form."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value).strip()


def date_value(value: Any) -> str:
    """A date field as ISO text."""
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        # A timestamp written without an offset is taken as UTC, so every date carries one.
        return value.replace(tzinfo=dt.UTC).isoformat()
    return text(value)


def date_from_path(path: Path | None) -> str:
    """The date of a file under ``YYYY/MM/DD/`` folders, else ``""``."""
    if path is None:
        return ""
    m = _DATE_DIRS.search(path.as_posix())
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else ""


def duration(value: Any, path: Path | None) -> float:
    """Minutes, from a number or text like ``"45m"``, ``"1h 30m"``, ``"2 hours"``."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        raise HandoffFormatError(path, f"invalid duration {shown(value)}")
    if isinstance(value, int | float):
        return float(value)
    said = str(value).strip().lower()
    m = _DURATION.match(said) if len(said) <= _MAX_DURATION_CHARS else None
    if m is None or not (m.group(1) or m.group(2)):
        raise HandoffFormatError(path, f"invalid duration {shown(value)}")
    return float(m.group(1) or 0) * 60 + float(m.group(2) or 0)


def substance(value: Any, path: Path | None) -> int:
    """0, 1 or 2 (1 when missing)."""
    if value is None or value == "":
        return 1
    try:
        n = int(str(value).strip())
    except ValueError as exc:
        raise HandoffFormatError(path, f"invalid substance {shown(value)}") from exc
    if n not in (0, 1, 2):
        raise HandoffFormatError(path, f"substance must be 0, 1 or 2, not {n}")
    return n
