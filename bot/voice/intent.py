"""A spoken answer to a waiting prompt: "allow", "no thanks", "keep that" → the button it stands for.

Tolerant of how Whisper writes short replies ("Allow.", "Yes, run it!", "Forget it.") but conservative:
words for two different answers are ``ambiguous`` (the bot asks again and changes nothing); a reply with
no answer word, or one that says more than an answer (a long sentence, several other words) is
``not_an_answer`` and goes on as a normal instruction. A short reply with an answer word and a word or
two besides ("run the tests") is ``ambiguous`` rather than guessed either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CHOICES",
    "MAX_ANSWER_WORDS",
    "Choice",
    "Outcome",
    "PromptKind",
    "VoiceAnswer",
    "answer_hotwords",
    "ask_again",
    "interpret",
]

PromptKind = Literal["approval", "confirmation", "review"]
Choice = Literal["allow", "deny", "allow_session", "run", "cancel", "keep", "forget"]
Outcome = Literal["answer", "ambiguous", "not_an_answer"]

CHOICES: dict[PromptKind, tuple[Choice, ...]] = {
    "approval": ("allow", "deny", "allow_session"),
    "confirmation": ("run", "cancel"),
    "review": ("keep", "forget"),
}
MAX_ANSWER_WORDS = 8  # "yes please go ahead and run it" is 7; longer is an instruction, not a reply

_LABELS: dict[Choice, str] = {
    "allow": "Allow",
    "deny": "Deny",
    "allow_session": "Allow for this session",
    "run": "Run",
    "cancel": "Cancel",
    "keep": "Keep",
    "forget": "Forget",
}
# The payloads the prompts' own buttons carry (bot.approvals calls the session grant "session").
_BUTTONS: dict[Choice, str] = {"allow_session": "session"}

# Per prompt kind: phrases (as word tuples) → the choice they name. Longer phrases are matched first.
_YES = ("yes", "yeah", "yep", "yup", "yea", "affirmative", "correct", "right")
_NO = ("no", "nope", "nah", "negative")
_PHRASES: dict[PromptKind, dict[tuple[str, ...], Choice]] = {
    "approval": {
        **dict.fromkeys(
            [(w,) for w in (*_YES, "allow", "allowed", "approve", "approved", "accept", "permit")], "allow"
        ),
        **{("go", "ahead"): "allow", ("do", "it"): "allow", ("let", "it"): "allow"},
        **dict.fromkeys(
            [(w,) for w in (*_NO, "deny", "denied", "reject", "refuse", "decline", "block", "stop")], "deny"
        ),
        **{("not", "allowed"): "deny"},
        **dict.fromkeys(
            [("for", "this", "session"), ("for", "the", "session"), ("this", "session"), ("session",)],
            "allow_session",
        ),
        **{("always",): "allow_session", ("every", "time"): "allow_session", ("from", "now", "on"): "allow_session"},
    },
    "confirmation": {
        **dict.fromkeys([(w,) for w in (*_YES, "run", "start", "proceed", "confirm", "confirmed", "send")], "run"),
        **{("go", "ahead"): "run", ("do", "it"): "run", ("go",): "run"},
        **dict.fromkeys([(w,) for w in (*_NO, "cancel", "cancelled", "abort", "stop", "discard", "drop")], "cancel"),
        **{("never", "mind"): "cancel", ("nevermind",): "cancel", ("forget", "it"): "cancel", ("not", "now"): "cancel"},
    },
    "review": {
        **dict.fromkeys([(w,) for w in (*_YES, "keep", "kept", "save", "store", "remember")], "keep"),
        **dict.fromkeys(
            [(w,) for w in (*_NO, "forget", "delete", "drop", "discard", "remove", "trash", "bin", "scrap")], "forget"
        ),
        **{("throw", "it", "away"): "forget", ("get", "rid"): "forget"},
    },
}
# Said on their own they agree; beside another answer word they are only a way of starting a sentence.
# Not "good" or "fine": Whisper writes "Good night." for a mumbled "deny it".
_WEAK_YES = frozenset({"ok", "okay", "alright", "sure"})
_FILLERS = frozenset(
    "please thanks thank you it its that this them these the a an one just um uh er erm hmm mm well so then "
    "now i i'm we let's lets me do can could would actually really and but oh hey claude macupos bot "
    "command request tool note transcript handoff memory for of".split()
)
_OPPOSITE: dict[Choice, Choice] = {
    "allow": "deny",
    "allow_session": "deny",
    "deny": "allow",
    "run": "cancel",
    "cancel": "run",
    "keep": "forget",
    "forget": "keep",
}
_NEGATIONS = frozenset({"not", "don't", "dont", "never"})
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass(frozen=True, slots=True)
class VoiceAnswer:
    """How a transcript was taken: an ``answer`` with its ``choice``, ``ambiguous``, or ``not_an_answer``."""

    outcome: Outcome
    choice: Choice | None
    heard: str  # the transcript, one line, as echoed to the owner

    @property
    def label(self) -> str:
        """The button it stands for ("Allow for this session"), or what happened ("not clear")."""
        if self.choice is not None:
            return _LABELS[self.choice]
        return "not clear" if self.outcome == "ambiguous" else "not an answer"

    @property
    def button(self) -> str | None:
        """The payload the prompt's own button for this choice carries ("session" for allow_session)."""
        return None if self.choice is None else _BUTTONS.get(self.choice, self.choice)


def answer_hotwords(kind: PromptKind) -> list[str]:
    """The answers' own words, to prime the transcriber while a prompt of ``kind`` waits.

    Primed, tiny.en hears a lone "deny" as "Denied." where it wrote "Good night." without; pass them ahead
    of the usual project names and keywords.
    """
    return [_LABELS[c] for c in CHOICES[kind]]


def ask_again(kind: PromptKind) -> str:
    """What to say when a spoken reply was ambiguous."""
    said = [f'"{_LABELS[c].lower()}"' for c in CHOICES[kind]]
    return f"I'm not sure which you meant; nothing was changed. Say {', '.join(said[:-1])} or {said[-1]}."


def interpret(transcript: str, kind: PromptKind) -> VoiceAnswer:
    """Take a transcript as an answer to a prompt of ``kind``."""
    if kind not in CHOICES:
        raise ValueError(f"unknown prompt kind {kind!r}")
    heard = " ".join(transcript.split())
    words = _WORD.findall(heard.lower().replace("’", "'"))
    words = _normalize(words)
    if not words or len(words) > MAX_ANSWER_WORDS:
        return VoiceAnswer("not_an_answer", None, heard)
    found: list[Choice] = []
    other: list[str] = []
    weak = False
    phrases = _PHRASES[kind]
    longest = max(len(p) for p in phrases)
    i = 0
    while i < len(words):
        match = next(
            (
                (n, phrases[tuple(words[i : i + n])])
                for n in range(longest, 0, -1)
                if tuple(words[i : i + n]) in phrases
            ),
            None,
        )
        if match is None:
            if words[i] in _WEAK_YES:
                weak = True
            elif words[i] not in _FILLERS and words[i] not in _NEGATIONS:
                other.append(words[i])
            i += 1
            continue
        n, choice = match
        # "don't allow", "do not run": a negation right before an answer word names the other answer.
        negated = i > 0 and words[i - 1] in _NEGATIONS and choice not in _CANNOT_NEGATE
        found.append(_OPPOSITE[choice] if negated else choice)
        i += n
    if not found and weak:
        found.append(CHOICES[kind][0])
    return _decide(kind, found, other, len(words), heard)


# "no"/"yes" are answers in themselves: "not no" is not English, so these never flip.
_CANNOT_NEGATE = frozenset({*_YES, *_NO})


def _decide(kind: PromptKind, found: list[Choice], other: list[str], total: int, heard: str) -> VoiceAnswer:
    if not found:
        return VoiceAnswer("not_an_answer", None, heard)
    chosen = set(found)
    if kind == "approval" and chosen == {"allow", "allow_session"}:  # "yes, for this session"
        chosen = {"allow_session"}
    if len(chosen) > 1:
        return VoiceAnswer("ambiguous", None, heard)
    if other:
        # A few stray words beside an answer word: ask again. More: it was an instruction.
        return VoiceAnswer("ambiguous" if len(other) <= 2 and total <= 6 else "not_an_answer", None, heard)
    return VoiceAnswer("answer", chosen.pop(), heard)


def _normalize(words: list[str]) -> list[str]:
    """ "do not"/"don't" → "not" (so "do not allow" reads like "don't allow"); "all right" → "alright"."""
    out: list[str] = []
    for w in words:
        if w in ("don't", "dont"):
            out.append("not")
        elif w == "not" and out and out[-1] == "do":
            out[-1] = "not"
        elif w == "right" and out and out[-1] == "all":
            out[-1] = "alright"
        else:
            out.append(w)
    return out
