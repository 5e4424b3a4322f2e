"""ISO-8601 instants as the whole project reads them: one parser, one rule for a missing offset."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_iso"]


def parse_iso(text: str) -> datetime:
    """An aware datetime from ISO-8601 text; a ``Z`` suffix is UTC and a time without an offset is taken
    as UTC (transcripts and handoffs write UTC). Raises ValueError when ``text`` is not ISO-8601; each
    caller keeps its own answer to that (a refusal, a fallback, "undated")."""
    text = text.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
