"""Durations python-telegram-bot hands us are read in either of its forms, without its migration warning."""

from __future__ import annotations

import datetime as dt
import warnings

import pytest
from telegram import Voice
from telegram.error import RetryAfter

from bot.progress import ptb_seconds


@pytest.mark.parametrize("timedelta_form", [False, True])
def test_retry_after_and_voice_length_read_as_seconds_in_either_form(
    timedelta_form: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PTB 22 returns int seconds unless PTB_TIMEDELTA is set; its next major version returns timedelta.
    monkeypatch.setenv("PTB_TIMEDELTA", "1" if timedelta_form else "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RetryAfter's own constructor reads the attribute
        flood = RetryAfter(dt.timedelta(seconds=3))
    voice = Voice("file", "unique", duration=dt.timedelta(seconds=61))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ptb_seconds(flood, "retry_after") == 3.0
        assert ptb_seconds(voice, "duration") == 61.0
    assert caught == []
