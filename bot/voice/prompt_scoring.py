"""A spoken answer to a waiting prompt, chosen by scoring the prompt's few answers against the audio.

Transcribing a one-word reply is the hard way to hear it: tiny.en, free to write anything, writes "Hello."
for "allow" and "Good night." for "deny it". While a prompt waits there are only a few things the owner is
likely to say, so each of them ("Allow.", "Yes, allow it.", "Deny.", "Allow for this session." …) is forced
through the decoder against the note's audio and scored by its log-probability, the way whisper.cpp's
command mode picks from its list (``Transcriber.score_answers``). The end of the utterance is scored too, so
"Allow." does not win over "Allow the deploy to staging and run the tests." just by being shorter.

"None of these" is the free transcription, scored the same way: when the best answer falls far below it
(``MARGIN`` nats), the note said something else ("what time is it") and the transcript's own reading
(bot.voice.intent) stands, an instruction or an ambiguous mix. An answer within the margin is taken only when
it beats every phrase of the other answers by ``SEPARATION`` nats; when the scores and the transcript's words
name two different answers, the owner is asked again: a misheard answer is never acted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.errors import VoiceError
from bot.voice.evidence import Beams, forced_steps
from bot.voice.intent import MAX_ANSWER_WORDS, Choice, PromptKind, VoiceAnswer, answer_hotwords, interpret
from bot.voice.transcribe import vocabulary_prompt

if TYPE_CHECKING:
    from bot.voice.transcribe import Transcriber, Transcript

__all__ = [
    "MARGIN",
    "MAX_ANSWER_SECONDS",
    "PHRASES",
    "SEPARATION",
    "SOUND_ALONE",
    "Scored",
    "decide",
    "score_answer",
    "whole_scores",
]

# Measured with bench/voice_answers.py (docs/benchmarks.md, "Voice: prompt answers by scoring").
MARGIN = 2.0  # nats an answer may score below the decoder's own text (or the transcript) and still be what was said
SEPARATION = 2.0  # nats the best answer must beat every phrase of the other answers by
# What the sound alone may decide when the words name no answer: only the answers that run nothing and lose
# nothing. "Hello." scored as "Allow." (it happened, once in 90 non-answers) must be asked again, never run.
SOUND_ALONE: frozenset[Choice] = frozenset({"deny", "cancel", "keep"})
MAX_ANSWER_SECONDS = 10.0  # a longer note is not a reply: it is not scored (each phrase costs a decoder pass)
_WINDOW_FRAMES = 3000  # Whisper's 30 s window in mel frames
_MAX_OWN_TOKENS = 64  # the decoder's own text of a note of ≤ 10 s; more is a hallucinated loop

# What the owner says to each prompt, as Whisper writes it (capital, full stop): several carriers of each
# answer, since the end of the utterance is scored and "Allow it." is not "Allow.". "Yes"/"no" answer every
# prompt, as its first or its refusing button.
PHRASES: dict[PromptKind, dict[Choice, tuple[str, ...]]] = {
    "approval": {
        "allow": ("Allow.", "Allow it.", "Yes.", "Yes, allow."),
        "deny": ("Deny.", "Deny it.", "No.", "No, deny."),
        "allow_session": ("Allow for this session.", "Yes, for this session."),
    },
    "confirmation": {
        "run": ("Run it.", "Run.", "Yes.", "Yes, run it."),
        "cancel": ("Cancel.", "Cancel it.", "No.", "No, cancel."),
    },
    "review": {
        "keep": ("Keep.", "Keep it.", "Yes.", "Yes, keep it."),
        "forget": ("Forget.", "Forget it.", "No.", "No, forget it."),
    },
}


@dataclass(frozen=True, slots=True)
class Scored:
    """The scores behind a decision: the best phrase and its choice, the best of any other choice, and the
    free transcript's own score (all log-probabilities of the whole utterance, end included)."""

    choice: Choice
    phrase: str
    score: float
    runner_up: float
    heard: float


def decide(
    kind: PromptKind, heard: str, scored: Scored | None, *, margin: float = MARGIN, separation: float = SEPARATION
) -> VoiceAnswer:
    """The answer a note gives: the transcript's reading (bot.voice.intent), corrected by the scores.

    The scores decide only when an answer explains the audio about as well as the free transcript (within
    ``margin``); one that beats the other answers by ``separation`` rescues a misheard reply ("Hello." for
    "deny") when it is one of :data:`SOUND_ALONE` (an answer that runs or deletes something is asked again:
    the words must say it); if the transcript's words name another answer, it is ambiguous.
    """
    read = interpret(heard, kind)
    if scored is None or scored.score < scored.heard - margin:
        return read  # none of the answers: the words as written decide (an instruction, usually)
    if read.outcome == "answer":
        agree = read.choice == scored.choice
        return read if agree else VoiceAnswer("ambiguous", None, read.heard)
    if scored.score - scored.runner_up >= separation and scored.choice in SOUND_ALONE:
        return VoiceAnswer("answer", scored.choice, scored.phrase.rstrip("."))
    return VoiceAnswer("ambiguous", None, read.heard)


async def score_answer(
    transcriber: Transcriber, audio: bytes, kind: PromptKind, transcript: Transcript, *, primed: bool = True
) -> Scored | None:
    """Score ``kind``'s answers and the free transcript against the note; None when the note is no reply
    (long, many words, silent) or the backend cannot score (openai-whisper). ``primed``: all are scored after
    a glossary of the answers' words, as the note was heard (measured better than no context)."""
    heard = " ".join(transcript.heard.split())
    if not heard or transcript.duration_s > MAX_ANSWER_SECONDS or len(heard.split()) > MAX_ANSWER_WORDS * 2:
        return None
    table = PHRASES[kind]
    phrases = [(choice, phrase) for choice, said in table.items() for phrase in said]
    try:
        scores = await transcriber.score_answers(
            audio,
            [heard, *(p for _, p in phrases)],
            prompt=vocabulary_prompt(answer_hotwords(kind)) if primed else None,
            language=transcript.language or None,
        )
    except VoiceError:
        return None
    best: dict[Choice, tuple[float, str]] = {}
    for (choice, phrase), score in zip(phrases, scores[1:-1], strict=True):
        if choice not in best or score > best[choice][0]:
            best[choice] = (score, phrase)
    ranked = sorted(best.items(), key=lambda item: item[1][0], reverse=True)
    (choice, (score, phrase)), rest = ranked[0], ranked[1:]
    runner_up = rest[0][1][0] if rest else float("-inf")
    # "None of these": the better of the transcript and the decoder's own text in this context (the last score).
    return Scored(choice, phrase, score, runner_up, max(scores[0], scores[-1]))


# --- worker thread only below this line (called by Transcriber.score_answers) ---


def whole_scores(
    model: Any, samples: np.ndarray[Any, Any], prompt: str | None, language: str, texts: Sequence[str]
) -> list[float]:
    """Log-probability of each text as all the first 30 s window says, its end included; and last, that of the
    decoder's own best text in the same context: what "none of these" is measured against.

    ``model``: a loaded faster-whisper ``WhisperModel``. CTranslate2's ``align`` gives the tokens' probabilities
    but not the end's (it reports 0 for it), so each text is given to ``generate`` as a forced prefix with
    the vocabulary's logits returned: step i's distribution scores token i, and the step after the last
    token scores the end. The decoder's own text is decoded in the scoring context itself (beam 5): the
    transcript was decoded under another prompt, and scored out of it, it can fall far below what was said.
    """
    from faster_whisper.audio import pad_or_trim  # type: ignore[import-untyped]
    from faster_whisper.tokenizer import Tokenizer  # type: ignore[import-untyped]
    from faster_whisper.transcribe import get_ctranslate2_storage  # type: ignore[import-untyped]

    # The bare model: the transcriber's Beams wrapper would keep every scoring pass (vocabulary logits included)
    # until the next note, and ask the own-text decode for all five hypotheses.
    ct2 = model.model.inner if isinstance(model.model, Beams) else model.model
    features = pad_or_trim(model.feature_extractor(samples)[:, :_WINDOW_FRAMES])
    encoded = ct2.encode(get_ctranslate2_storage(np.expand_dims(features, 0)))
    tokenizer = Tokenizer(model.hf_tokenizer, ct2.is_multilingual, task="transcribe", language=language)
    previous = tokenizer.encode(" " + prompt.strip()) if prompt else []
    start = model.get_prompt(tokenizer, previous, without_timestamps=True)
    own = ct2.generate(encoded, [start], beam_size=5, max_length=len(start) + _MAX_OWN_TOKENS)[0]
    candidates = [tokenizer.encode(" " + text.strip()) for text in texts]
    candidates.append([t for t in own.sequences_ids[0] if t < tokenizer.eot])
    scores: list[float] = []
    for tokens in candidates:
        steps = forced_steps(ct2, encoded, start, tokens) if tokens else []
        if len(steps) <= len(tokens) or not tokens:
            scores.append(float("-inf"))
            continue
        logprobs = [_log_softmax(steps[i])[t] for i, t in enumerate(tokens)]
        scores.append(float(sum(logprobs) + _log_softmax(steps[len(tokens)])[tokenizer.eot]))
    return scores


def _log_softmax(logits: Any) -> np.ndarray[Any, np.dtype[np.float64]]:
    values = np.asarray(logits, dtype=np.float64)
    top = float(values.max())
    return values - top - float(np.log(np.exp(values - top).sum()))
