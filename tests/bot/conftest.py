"""Fixtures for bot tests: the Telegram Bot API double, generated voice notes, and one shared Whisper model."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from bot.voice.transcribe import Transcriber
from tests.doubles.telegram import TelegramDouble

VoiceNote = Callable[[str], Path]
_FFMPEG_IN = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i"]
# What Telegram clients send: 48 kHz mono Opus in OGG at a voice bitrate.
_FFMPEG_OUT = ["-ar", "48000", "-ac", "1", "-c:a", "libopus", "-b:a", "32k", "-application", "voip"]


@pytest.fixture
async def telegram_double() -> AsyncIterator[TelegramDouble]:
    """A started Bot API double on 127.0.0.1; stopped after the test."""
    async with TelegramDouble() as double:
        yield double


@pytest.fixture(scope="session")
def voice_note(tmp_path_factory: pytest.TempPathFactory) -> VoiceNote:
    """Factory: ``voice_note("run the tests in eywa")`` → a Telegram-like OGG/Opus file spoken by espeak-ng.

    Notes are cached per text for the whole session, so each is synthesised once.
    """
    if not (shutil.which("espeak-ng") and shutil.which("ffmpeg")):
        pytest.fail("espeak-ng and ffmpeg are needed to generate voice notes: run scripts/setup --test")
    folder = tmp_path_factory.mktemp("voice")

    def make(text: str) -> Path:
        stem = hashlib.sha1(text.encode()).hexdigest()[:12]
        ogg = folder / f"{stem}.ogg"
        if not ogg.exists():
            wav = folder / f"{stem}.wav"
            subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
            subprocess.run(
                [*_FFMPEG_IN, str(wav), *_FFMPEG_OUT, str(ogg)],
                check=True,
                capture_output=True,
            )
            wav.unlink()
        return ogg

    return make


@pytest.fixture(scope="session")
def transcriber() -> Iterator[Transcriber]:
    """The default Transcriber (bundled tiny.en), loaded once per session on its own worker thread."""
    t = Transcriber()
    yield t
    t.close()


_T = TypeVar("_T")


async def loop_ticks_while(work: Awaitable[_T]) -> tuple[_T, int]:
    """``work``'s result and how many times the event loop went round meanwhile: a model that ran on the
    loop's own thread would leave it at one or two."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    try:
        return await work, ticks
    finally:
        task.cancel()
