"""The schedule language of /at, /every and spoken schedules: reading, canonical text, next fires across
daylight-saving changes, cron fields, and what is refused (with a message for the chat)."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import BotError
from bot.schedule_cron import CronExpr, next_wall_fire, resolve_wall
from bot.schedule_spec import (
    ScheduleSpecError,
    Spec,
    describe,
    next_fire,
    parse_at,
    parse_every,
    parse_spoken,
)
from tests.fuzzing import fuzz_settings, pick, texts

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
# Friday 4 December 2026, 10:07:23 in Berlin (CET, +01:00).
NOW = datetime(2026, 12, 4, 10, 7, 23, 456789, tzinfo=BERLIN)


def _utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def _fires(spec: Spec, after: datetime, count: int, tz: ZoneInfo = BERLIN) -> list[datetime]:
    """The next ``count`` fires, in UTC as next_fire gives them."""
    fires: list[datetime] = []
    for _ in range(count):
        fire = next_fire(spec, after, tz)
        assert fire is not None
        assert fire.tzinfo is UTC
        fires.append(fire)
        after = fire
    return fires


def _clock(fires: list[datetime], pattern: str = "%H:%M", tz: ZoneInfo = BERLIN) -> list[str]:
    return [fire.astimezone(tz).strftime(pattern) for fire in fires]


# /at -----------------------------------------------------------------------------------------------------------------

AT: list[tuple[str, str, str]] = [
    ("18:30 run the tests", "once 2026-12-04T18:30+01:00", "run the tests"),
    ("9:00 run the tests", "once 2026-12-05T09:00+01:00", "run the tests"),  # past today: tomorrow
    ("10:07 x", "once 2026-12-05T10:07+01:00", "x"),  # this minute has begun: tomorrow
    ("10:08 x", "once 2026-12-04T10:08+01:00", "x"),
    ("6pm x", "once 2026-12-04T18:00+01:00", "x"),
    ("6:30pm x", "once 2026-12-04T18:30+01:00", "x"),
    ("6:30 PM x", "once 2026-12-04T18:30+01:00", "x"),
    ("12am x", "once 2026-12-05T00:00+01:00", "x"),
    ("12pm x", "once 2026-12-04T12:00+01:00", "x"),
    ("noon x", "once 2026-12-04T12:00+01:00", "x"),
    ("midnight x", "once 2026-12-05T00:00+01:00", "x"),
    ("9 x", "once 2026-12-05T09:00+01:00", "x"),
    ("30m check the build", "once 2026-12-04T10:37:23+01:00", "check the build"),
    ("2h x", "once 2026-12-04T12:07:23+01:00", "x"),
    ("1h30m x", "once 2026-12-04T11:37:23+01:00", "x"),
    ("1h 30m x", "once 2026-12-04T11:37:23+01:00", "x"),
    ("90s x", "once 2026-12-04T10:08:53+01:00", "x"),
    ("1.5h x", "once 2026-12-04T11:37:23+01:00", "x"),
    ("2d x", "once 2026-12-06T10:07:23+01:00", "x"),
    ("30 minutes x", "once 2026-12-04T10:37:23+01:00", "x"),
    ("in 2 hours x", "once 2026-12-04T12:07:23+01:00", "x"),
    ("tomorrow 9:00 review the PRs", "once 2026-12-05T09:00+01:00", "review the PRs"),
    ("tomorrow at 9am x", "once 2026-12-05T09:00+01:00", "x"),
    ("today 18:00 x", "once 2026-12-04T18:00+01:00", "x"),
    ("18:30 tomorrow x", "once 2026-12-05T18:30+01:00", "x"),
    ("9:00 on monday x", "once 2026-12-07T09:00+01:00", "x"),
    ("9:00 mon x", "once 2026-12-07T09:00+01:00", "x"),
    ("monday 9:00 x", "once 2026-12-07T09:00+01:00", "x"),
    ("mon 9:00 x", "once 2026-12-07T09:00+01:00", "x"),
    ("on monday at 9:00 x", "once 2026-12-07T09:00+01:00", "x"),
    ("friday 10:08 x", "once 2026-12-04T10:08+01:00", "x"),  # today, still ahead
    ("friday 10:00 x", "once 2026-12-11T10:00+01:00", "x"),  # today, passed: next week
    ("2026-12-24 09:00 x", "once 2026-12-24T09:00+01:00", "x"),
    ("2027-07-01 9am x", "once 2027-07-01T09:00+02:00", "x"),
    ("2026-12-24T09:00 x", "once 2026-12-24T09:00+01:00", "x"),
    ("2026-12-24T09:00+00:00 x", "once 2026-12-24T10:00+01:00", "x"),
    ("at 18:30 x", "once 2026-12-04T18:30+01:00", "x"),
    # The instruction is kept as written: case, punctuation, lines.
    ("18:30   Run `make test`,\nthen REPORT.", "once 2026-12-04T18:30+01:00", "Run `make test`,\nthen REPORT."),
    ("18:30, deploy", "once 2026-12-04T18:30+01:00", "deploy"),
]


@pytest.mark.parametrize(("args", "canonical", "text"), AT)
def test_at(args: str, canonical: str, text: str) -> None:
    spec, rest = parse_at(args, NOW, BERLIN)
    assert (spec.kind, spec.text, rest) == ("once", canonical, text)


AT_ERRORS: list[tuple[str, str]] = [
    ("", "Say when, then what to do"),
    ("25:00 x", "I could not read '25:00' as a time"),
    ("18:60 x", "I could not read '18:60' as a time"),
    ("13pm x", "I could not read '13pm' as a time"),
    ("30 x", "I could not read '30' as a time"),
    ("soon x", "I could not read 'soon' as a time"),
    ("tomorrow review the PRs", "'tomorrow' needs a time, as in /at tomorrow 9:00"),
    ("monday x", "'monday' needs a time"),
    ("18:30", "What should I do on Fri 4 Dec 18:30?"),
    ("30m   ", "What should I do on Fri 4 Dec 10:37?"),
    ("today 9:00 x", "today 9:00 has passed"),
    ("2026-01-01 09:00 x", "Thu 1 Jan 2026 09:00 is in the past"),
    ("2026-02-30 09:00 x", "I could not read '2026-02-30' as a date"),
    ("2026-12-24 x", "'2026-12-24' needs a time"),
    ("0m x", "'0m' is no time from now"),
    ("0.5s x", "'0.5s' is not a whole number of seconds"),
    ("99999d x", "too far away"),
]


@pytest.mark.parametrize(("args", "message"), AT_ERRORS)
def test_at_refuses_with_a_message_for_the_chat(args: str, message: str) -> None:
    with pytest.raises(ScheduleSpecError) as caught:
        parse_at(args, NOW, BERLIN)
    assert message in str(caught.value)
    assert "Examples: /at 18:30 run the tests" in str(caught.value)


def test_the_error_is_a_bot_error_with_its_parts() -> None:
    with pytest.raises(BotError) as caught:
        parse_at("25:00 x", NOW, BERLIN)
    error = caught.value
    assert isinstance(error, ScheduleSpecError)
    assert error.problem == "I could not read '25:00' as a time"
    assert error.examples[0] == "/at 18:30 run the tests"
    assert str(error).startswith("I could not read '25:00' as a time. Examples: /at 18:30 run the tests, /at 30m")


def test_a_spec_has_the_fields_of_its_kind() -> None:
    with pytest.raises(ValueError):
        Spec("once")
    with pytest.raises(ValueError):
        Spec("once", at=NOW.replace(tzinfo=None))
    with pytest.raises(ValueError):
        Spec("once", at=NOW, every=timedelta(hours=1))
    with pytest.raises(ValueError):
        Spec("interval", every=timedelta(hours=1))
    with pytest.raises(ValueError):
        Spec("interval", every=timedelta(minutes=1, microseconds=5), anchor=NOW)
    with pytest.raises(ValueError):
        Spec("cron")
    with pytest.raises(ScheduleSpecError, match="too often"):
        Spec.interval(timedelta(seconds=59), NOW)
    # Instants keep their offset, lose their microseconds.
    assert Spec.once(NOW).text == "once 2026-12-04T10:07:23+01:00"
    assert Spec.once(NOW.astimezone(UTC)).text == "once 2026-12-04T09:07:23+00:00"
    assert Spec.once(NOW) == Spec.once(NOW.astimezone(UTC))


def test_now_and_after_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_at("18:30 x", NOW.replace(tzinfo=None), BERLIN)
    with pytest.raises(ValueError, match="aware"):
        next_fire(Spec.once(NOW), NOW.replace(tzinfo=None), BERLIN)


# /every --------------------------------------------------------------------------------------------------------------

EVERY: list[tuple[str, str, str]] = [
    ("2h check the build", "every 2h since 2026-12-04T10:07:23+01:00", "check the build"),
    ("30m x", "every 30m since 2026-12-04T10:07:23+01:00", "x"),
    ("1h30m x", "every 1h30m since 2026-12-04T10:07:23+01:00", "x"),
    ("90s x", "every 1m30s since 2026-12-04T10:07:23+01:00", "x"),
    ("2 days x", "every 2d since 2026-12-04T10:07:23+01:00", "x"),
    ("hour x", "every 1h since 2026-12-04T10:07:23+01:00", "x"),
    ("minute x", "every 1m since 2026-12-04T10:07:23+01:00", "x"),
    ("two hours x", "every 2h since 2026-12-04T10:07:23+01:00", "x"),
    ("day 09:00 x", "every day at 09:00", "x"),
    ("day at 9am x", "every day at 09:00", "x"),
    ("days 21:15 x", "every day at 21:15", "x"),
    ("weekday 09:00 run the tests", "every weekday at 09:00", "run the tests"),
    ("weekdays at 9 x", "every weekday at 09:00", "x"),
    ("weekend 10:00 x", "every weekend at 10:00", "x"),
    ("monday 9:00 x", "every mon at 09:00", "x"),
    ("mondays 9:00 x", "every mon at 09:00", "x"),
    ("mon,wed,fri 18:00 x", "every mon,wed,fri at 18:00", "x"),
    ("fri,mon,wed 6pm x", "every mon,wed,fri at 18:00", "x"),
    ("mon-fri 9:00 x", "every weekday at 09:00", "x"),
    ("sat,sun 10:00 x", "every weekend at 10:00", "x"),
    ("0 9 * * 1-5 run the tests", "cron 0 9 * * 1-5", "run the tests"),
    ("*/15 * * * * x", "cron */15 * * * *", "x"),
    ("0 9 * * MON-FRI x", "cron 0 9 * * mon-fri", "x"),
    ("cron 30 8 1 jan * x", "cron 30 8 1 jan *", "x"),
    ("0 9 * * 1-5: run the tests", "cron 0 9 * * 1-5", "run the tests"),
]


@pytest.mark.parametrize(("args", "canonical", "text"), EVERY)
def test_every(args: str, canonical: str, text: str) -> None:
    spec, rest = parse_every(args, NOW, BERLIN)
    assert (spec.text, rest) == (canonical, text)


EVERY_ERRORS: list[tuple[str, str]] = [
    ("", "Say how often, then what to do"),
    ("30s x", "every 30s is too often: 1 minute at the least"),
    ("0m x", "too often"),
    ("second x", "too often"),
    ("day run the tests", "'every day' needs a time, as in /every day 09:00"),
    ("mon,wed the standup", "'every mon,wed' needs a time"),
    ("week x", "I could not read 'week' as a schedule"),
    ("sometimes x", "I could not read 'sometimes' as a schedule"),
    ("day 25:00 x", "I could not read '25:00' as a time"),
    ("2h", "What should I do every 2 hours from 12:07"),
    ("0 9 * * 1-5", "What should I do cron 0 9 * * 1-5"),
    ("0 9 * *", "a cron spec has five fields"),
    ("60 9 * * * x", "60 is out of range for the minute in a cron spec (0-59)"),
    ("0 24 * * * x", "24 is out of range for the hour"),
    ("0 9 0 * * x", "0 is out of range for the day of month"),
    ("0 9 32 * * x", "32 is out of range for the day of month"),
    ("0 9 * 13 * x", "13 is out of range for the month"),
    ("0 9 * * 8 x", "8 is out of range for the day of week"),
    ("0 9 * * funday x", "'funday' is not a valid day of week in a cron spec (0-7 or sun-sat)"),
    ("0 9 * smarch * x", "'smarch' is not a valid month"),
    ("0 17-9 * * * x", "the range '17-9' in a cron spec runs backwards"),
    ("*/0 9 * * * x", "'*/0' needs a whole step of 1 or more"),
    ("1,,2 9 * * * x", "'' is not a valid minute"),
    ("0 0 31 2 * x", "never fires"),
    ("0 0 30,31 2 * x", "never fires"),
    ("0 0 31 4,6,9,11 * x", "never fires"),
]


@pytest.mark.parametrize(("args", "message"), EVERY_ERRORS)
def test_every_refuses_with_a_message_for_the_chat(args: str, message: str) -> None:
    with pytest.raises(ScheduleSpecError) as caught:
        parse_every(args, NOW, BERLIN)
    assert message in str(caught.value)
    assert "Examples: /every" in str(caught.value)


# Spoken --------------------------------------------------------------------------------------------------------------

SPOKEN: list[tuple[str, str, str]] = [
    ("every weekday at nine run the tests", "every weekday at 09:00", "run the tests"),
    ("Every day at 9:30 a.m., check the CI.", "every day at 09:30", "check the CI."),
    ("In 30 minutes, run the linter.", "once 2026-12-04T10:37:23+01:00", "run the linter."),
    ("in thirty minutes run the linter", "once 2026-12-04T10:37:23+01:00", "run the linter"),
    ("At half past six deploy staging.", "once 2026-12-05T06:30+01:00", "deploy staging."),
    ("at quarter to seven pm call the deploy", "once 2026-12-04T18:45+01:00", "call the deploy"),
    ("at ten past nine pm, back up", "once 2026-12-04T21:10+01:00", "back up"),
    ("Tomorrow at 9 review the open PRs.", "once 2026-12-05T09:00+01:00", "review the open PRs."),
    ("tomorrow at nine thirty review", "once 2026-12-05T09:30+01:00", "review"),
    ("tomorrow at nine oh five review", "once 2026-12-05T09:05+01:00", "review"),
    ("tomorrow 9am review", "once 2026-12-05T09:00+01:00", "review"),
    ("every two hours check the build", "every 2h since 2026-12-04T10:07:23+01:00", "check the build"),
    ("Every hour, run the tests.", "every 1h since 2026-12-04T10:07:23+01:00", "run the tests."),
    ("every half hour poll the queue", "every 30m since 2026-12-04T10:07:23+01:00", "poll the queue"),
    ("every forty-five minutes check", "every 45m since 2026-12-04T10:07:23+01:00", "check"),
    ("every forty five minutes check", "every 45m since 2026-12-04T10:07:23+01:00", "check"),
    ("in an hour and a half, ship it", "once 2026-12-04T11:37:23+01:00", "ship it"),
    ("in half an hour ship it", "once 2026-12-04T10:37:23+01:00", "ship it"),
    ("in 1 hour and 30 minutes ship it", "once 2026-12-04T11:37:23+01:00", "ship it"),
    ("at 6 pm deploy", "once 2026-12-04T18:00+01:00", "deploy"),
    ("At nine p.m., deploy.", "once 2026-12-04T21:00+01:00", "deploy."),
    ("at 6:30 run the backup", "once 2026-12-05T06:30+01:00", "run the backup"),
    ("at noon summarise the logs", "once 2026-12-04T12:00+01:00", "summarise the logs"),
    ("at midnight rotate the logs", "once 2026-12-05T00:00+01:00", "rotate the logs"),
    ("at six o'clock deploy", "once 2026-12-05T06:00+01:00", "deploy"),
    ("at 9 p.m. tomorrow, deploy", "once 2026-12-05T21:00+01:00", "deploy"),
    ("At 9:30 a.m. on Monday, plan the sprint", "once 2026-12-07T09:30+01:00", "plan the sprint"),
    ("at 9:30 monday plans the sprint", "once 2026-12-05T09:30+01:00", "monday plans the sprint"),
    ("On Friday at 5 p.m. ship it", "once 2026-12-04T17:00+01:00", "ship it"),
    ("on monday at 9 plan the sprint", "once 2026-12-07T09:00+01:00", "plan the sprint"),
    ("next Monday at ten plan", "once 2026-12-07T10:00+01:00", "plan"),
    ("today at 5 pm release", "once 2026-12-04T17:00+01:00", "release"),
    ("every monday and thursday at 18:00 rotate logs", "every mon,thu at 18:00", "rotate logs"),
    ("Every Monday, Wednesday and Friday at 8 am, standup notes", "every mon,wed,fri at 08:00", "standup notes"),
    ("every day at twenty thirty back up", "every day at 20:30", "back up"),
    ("every day at 9 pm back up", "every day at 21:00", "back up"),
    ("every weekday 9:15 am run the tests", "every weekday at 09:15", "run the tests"),
    ("Okay, in twenty minutes check again", "once 2026-12-04T10:27:23+01:00", "check again"),
    ("Please every hour check the build", "every 1h since 2026-12-04T10:07:23+01:00", "check the build"),
]


@pytest.mark.parametrize(("transcript", "canonical", "text"), SPOKEN)
def test_spoken_schedules(transcript: str, canonical: str, text: str) -> None:
    found = parse_spoken(transcript, NOW, BERLIN)
    assert found is not None
    assert (found[0].text, found[1]) == (canonical, text)


NOT_SCHEDULES = [
    "run the tests every time it fails",
    "at the end, add logging",
    "every time the build fails, open an issue",
    "in the tests folder, rename the fixtures",
    "at least run the linter before pushing",
    "tomorrow we should refactor the parser",
    "every test in tests/bot should pass",
    "in 3 places the config is read twice, fix that",
    "at 5 call sites we swallow errors, fix them",  # a bare number after a leading "at"
    "on monday the release goes out, update the changelog",
    "every day I lose an hour to CI, speed it up",
    "in order to fix the bug, add a test",
    "every minute counts, so hurry with the fix",
    "every other file needs a license header",
    "in two weeks is the deadline, plan the work",
    "at first, read the README",
    "everyday tasks: clean the logs",
    "deploy at 6 pm",
    "at one point the cache broke, look into it",
    "every single test is flaky",
    "in a while we need to upgrade",
    "every Monday is release day",
    "at some point add docs",
    "in the morning, check the logs",
    "today we fix the parser",
    "every hour is precious, be quick",
    "on the main branch, run git status",
    "schedule a meeting every day at nine",
    # Schedules with nothing to do, or times that are no times.
    "every day at nine",
    "in 30 minutes.",
    "at 25:00 do it",
    "every 30 seconds ping the server",  # under a minute
    "",
]


@pytest.mark.parametrize("transcript", NOT_SCHEDULES)
def test_ordinary_instructions_are_not_schedules(transcript: str) -> None:
    assert parse_spoken(transcript, NOW, BERLIN) is None


# Canonical text ------------------------------------------------------------------------------------------------------


def _all_specs() -> list[Spec]:
    specs = [parse_at(args, NOW, BERLIN)[0] for args, _, _ in AT]
    specs += [parse_every(args, NOW, BERLIN)[0] for args, _, _ in EVERY]
    found = [parse_spoken(transcript, NOW, BERLIN) for transcript, _, _ in SPOKEN]
    return specs + [spec for spec, _ in filter(None, found)]


@pytest.mark.parametrize("spec", _all_specs(), ids=lambda spec: spec.text)
def test_canonical_text_round_trips(spec: Spec) -> None:
    again = Spec.parse_canonical(spec.text)
    assert again == spec
    assert again.text == spec.text
    assert describe(again, BERLIN) == describe(spec, BERLIN)
    assert next_fire(again, NOW, BERLIN) == next_fire(spec, NOW, BERLIN)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "once",
        "once tomorrow",
        "once 2026-12-04T18:30",  # no offset
        "every 2h",
        "every 2h since yesterday",
        "every 10s since 2026-12-04T10:07+01:00",
        "every funday at 09:00",
        "every day at 9:00",
        "cron 0 9 * *",
        "at 18:30",
    ],
)
def test_unreadable_stored_text_is_refused(text: str) -> None:
    with pytest.raises(ScheduleSpecError, match="is not a stored schedule"):
        Spec.parse_canonical(text)


# Next fires ----------------------------------------------------------------------------------------------------------


def test_a_once_spec_fires_once() -> None:
    spec, _ = parse_at("18:30 x", NOW, BERLIN)
    fire = next_fire(spec, NOW, BERLIN)
    assert fire == datetime(2026, 12, 4, 18, 30, tzinfo=BERLIN)
    assert fire is not None and fire.tzinfo is UTC
    assert next_fire(spec, fire, BERLIN) is None
    assert next_fire(spec, fire - timedelta(seconds=1), BERLIN) == fire


def test_an_interval_is_anchored_to_its_creation_and_does_not_drift() -> None:
    spec, _ = parse_every("2h x", datetime(2026, 12, 4, 10, 7, tzinfo=BERLIN), BERLIN)
    start = datetime(2026, 12, 4, 10, 7, tzinfo=BERLIN)
    assert _clock(_fires(spec, start, 4)) == ["12:07", "14:07", "16:07", "18:07"]
    # Asked late (a restart at 15:55), the next fire is still on the grid, not 2 hours after the restart.
    assert next_fire(spec, datetime(2026, 12, 4, 15, 55, tzinfo=BERLIN), BERLIN) == datetime(
        2026, 12, 4, 16, 7, tzinfo=BERLIN
    )
    assert next_fire(spec, datetime(2026, 12, 4, 16, 7, tzinfo=BERLIN), BERLIN) == datetime(
        2026, 12, 4, 18, 7, tzinfo=BERLIN
    )
    assert next_fire(spec, datetime(2026, 12, 1, tzinfo=BERLIN), BERLIN) == datetime(2026, 12, 4, 12, 7, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("tz", "created", "expected_utc"),
    [
        # Berlin springs forward at 01:00 UTC on 29 March 2026: 00:30 CET + 2h is 03:30 CEST (two real hours).
        (BERLIN, datetime(2026, 3, 29, 0, 30), [_utc(2026, 3, 29, 1, 30), _utc(2026, 3, 29, 3, 30)]),
        # and falls back at 01:00 UTC on 25 October: 01:30 CEST + 2h is 02:30 CET.
        (BERLIN, datetime(2026, 10, 25, 1, 30), [_utc(2026, 10, 25, 1, 30), _utc(2026, 10, 25, 3, 30)]),
        (NEW_YORK, datetime(2026, 3, 8, 0, 30), [_utc(2026, 3, 8, 7, 30), _utc(2026, 3, 8, 9, 30)]),
        (NEW_YORK, datetime(2026, 11, 1, 0, 30), [_utc(2026, 11, 1, 6, 30), _utc(2026, 11, 1, 8, 30)]),
    ],
)
def test_intervals_count_real_time_across_a_change(
    tz: ZoneInfo, created: datetime, expected_utc: list[datetime]
) -> None:
    now = created.replace(tzinfo=tz)
    spec, _ = parse_every("2h x", now, tz)
    fires = _fires(spec, now, 2, tz)
    assert fires == expected_utc
    assert fires[0] - now.astimezone(UTC) == timedelta(hours=2)


@pytest.mark.parametrize(
    ("tz", "spring", "fall"), [(BERLIN, (2026, 3, 29), (2026, 10, 25)), (NEW_YORK, (2026, 3, 8), (2026, 11, 1))]
)
def test_a_daily_nine_oclock_stays_at_nine_on_both_sides_of_a_change(
    tz: ZoneInfo, spring: tuple[int, int, int], fall: tuple[int, int, int]
) -> None:
    spec, _ = parse_every("day 09:00 x", NOW, tz)
    for year, month, day in (spring, fall):
        start = datetime(year, month, day, tzinfo=tz) - timedelta(days=3)
        fires = _fires(spec, start, 6, tz)
        assert _clock(fires, "%d %H:%M", tz) == [f"{start + timedelta(days=k):%d} 09:00" for k in range(6)]
        gaps = {fires[k + 1] - fires[k] for k in range(5)}
        assert gaps == {timedelta(hours=24), timedelta(hours=23 if month < 6 else 25)}


@pytest.mark.parametrize(
    ("tz", "day", "wall", "expected_utc"),
    [
        # 02:30 does not exist on the spring-forward day: it fires once, at the first valid minute (03:00).
        (BERLIN, (2026, 3, 29), "02:30", _utc(2026, 3, 29, 1, 0)),
        (NEW_YORK, (2026, 3, 8), "02:30", _utc(2026, 3, 8, 7, 0)),
        # 02:30 (Berlin) and 01:30 (New York) happen twice on the fall-back day: they fire once, the first time.
        (BERLIN, (2026, 10, 25), "02:30", _utc(2026, 10, 25, 0, 30)),
        (NEW_YORK, (2026, 11, 1), "01:30", _utc(2026, 11, 1, 5, 30)),
    ],
)
def test_a_daily_time_in_a_gap_or_a_fold_fires_once_that_day(
    tz: ZoneInfo, day: tuple[int, int, int], wall: str, expected_utc: datetime
) -> None:
    spec, _ = parse_every(f"day {wall} x", NOW, tz)
    midnight = datetime(*day, tzinfo=tz)
    fires = _fires(spec, midnight, 3, tz)
    assert fires[0] == expected_utc
    first_day = "03:00" if day[1] < 6 else wall  # spring: the gap's end
    days = [f"{midnight + timedelta(days=k):%d}" for k in range(3)]
    assert _clock(fires, "%d %H:%M", tz) == [f"{days[0]} {first_day}", f"{days[1]} {wall}", f"{days[2]} {wall}"]
    # Asked from inside the second pass of a repeated hour, the day's fire is over: tomorrow's is next.
    second_pass = expected_utc + timedelta(hours=1, minutes=10)
    assert next_fire(spec, second_pass, tz) == fires[1]


def test_asked_with_a_local_time_in_the_second_pass_of_a_fold() -> None:
    # Python compares two datetimes of one zone by wall time, fold ignored: 02:40 (second pass, CET) is after
    # 02:30 (first pass, CEST) in real time, though not on the clock. The answer must still be tomorrow.
    spec, _ = parse_every("day 02:30 x", NOW, BERLIN)
    second_pass = datetime(2026, 10, 25, 2, 40, fold=1, tzinfo=BERLIN)
    assert next_fire(spec, second_pass, BERLIN) == datetime(2026, 10, 26, 2, 30, tzinfo=BERLIN)
    assert next_fire(spec, second_pass.replace(minute=20), BERLIN) == datetime(2026, 10, 26, 2, 30, tzinfo=BERLIN)
    assert next_fire(spec, second_pass.replace(minute=20, fold=0), BERLIN) == _utc(2026, 10, 25, 0, 30)
    # A once-spec made then keeps its instant (stored at the fixed offset of that moment) and round-trips.
    at, _ = parse_at("30m x", second_pass, BERLIN)
    assert at.at == _utc(2026, 10, 25, 2, 10)
    assert at.text == "once 2026-10-25T03:10+01:00"
    assert Spec.parse_canonical(at.text) == at
    assert next_fire(at, second_pass, BERLIN) == _utc(2026, 10, 25, 2, 10)
    every, _ = parse_every("1h x", second_pass, BERLIN)
    assert every.text == "every 1h since 2026-10-25T02:40+01:00"
    assert next_fire(every, second_pass, BERLIN) == _utc(2026, 10, 25, 2, 40)
    # 02:35 asked at 02:40 (second pass) has passed today, in both passes: tomorrow.
    spec, _ = parse_at("02:35 x", second_pass, BERLIN)
    assert spec.at == datetime(2026, 10, 26, 2, 35, tzinfo=BERLIN)


def test_the_same_cron_rule_as_words_and_fields() -> None:
    words, _ = parse_every("day 02:30 x", NOW, BERLIN)
    fields, _ = parse_every("30 2 * * * x", NOW, BERLIN)
    start = datetime(2026, 3, 27, tzinfo=BERLIN)
    assert _fires(words, start, 5) == _fires(fields, start, 5)


def test_the_minutes_of_a_gap_fire_once_together_at_its_end() -> None:
    spec, _ = parse_every("*/15 * * * * x", NOW, BERLIN)
    fires = _fires(spec, datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN), 4)
    assert _clock(fires, "%H:%M %Z") == ["01:45 CET", "03:00 CEST", "03:15 CEST", "03:30 CEST"]


def test_an_hourly_cron_follows_the_wall_clock_through_a_fall_back() -> None:
    spec, _ = parse_every("0 * * * * x", NOW, BERLIN)
    fires = _fires(spec, datetime(2026, 10, 25, 0, 30, tzinfo=BERLIN), 4)
    # 02:00 happens twice (CEST, then CET): it fires in the first pass only.
    assert _clock(fires, "%H:%M %Z") == ["01:00 CEST", "02:00 CEST", "03:00 CET", "04:00 CET"]


def test_a_once_time_in_a_gap_moves_to_its_end() -> None:
    now = datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN)
    spec, _ = parse_at("tomorrow 02:30 x", now, BERLIN)
    assert spec.at == _utc(2026, 3, 29, 1, 0)
    spec, _ = parse_at("2026-10-25 02:30 x", now, BERLIN)
    assert spec.at == _utc(2026, 10, 25, 0, 30)  # the first 02:30


def test_resolve_wall() -> None:
    assert resolve_wall(datetime(2026, 3, 29, 2, 0), BERLIN) == _utc(2026, 3, 29, 1, 0)
    assert resolve_wall(datetime(2026, 3, 29, 2, 59, 59), BERLIN) == _utc(2026, 3, 29, 1, 0)
    assert resolve_wall(datetime(2026, 3, 29, 3, 0), BERLIN) == _utc(2026, 3, 29, 1, 0)
    assert resolve_wall(datetime(2026, 10, 25, 2, 0), BERLIN) == _utc(2026, 10, 25, 0, 0)
    assert resolve_wall(datetime(2026, 7, 1, 12, 0), BERLIN) == _utc(2026, 7, 1, 10, 0)
    # Lord Howe Island shifts by half an hour.
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    assert resolve_wall(datetime(2026, 10, 4, 2, 15), lord_howe) == resolve_wall(
        datetime(2026, 10, 4, 2, 30), lord_howe
    )


# Cron ----------------------------------------------------------------------------------------------------------------

CRON: list[tuple[str, datetime, list[str]]] = [
    # Both day fields restricted: either matches (the 1st of the month, or a Monday).
    (
        "0 9 1 * 1",
        datetime(2026, 12, 4),
        ["Mon 07 09:00", "Mon 14 09:00", "Mon 21 09:00", "Mon 28 09:00", "Fri 01 09:00"],
    ),
    # One starts with '*': both must match (odd days that are Mondays).
    ("0 9 */2 * 1", datetime(2026, 12, 1), ["Mon 07 09:00", "Mon 21 09:00", "Mon 11 09:00", "Mon 25 09:00"]),
    ("0 9 13 * 5", datetime(2026, 1, 1), ["Fri 02 09:00", "Fri 09 09:00", "Tue 13 09:00", "Fri 16 09:00"]),
    ("*/15 * * * *", datetime(2026, 12, 4, 10, 7), ["Fri 04 10:15", "Fri 04 10:30", "Fri 04 10:45", "Fri 04 11:00"]),
    ("10-20/5 8 * * *", datetime(2026, 12, 4), ["Fri 04 08:10", "Fri 04 08:15", "Fri 04 08:20", "Sat 05 08:10"]),
    ("50/5 8 * * *", datetime(2026, 12, 4), ["Fri 04 08:50", "Fri 04 08:55", "Sat 05 08:50"]),
    ("0 0,12 * * *", datetime(2026, 12, 4, 6), ["Fri 04 12:00", "Sat 05 00:00", "Sat 05 12:00"]),
    ("0 9 * * 7", datetime(2026, 12, 4), ["Sun 06 09:00", "Sun 13 09:00"]),  # 7 is Sunday
    ("0 9 * * 0", datetime(2026, 12, 4), ["Sun 06 09:00", "Sun 13 09:00"]),
    ("0 9 * * 5-7", datetime(2026, 12, 4, 10), ["Sat 05 09:00", "Sun 06 09:00", "Fri 11 09:00"]),
    ("0 9 * * fri-sun", datetime(2026, 12, 4, 10), ["Sat 05 09:00", "Sun 06 09:00", "Fri 11 09:00"]),
    ("0 9 * * */2", datetime(2026, 12, 4), ["Sat 05 09:00", "Sun 06 09:00", "Tue 08 09:00", "Thu 10 09:00"]),
    ("0 9 1 jan,JUL *", datetime(2026, 12, 4), ["Fri 01 09:00", "Thu 01 09:00"]),
    ("0 9 31 * *", datetime(2026, 12, 4), ["Thu 31 09:00", "Sun 31 09:00", "Wed 31 09:00"]),  # Dec, Jan, Mar
    ("59 23 31 12 *", datetime(2026, 12, 31, 23, 59), ["Fri 31 23:59"]),  # into next year
]


@pytest.mark.parametrize(("expr", "start", "expected"), CRON, ids=[case[0] for case in CRON])
def test_cron_fields(expr: str, start: datetime, expected: list[str]) -> None:
    spec = Spec.from_cron(expr)
    fires = _fires(spec, start.replace(tzinfo=BERLIN), len(expected))
    assert _clock(fires, "%a %d %H:%M") == expected


def test_cron_finds_february_29th_in_the_next_leap_year_quickly() -> None:
    spec = Spec.from_cron("0 0 29 2 *")
    assert next_fire(spec, NOW, BERLIN) == datetime(2028, 2, 29, tzinfo=BERLIN)
    started = time.perf_counter()
    fire = next_fire(spec, datetime(2096, 3, 1, tzinfo=BERLIN), BERLIN)  # 2100 is no leap year
    elapsed = time.perf_counter() - started
    assert fire == datetime(2104, 2, 29, tzinfo=BERLIN)
    assert elapsed < 0.05  # minute by minute it would be 4 million steps


def test_cron_expr_parts() -> None:
    expr = CronExpr.parse("0,30 9-17/4 * JAN-mar mon-fri")
    assert (expr.minutes, expr.hours, expr.months) == ((0, 30), (9, 13, 17), (1, 2, 3))
    assert expr.weekdays == frozenset({1, 2, 3, 4, 5})
    assert expr.text == "0,30 9-17/4 * jan-mar mon-fri"
    assert not expr.either_day
    assert CronExpr.parse("0 9 1 * 1").either_day
    assert CronExpr.parse("0 9 */1 * 1").either_day is False
    assert next_wall_fire(expr, datetime(2026, 4, 1, tzinfo=BERLIN), BERLIN) == datetime(2027, 1, 1, 9, tzinfo=BERLIN)


def test_next_fire_of_a_thousand_schedules_takes_milliseconds() -> None:
    texts = [
        "cron 0 9 * * 1-5",
        "cron */15 9-17 * * mon-fri",
        "cron 30 2 * * *",
        "cron 0 0 1 * *",
        "cron 0 9 1 * 1",
        "cron 5 4 * * sun",
        "cron 0 0 1 1 *",
        "cron 0 12 13 * 5",
        "every weekday at 09:00",
        "every mon,wed,fri at 18:00",
        "every 2h since 2026-01-01T10:07+01:00",
        "once 2026-12-24T09:00+01:00",
    ]
    specs = [Spec.parse_canonical(texts[k % len(texts)]) for k in range(1000)]
    after = [NOW + timedelta(minutes=37 * k) for k in range(1000)]
    started = time.perf_counter()
    fires = [next_fire(spec, moment, BERLIN) for spec, moment in zip(specs, after, strict=True)]
    elapsed = time.perf_counter() - started
    assert all(fire is None or fire > moment for fire, moment in zip(fires, after, strict=True))
    assert elapsed < 0.25, elapsed  # about 10 ms on a laptop; minute by minute it would be seconds


# Describing ----------------------------------------------------------------------------------------------------------

DESCRIBED: list[tuple[str, str]] = [
    ("once 2026-12-04T18:30+01:00", "once, Fri 4 Dec 18:30"),
    ("once 2027-01-04T17:30Z", "once, Mon 4 Jan 2027 18:30"),
    ("every 2h since 2026-12-04T10:07+01:00", "every 2 hours from 12:07"),
    ("every 1h since 2026-12-04T10:07+01:00", "every hour from 11:07"),
    ("every 1h30m since 2026-12-04T10:07+01:00", "every 1 hour 30 minutes from 11:37"),
    ("every 1d since 2026-12-04T10:07+01:00", "every day from Sat 5 Dec 10:07"),
    ("every 1m30s since 2026-12-04T10:07+01:00", "every 1 minute 30 seconds from 10:08"),
    ("every weekday at 09:00", "every weekday at 09:00 (Europe/Berlin)"),
    ("every day at 07:05", "every day at 07:05 (Europe/Berlin)"),
    ("every weekend at 10:00", "every Sat and Sun at 10:00 (Europe/Berlin)"),
    ("every mon at 09:00", "every Monday at 09:00 (Europe/Berlin)"),
    ("every mon,wed,fri at 18:00", "every Mon, Wed, Fri at 18:00 (Europe/Berlin)"),
    ("cron 0 9 * * 1-5", "cron 0 9 * * 1-5 (at 09:00 on Mon–Fri, Europe/Berlin)"),
    ("cron */15 9-17 * * *", "cron */15 9-17 * * * (at minutes 0, 15, 30, 45 of hours 9–17, Europe/Berlin)"),
    ("cron 5 * * * *", "cron 5 * * * * (at minute 5 of every hour, Europe/Berlin)"),
    ("cron * * * * *", "cron * * * * * (every minute, Europe/Berlin)"),
    ("cron 0 9 1,15 * *", "cron 0 9 1,15 * * (at 09:00 on day 1, 15 of the month, Europe/Berlin)"),
    ("cron 0 9 1 * 1", "cron 0 9 1 * 1 (at 09:00 on day 1 of the month or on Mon, Europe/Berlin)"),
    ("cron 0 0 29 2 *", "cron 0 0 29 2 * (at 00:00 on day 29 of the month in Feb, Europe/Berlin)"),
    ("cron 0 8,20 * * 6,0", "cron 0 8,20 * * 6,0 (at 08:00, 20:00 on Sat, Sun, Europe/Berlin)"),
]


@pytest.mark.parametrize(("text", "described"), DESCRIBED)
def test_describe(text: str, described: str) -> None:
    assert describe(Spec.parse_canonical(text), BERLIN, now=NOW) == described


def test_describe_in_another_zone_without_now() -> None:
    spec = Spec.parse_canonical("once 2026-12-04T18:30+01:00")
    assert describe(spec, NEW_YORK) == "once, Fri 4 Dec 12:30"
    assert describe(Spec.parse_canonical("every 2h since 2026-12-04T10:07+01:00"), NEW_YORK) == (
        "every 2 hours from 06:07"
    )
    assert describe(Spec.parse_canonical("every day at 09:00"), NEW_YORK) == "every day at 09:00 (America/New_York)"


def test_spoken_schedules_in_new_york() -> None:
    now = datetime(2026, 11, 1, 0, 15, tzinfo=NEW_YORK)  # the fall-back night
    found = parse_spoken("at 1:30 am, restart the worker", now, NEW_YORK)
    assert found is not None
    assert found[0].at == _utc(2026, 11, 1, 5, 30)  # the first 01:30 (EDT)
    found = parse_spoken("in two hours restart the worker", now, NEW_YORK)
    assert found is not None
    assert found[0].at == now.astimezone(UTC) + timedelta(hours=2)


def _minute_by_minute(expr: CronExpr, after: datetime, tz: ZoneInfo) -> datetime:
    """The slow reference: every wall minute from ``after`` on, until one matches and resolves past it."""
    wall = after.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    while True:
        wall += timedelta(minutes=1)
        on_day, on_weekday = wall.day in expr.days, (wall.weekday() + 1) % 7 in expr.weekdays
        day = (on_day or on_weekday) if expr.either_day else (on_day and on_weekday)
        if day and wall.minute in expr.minutes and wall.hour in expr.hours and wall.month in expr.months:
            fire = resolve_wall(wall, tz)
            if fire > after.astimezone(UTC):
                return fire


def test_the_jumping_search_agrees_with_a_minute_by_minute_one_around_changes() -> None:
    rng = random.Random(7)
    for case in range(30):
        minute = rng.choice(["*", "*/7", "0", "30", "15,45", "0-10"])
        hour = rng.choice(["*", "1-3", "2", "*/2", "0,2,3", "1"])
        day_of_month = rng.choice(["*", "*", "1-10", "25-31"])
        weekday = rng.choice(["*", "0", "1-5", "6,0", "*/3"])
        expr = CronExpr.parse(f"{minute} {hour} {day_of_month} * {weekday}")
        tz = (BERLIN, NEW_YORK)[case % 2]
        change = ((2026, 3, 29), (2026, 3, 8), (2026, 10, 25), (2026, 11, 1))[case % 4]
        after = datetime(*change, tzinfo=tz) + timedelta(minutes=rng.randrange(-36 * 60, 12 * 60))
        after = after.replace(fold=rng.randint(0, 1))
        for _ in range(3):
            expected = _minute_by_minute(expr, after, tz)
            assert next_wall_fire(expr, after, tz) == expected, (expr.text, after)
            after = expected


_VOCABULARY = (
    "every at in on next this today tomorrow day days weekday weekend monday mon,wed fri-mon sat noon midnight "
    "half quarter past to pm am a.m. p.m. o'clock oh five nine twelve twenty thirty forty-five 0 7 9 12 13 24 25 "
    "30 59 60 99 9:30 18:60 6pm 6:30pm 13pm 2h 30m 90s 0m 1.5h 0.5s 99999d and a an hour hours minute minutes "
    "seconds week * */15 1-5 jan 2026-12-24 2026-02-30 2026-12-24T09:00 cron , . - — run the tests ² \u200b"
).split()


@fuzz_settings(max_examples=1000)
@given(
    words=st.lists(st.one_of(pick(_VOCABULARY), pick(_VOCABULARY), texts), max_size=9),
    zone=pick((BERLIN, NEW_YORK, ZoneInfo("Australia/Lord_Howe"))),
    minutes=st.integers(0, 366 * 24 * 60),
)
def test_any_words_read_as_a_schedule_that_fires_or_a_message(words: list[str], zone: ZoneInfo, minutes: int) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    text = " ".join(words)
    for parse in (parse_at, parse_every, parse_spoken):
        try:
            found = parse(text, now, zone)
        except ScheduleSpecError:
            assert parse is not parse_spoken  # spoken text is a schedule or not; it never raises
            continue
        if found is None:
            continue
        spec, rest = found
        assert rest
        assert Spec.parse_canonical(spec.text) == spec
        fire = next_fire(spec, now, zone)
        assert fire is not None and fire > now
        assert describe(spec, zone, now)
