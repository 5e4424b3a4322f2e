"""Durations python-telegram-bot hands us are read in either of its forms, without its migration warning."""

from __future__ import annotations

import datetime as dt
import warnings

import pytest
from telegram import Bot, Voice
from telegram.error import RetryAfter

from bot.progress import Sender, ptb_seconds
from tests.doubles.telegram import TelegramDouble


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


@pytest.mark.parametrize("html_text", [True, False])
async def test_a_reply_too_long_for_one_message_is_cut_not_lost(
    telegram_double: TelegramDouble, html_text: bool
) -> None:
    text = "<b>echo</b> " + "😀 long argument " * 400  # ~6,800 UTF-16 units: Telegram would refuse it whole
    async with Bot(telegram_double.token, base_url=telegram_double.base_url) as bot:
        sent = await Sender(bot).send(42, text, html_text=html_text)
    body = sent.text or ""
    assert body.endswith("…") and len(body.encode("utf-16-le")) // 2 <= 4096
    assert body.startswith("echo " if html_text else "<b>echo</b> ")


async def test_a_chat_action_shows_while_the_block_runs_and_a_refused_one_never_raises(
    telegram_double: TelegramDouble,
) -> None:
    async with Bot(telegram_double.token, base_url=telegram_double.base_url) as bot:
        sender = Sender(bot)
        async with sender.showing(42, "typing"):
            await telegram_double.wait_for(lambda: telegram_double.calls("sendChatAction"))
            await sender.send(42, "working", html_text=False)
        actions = telegram_double.calls("sendChatAction")
        assert [(c.params["chat_id"], c.params["action"], c.ok) for c in actions] == [(42, "typing", True)]
        async with sender.showing(42, "juggling"):  # Telegram refuses an unknown action: the block goes on
            await telegram_double.wait_for(lambda: len(telegram_double.calls("sendChatAction")) == 2)
            await sender.send(42, "still working", html_text=False)
    refused = telegram_double.calls("sendChatAction")[1:]
    assert [c.ok for c in refused] == [False]
    assert telegram_double.texts(42) == ["working", "still working"]
