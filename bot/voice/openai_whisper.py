"""The optional openai-whisper backend (the ``openai-whisper`` extra), imported only when a Transcriber uses it.

It reads the note through the ``ffmpeg`` program, so bytes go through a temporary file. It has no snapping,
flags or answer scoring: those need faster-whisper's CTranslate2 model.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.errors import VoiceError, VoiceModelError
from bot.voice.audio import as_file, short_error

__all__ = ["load", "transcribe"]


def load(name: str, device: str, download_root: Path | None) -> Any:
    """The openai-whisper model ``name`` (default tiny.en); VoiceModelError when it or the package is missing."""
    try:
        whisper = importlib.import_module("whisper")
    except ImportError as exc:
        raise VoiceModelError(
            "the openai-whisper backend is not installed: install a CPU torch first, then "
            "pip install 'macupos[openai-whisper]'"
        ) from exc
    name = name or "tiny.en"
    try:
        return whisper.load_model(name, device=device, download_root=str(download_root) if download_root else None)
    except (OSError, RuntimeError, ValueError) as exc:  # URLError is an OSError
        raise VoiceModelError(f"couldn't load the openai-whisper model {name!r} ({exc})") from exc


def transcribe(
    model: Any,
    audio: str | Path | bytes,
    *,
    prompt: str | None,
    beam_size: int,
    language: str | None,
    without_timestamps: bool,
    temperature: float | Sequence[float] | None,
    temp_dir: Path | None,
) -> tuple[str, str, float]:
    """The note's text, its language and its length in seconds; VoiceError when ffmpeg cannot decode it."""
    whisper = importlib.import_module("whisper")
    with as_file(audio, temp_dir) as path:
        try:
            samples = whisper.audio.load_audio(path)  # runs the ffmpeg program
            options: dict[str, Any] = {"without_timestamps": without_timestamps}
            if temperature is not None:
                options["temperature"] = temperature
            result = model.transcribe(
                samples, beam_size=beam_size, language=language, initial_prompt=prompt, fp16=False, **options
            )
        except (RuntimeError, OSError, ValueError) as exc:  # load_audio raises RuntimeError on ffmpeg failure
            raise VoiceError(f"couldn't decode that voice note ({short_error(exc)})") from exc
    text = str(result.get("text", "")).strip()
    return text, str(result.get("language") or ""), len(samples) / whisper.audio.SAMPLE_RATE
