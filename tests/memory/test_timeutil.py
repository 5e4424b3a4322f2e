"""The one ISO-8601 reader: `Z` and a missing offset are UTC, an offset is kept, anything else is ValueError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory.timeutil import parse_iso


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-06-03T10:00:00Z", datetime(2025, 6, 3, 10, tzinfo=UTC)),
        ("2025-06-03T10:00:00.250z", datetime(2025, 6, 3, 10, 0, 0, 250_000, tzinfo=UTC)),
        ("2025-06-03T10:00:00", datetime(2025, 6, 3, 10, tzinfo=UTC)),  # naive: UTC by convention
        ("2025-06-03", datetime(2025, 6, 3, tzinfo=UTC)),
        ("2025-06-03T12:00:00+02:00", datetime(2025, 6, 3, 12, tzinfo=timezone(timedelta(hours=2)))),
    ],
)
def test_reads_iso_8601_with_utc_for_z_and_for_no_offset(text: str, expected: datetime) -> None:
    parsed = parse_iso(text)
    assert parsed == expected and parsed.utcoffset() == expected.utcoffset()


def test_an_offset_is_kept_not_converted() -> None:
    assert parse_iso("2025-06-03T23:30:00-05:00").day == 3  # the calendar day where it was written


@pytest.mark.parametrize("text", ["", "Z", "yesterday", "2025-13-01", "2025-06-03T10:00:00ZZ"])
def test_text_that_is_no_time_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_iso(text)
