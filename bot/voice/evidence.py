"""What the decoder knew of a transcript, gathered on the transcriber's worker thread for bot.voice.doubt.

Two sources, both from the decoding the note had anyway plus one forced pass: each word's probability (the
transcript forced through the decoder against the audio, CTranslate2 ``align``) and the beam search's other
hypotheses (``Beams`` asks CTranslate2 for every beam rather than the best alone: the same search, no extra
cost). A decode that needed more than one ``generate`` call fell back to sampling: unsure as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bot.voice.doubt import Evidence, word_probabilities

__all__ = ["Beams", "gather"]

_RECASE_BELOW = 0.75  # a first word less sure than this is scored in lower case too (one more forced pass)

# Texts → each one's tokens and their probabilities given the audio (Transcriber._token_probs).
Force = Callable[[Sequence[str]], list[tuple[list[int], Any]]]


class Beams:
    """The CTranslate2 model, asked for every beam's hypothesis; each decode's result is kept in ``results``
    (cleared by the transcriber before each note). faster-whisper reads only the first hypothesis."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.results: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        beams = int(kwargs.get("beam_size", 1))
        if beams > 1:
            kwargs["num_hypotheses"] = beams
        out = self.inner.generate(*args, **kwargs)
        self.results.append(out[0])
        return out


def gather(tokenizer: Any, force: Force, results: Sequence[Any], text: str) -> Evidence:
    """``text``'s words with their probabilities, the other beams with their score below the best, fallback."""
    [(tokens, probs)] = force([text])
    words = word_probabilities([tokenizer.decode([t]) for t in tokens], list(probs), text)
    if words and words[0][1] < _RECASE_BELOW and text[:1].isupper():
        # A capital spreads a sentence's first word over its spellings: its probability is the better of the
        # two cases, as snapping scores both.
        lower = text[:1].lower() + text[1:]
        [(low_tokens, low_probs)] = force([lower])
        first = word_probabilities([tokenizer.decode([t]) for t in low_tokens], list(low_probs), lower)
        if first:
            words = ((words[0][0], max(words[0][1], first[0][1])), *words[1:])
    hypotheses: list[tuple[str, float]] = []
    if results and len(results[0].sequences_ids) > 1:
        best = results[0].scores[0]
        hypotheses = [
            (tokenizer.decode(ids).strip(), float(best - score))
            for ids, score in zip(results[0].sequences_ids[1:], results[0].scores[1:], strict=True)
        ]
    # More than one generate call: the first decode failed its checks and fell back to sampling.
    return Evidence(words, tuple(hypotheses), len(results) > 1)
