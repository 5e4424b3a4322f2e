"""What the decoder knew of a transcript, gathered on the transcriber's worker thread for bot.voice.doubt.

Two sources, both from the decoding the note had anyway plus one forced pass: each word's probability (the
transcript forced through the decoder against the audio, CTranslate2 ``align``) and the beam search's other
hypotheses (``Beams`` asks CTranslate2 for every beam rather than the best alone: the same search, no extra
cost). A decode that needed more than one ``generate`` call fell back to sampling: unsure as a whole.

A word's probability is its spelling's, except where the spelling is no part of what was said: a sentence's
first word (its capital), and one of the owner's words ("SQLite", "sqlite", "Sqlite"), whose probability is the
sum over the cases it may be written in (a few more forced passes, for the unsure ones only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bot.voice.doubt import DECIDING_NOUNS, Evidence, bare, deciding_positions, word_of_token, word_probabilities
from bot.voice.rivals import FirstGap, Rival, candidates, has_command, unknown_nouns, weighable
from bot.voice.snap import DEV_VERBS

__all__ = ["Beams", "first_gaps", "forced_steps", "gather", "spellings", "weigh_rivals"]


_RECASE_BELOW = 0.75  # a first word less sure than this is scored in lower case too (one more forced pass)
_SENTENCE_END = (".", "!", "?")

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


def gather(tokenizer: Any, force: Force, results: Sequence[Any], text: str, names: Sequence[str] = ()) -> Evidence:
    """``text``'s words with their probabilities, the other beams with their score below the best, fallback.
    ``names``: the owner's; they and the coding nouns are scored in every case they may be written in."""
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
    words = _with_spellings(tokenizer, force, text, words, (*names, *DECIDING_NOUNS))
    hypotheses: list[tuple[str, float]] = []
    if results and len(results[0].sequences_ids) > 1:
        best = results[0].scores[0]
        hypotheses = [
            (tokenizer.decode(ids).strip(), float(best - score))
            for ids, score in zip(results[0].sequences_ids[1:], results[0].scores[1:], strict=True)
        ]
    # More than one generate call: the first decode failed its checks and fell back to sampling.
    return Evidence(words, tuple(hypotheses), len(results) > 1)


def spellings(word: str, vocabulary: Sequence[str]) -> list[str]:
    """The other ways ``word`` may be written and still be the same word: its lower, capitalised and upper
    case, and the owner's own spelling of it ("SQLite": sqlite, Sqlite, SQLITE)."""
    out = [word.lower(), word[:1].upper() + word[1:].lower(), word.upper()]
    out += [v for v in vocabulary if v.lower() == word.lower()]
    return [v for i, v in enumerate(out) if v != word and v not in out[:i]]


def _with_spellings(
    tokenizer: Any, force: Force, text: str, words: tuple[tuple[str, float], ...], vocabulary: Sequence[str]
) -> tuple[tuple[str, float], ...]:
    """``words`` with each unsure word of the owner's vocabulary (but a sentence's first) as likely as all its
    spellings together: the model spreads a rare name over its cases ("SQLite" 0.14, "sqlite" 0.06, "Sqlite"
    0.04), none of which the audio tells apart. Measured on the bench's notes: about one needless tap in
    eight fewer on the piper voice, no catch lost there (docs/benchmarks.md, "Voice: a fifth round")."""
    known = {v.lower() for v in vocabulary}
    tokens = text.split()
    variants: list[tuple[int, str]] = []
    for j, (token, p) in enumerate(words):
        core = bare(token)
        if j == 0 or p >= _RECASE_BELOW or core.lower() not in known or tokens[j - 1].endswith(_SENTENCE_END):
            continue
        for spelled in spellings(core, vocabulary):
            variants.append((j, " ".join([*tokens[:j], token.replace(core, spelled, 1), *tokens[j + 1 :]])))
    if not variants:
        return words
    extra = [0.0] * len(words)
    for (j, _), (ids, probs) in zip(variants, force([v for _, v in variants]), strict=True):
        extra[j] += _word_mass([tokenizer.decode([t]) for t in ids], list(probs), j)
    return tuple((w, min(1.0, p + more)) for (w, p), more in zip(words, extra, strict=True))


def _word_mass(pieces: Sequence[str], probs: Sequence[float], index: int) -> float:
    """The probability of the word at ``index`` as spelled: the product of its tokens' (punctuation aside)."""
    mass = 1.0
    for at, piece, p in zip(word_of_token(pieces), pieces, probs, strict=True):
        if at == index and any(ch.isalnum() for ch in piece):
            mass *= float(p)
    return mass


def first_gaps(tokenizer: Any, ct2: Any, encoded: Any, start: list[int], text: str) -> FirstGap:
    """``FirstGap`` for ``text``, from one pass forcing it with the vocabulary's logits returned: how much
    likelier (nats) a word's first token was than the heard word's, at each word's first token."""
    tokens = tokenizer.encode(" " + text.strip())
    steps = forced_steps(ct2, encoded, start, tokens)
    owners = word_of_token([tokenizer.decode([t]) for t in tokens])
    starts = [k for k, word in enumerate(owners) if k == 0 or word != owners[k - 1]]
    rows: dict[int, np.ndarray[Any, np.dtype[np.float64]]] = {}
    firsts: dict[str, int] = {}

    def gap(index: int, word: str) -> float:
        if index >= len(starts) or starts[index] >= len(steps):
            return float("-inf")
        at = starts[index]
        if at not in rows:
            values = np.asarray(steps[at], dtype=np.float64)
            rows[at] = values - float(values.max())
        if word not in firsts:
            firsts[word] = tokenizer.encode(" " + word)[0]
        row = rows[at]
        return float(row[firsts[word]] - row[tokens[at]])

    return gap


def _unlikely(index: int, word: str) -> float:
    return float("-inf")


def weigh_rivals(
    text: str,
    names: Sequence[str],
    first_gap: Callable[[], FirstGap],
    score: Callable[[Sequence[str]], list[float]],
    probabilities: Sequence[float] = (),
) -> tuple[Rival, ...]:
    """The rivals of ``text``'s deciding words (bot.voice.rivals), each scored against the audio: its gap is its
    sentence's log-probability minus the transcript's. ``first_gap`` is made (one decoder pass) only when a
    word is to be weighed: a sentence whose only deciding words are its command verbs costs nothing unless a
    word sounds like one of the owner's.
    ``probabilities``: each word's (Evidence.words); a word at least ``rivals.WEIGH_BELOW`` sure is not weighed."""
    words = text.split()
    slots = weighable(words, deciding_positions(words, names), probabilities)
    nouns = (*names, *DECIDING_NOUNS, *DEV_VERBS)

    def vocabulary(kind: str) -> Sequence[str]:
        return (*DEV_VERBS, *names) if kind == "verb" else nouns

    unknown = [i for i in unknown_nouns(words, (*names, *DECIDING_NOUNS)) if i not in slots]
    # The logits pass only when a slot, a word the vocabulary lacks or the opening is to be weighed; sound-alikes
    # need none.
    gaps = first_gap() if slots or unknown or not has_command(words) else _unlikely
    picked = candidates(text, slots, vocabulary, gaps, (*names, *DECIDING_NOUNS), unknown)
    if not picked:
        return ()
    base, *scores = score([text, *(r.text for r in picked)])
    return tuple(replace(r, gap=s - base) for r, s in zip(picked, scores, strict=True))


def forced_steps(ct2: Any, encoded: Any, start: list[int], tokens: list[int]) -> list[Any]:
    """The decoder's logits at each step of ``tokens`` forced after ``start``, and at least one step more."""
    # How CTranslate2 counts max_length against a forced prefix is not documented: a generous limit, and a
    # second try with more room if the step after the prefix is missing.
    for room in (len(start) + 2 * len(tokens) + 4, 448):
        result = ct2.generate(
            encoded,
            [start + tokens],
            beam_size=1,
            max_length=room,
            return_logits_vocab=True,
            suppress_blank=False,
            suppress_tokens=[],
        )[0]
        steps: list[Any] = list(result.logits[0]) if result.logits else []
        if len(steps) > len(tokens):
            return steps
    return []
