"""A note's audio (bot.voice.audio): decoded samples, a temporary file for backends that read one, short errors."""

from __future__ import annotations

from pathlib import Path

import av.error
import pytest

from bot.voice.audio import SAMPLE_RATE, as_file, decode_samples, short_error
from tests.bot.conftest import VoiceNote


def test_a_notes_bytes_decode_to_mono_samples_at_whispers_rate(voice_note: VoiceNote) -> None:
    note = voice_note("run the tests")
    samples = decode_samples(note.read_bytes())
    assert samples.ndim == 1 and samples.dtype.name == "float32"
    assert 0.5 < len(samples) / SAMPLE_RATE < 5.0
    assert len(decode_samples(note)) == len(samples)  # a path reads the same


def test_bytes_that_are_no_audio_raise_what_pyav_raises() -> None:
    with pytest.raises((av.error.FFmpegError, ValueError, EOFError)):
        decode_samples(b"not an ogg file at all")


def test_bytes_get_a_temporary_file_that_is_gone_on_every_exit(tmp_path: Path) -> None:
    with as_file(b"OggS...", tmp_path / "voice") as name:
        assert Path(name).read_bytes() == b"OggS..." and Path(name).parent == tmp_path / "voice"
    assert not Path(name).exists()
    with pytest.raises(RuntimeError), as_file(b"x", tmp_path) as name:
        raise RuntimeError("the backend failed")
    assert not Path(name).exists()
    # A path is used as it is: nothing is written or removed.
    kept = tmp_path / "note.ogg"
    kept.write_bytes(b"x")
    with as_file(kept, tmp_path) as name:
        assert name == str(kept)
    assert kept.exists()


def test_an_error_is_told_in_one_line_of_at_most_160_characters() -> None:
    assert short_error(ValueError("bad\n  data")) == "bad data"
    assert short_error(KeyError()) == "KeyError"
    long = short_error(OSError("x" * 500))
    assert len(long) <= 160 and long.startswith("x" * 150) and long.endswith("…")
