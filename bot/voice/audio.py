"""A voice note's audio: decoded to the samples Whisper hears, or written to a file for a backend that reads one."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np

__all__ = ["SAMPLE_RATE", "as_file", "decode_samples", "short_error"]

SAMPLE_RATE = 16_000  # what Whisper hears


def decode_samples(audio: str | Path | bytes, rate: int = SAMPLE_RATE) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A note's audio as mono float32 samples at ``rate`` (Whisper's 16 kHz), decoded by PyAV.

    Bytes are read from memory: no temporary file to leak. This is faster-whisper's ``decode_audio`` less
    two costs on the echo's path: the 48 kHz frames of an Opus note are resampled in one piece rather than
    one frame at a time, and no ``gc.collect()`` follows (faster-whisper runs one so the resampler's objects
    are freed at once; a full collection of the bot's heap holds every thread, the event loop included).
    Raises what PyAV raises (``OSError`` for a missing file, ``av.error.FFmpegError`` for data it cannot decode).
    """
    source: str | io.BytesIO = io.BytesIO(audio) if isinstance(audio, bytes) else str(audio)
    with av.open(source, mode="r", metadata_errors="ignore") as container:
        fifo = av.AudioFifo()
        for frame in container.decode(audio=0):
            frame.pts = None  # the FIFO checks timestamps for gaps; a note's order is its decoding order
            fifo.write(frame)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    whole = fifo.read()
    frames = [*(resampler.resample(whole) if whole is not None else []), *resampler.resample(None)]
    parts = [f.to_ndarray().reshape(-1) for f in frames]
    return np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros(0, dtype=np.float32)


@contextlib.contextmanager
def as_file(audio: str | Path | bytes, temp_dir: Path | None) -> Iterator[str]:
    """A path for ``audio``; bytes are written to a temporary file that is removed on every exit."""
    if not isinstance(audio, bytes):
        yield str(audio)
        return
    if temp_dir is not None:
        temp_dir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="macupos-voice-", suffix=".ogg", dir=temp_dir)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(audio)
        yield name
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def short_error(exc: BaseException) -> str:
    """An exception's message on one line, at most 160 characters: what a user is told went wrong."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "…"
