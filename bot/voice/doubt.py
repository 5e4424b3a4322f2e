"""Which deciding words of a transcript the model was unsure of: flag them rather than guess.

A person driving does not need every word heard; they need never to have a misheard deciding word acted on
unnoticed. The deciding words are the ones that choose what runs: a command verb (a word in a command
position, bot.voice.snap), the owner's names (projects, branches, files, memory keywords), the coding nouns
an action takes (branch, commit, tag…) and file names. Each is checked against what the decoder itself
knows (``Evidence``, gathered by bot.voice.transcribe from the same decoding, at the cost of one forced pass):

* its probability: the lowest of its tokens' probabilities when the transcript is forced through the
  decoder against the audio (CTranslate2 ``align``; the word probability of faster-whisper's word timestamps),
  one of the owner's words summed over its spellings (bot.voice.evidence);
* the other beams: the beam search's other hypotheses, when one scoring nearly as well has another word there;
* snapping's candidates: a lexicon word that sounds like it and that the audio supports nearly as well;
* the fallback: a decode that fell back to sampling (a loop or a low score) is unsure as a whole;
* rivals (bot.voice.rivals, weighed after the echo): one of the owner's words the audio supports nearly as
  well in the word's place, or a command verb in place of the opening of a sentence that lacks one.

A flagged word comes with its likely alternatives (the other beams' words, snapping's candidates, then
vocabulary words that sound alike), for the echo's buttons (bot.voice.flow). The thresholds are measured on
bench/data/coding_speech.txt and checked on a held-out set (docs/speech.md, "Flags").

Pure text and arithmetic here; the model's side lives in bot.voice.transcribe.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.voice.rivals import ARTICLES, Rival, likeness, same_word
from bot.voice.snap import DEV_VERBS, Scored, edit_distance, key_distance, phonetic_key, sounds_like, verb_positions

__all__ = [
    "DECIDING_NOUNS",
    "DEFAULT_THRESHOLDS",
    "Evidence",
    "Flag",
    "Thresholds",
    "deciding_positions",
    "find_flags",
    "substitute",
    "word_of_token",
    "word_probabilities",
]

# The things a coding action acts on: a word heard wrong here changes what runs as much as the verb does. A
# tuple, like DEV_VERBS: rivals and alternatives that tie keep this order, so one note gets the same buttons
# in every process (a set's order changes with the interpreter's hash seed).
DECIDING_NOUNS: tuple[str, ...] = tuple(
    "branch branches commit commits tag tags stash main master origin upstream staging production release "
    "pull request requests merge rebase tests test linter pytest mypy ruff ci pipeline job build deploy "
    "changes migration schema readme docstring diff conflict conflicts image container service".split()
)
_BARE = re.compile(r"^[^A-Za-z0-9]*(.*?)[^A-Za-z0-9]*$")
_FILE = re.compile(r"[A-Za-z0-9_]\.[A-Za-z]{1,5}$")
_MAX_ALTERNATIVES = 3
_VERBS = frozenset(DEV_VERBS)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a deciding word is unsure. Measured: docs/speech.md, "Flags"."""

    # Chosen on bench/data/coding_speech.txt (docs/speech.md, "Flags"): with verb_probability 0.1, the piper
    # set's deciding words are right or flagged in 95.8 % of sentences, 10.4 % flagged although right; at 0.5
    # (and 0.5 for verbs) 97.9 % and 64.6 %.
    probability: float = 0.3  # a deciding word's lowest token probability below this is unsure
    # Another beam within this (length-normalised log-probability) with another deciding word is a doubt.
    # Negative (the default): never; the beams only supply alternatives. As a doubt they flagged about as many
    # right sentences as wrong ones (docs/speech.md, "Flags").
    beam_gap: float = -1.0
    snap_gap: float = 2.0  # a lexicon word sounding alike within this many nats of what was heard
    objects: bool = True  # the first word after a command verb is deciding too ("run the linter")
    # A command verb the lexicon has, heard where a verb goes, is unsure only below this: a sentence's first
    # word is spread over its spellings and case, and a common verb ("Run", "Check") scored 0.2–0.3 when right:
    # at 0.1 the piper set had 10.4 % flagged although right, at 0.3 20.8 % (docs/speech.md, "Flags").
    verb_probability: float = 0.1
    # A vocabulary word scoring within this many nats of a deciding word (or of two words: "back of" → backoff)
    # it could replace is a doubt (bot.voice.rivals; negative: never), and a command verb within ``head_gap``
    # of the opening words of a sentence that does not open with a command. Chosen on the tuning sets
    # (docs/benchmarks.md, "Voice: rivals"): rival 2 → 3 caught two more espeak sentences for no needless tap
    # (5 one more piper sentence for two); head 5 → 8 caught "And do" (undo), "I'm in" (amend), "Let" (lint),
    # "One might be" (run mypy) and cost two of 40 spoken remarks a tap on the piper voice (12.5 → 17.5 %).
    rival_gap: float = 3.0
    head_gap: float = 8.0
    # A rival that sounds like the words it would replace is a doubt within ``alike_gap`` ("the last dip" →
    # diff), and one with the very same sound (phonetic key) within ``homophone_gap`` ("with rough" → ruff, "the
    # back of timer" → backoff): the audio cannot tell those apart, so their gap is mostly the language model's
    # preference for the common word. Chosen on the tuning sets and the third held-out set (docs/benchmarks.md,
    # "Voice: sound-alike rivals"): the piper voice's right-or-flagged 143 → 146 of 148 tuning sentences for two
    # taps, both on a real mishearing ("a dock string", "the back of policy"), and none on the remarks.
    alike_gap: float = 5.0
    homophone_gap: float = 8.0
    # A rival weighed for a word the owner's vocabulary lacks where a noun goes (Rival.unknown: "the
    # reading" → readme) is a doubt within ``unknown_gap``: with one project name for priming readme scored
    # −4.5, with twenty owner words −2.9. At 5 the 2,088 bench notes gained one catch and no needless tap
    # (docs/benchmarks.md, "Voice: a fourth round").
    unknown_gap: float = 5.0
    # A word snapping replaced by one the audio preferred by at least this many nats is taken without asking
    # (inf: a snapped word is always flagged). At 0 the tuning sets lost no catch and 0–2 needless taps a set.
    snap_sure: float = 0.0
    # A low probability alone flags a name, noun, file or object only when a rival scored within this many
    # nats (inf: always). 4 cut the needless taps by two thirds but let misheard words through on the espeak
    # and noisy sets (89.6 → 72.9 %), so it stays off: a missed word costs more than a tap.
    alone: float = float("inf")
    # When on, a low probability alone does not flag one of the owner's names or coding nouns heard exactly
    # when no alternative is another word of the owner's ("Kestrel" offering "Castrel", "Cestrel"): such rare
    # words score low when heard right. Measured (docs/benchmarks.md, "Voice: pairs, openings and own words"):
    # on the tuning sets it cut the piper voice's needless taps by a third to two thirds for no catch lost, but
    # on the held-out set nobody tuned on it lost 2–4 points of catches in four of six columns, some of them
    # an owner's word heard in place of another ("rollout" for allowlist), and met the ≤ 15 % target in no
    # more columns. Off: a missed word costs more than a tap.
    own_words: bool = False


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the decoder knew about a transcript: each word (``text.split()``) with its probability, the
    other beams as (text, score below the best), whether the decode fell back to sampling, and the vocabulary's
    rivals of its deciding words scored against the audio (bot.voice.rivals)."""

    words: tuple[tuple[str, float], ...] = ()
    hypotheses: tuple[tuple[str, float], ...] = ()
    fallback: bool = False
    rivals: tuple[Rival, ...] = ()


@dataclass(frozen=True, slots=True)
class Flag:
    """An unsure deciding word: its index in ``text.split()``, the word as written, alternatives, and why;
    ``span``: how many words from ``index`` an alternative replaces (a verb heard as "And then": two)."""

    index: int
    heard: str
    alternatives: tuple[str, ...]
    reason: str
    span: int = 1


def bare(token: str) -> str:
    """A token without its surrounding punctuation ("changes." → "changes")."""
    m = _BARE.match(token)
    return m.group(1) if m else token


def word_probabilities(pieces: Sequence[str], probs: Sequence[float], text: str) -> tuple[tuple[str, float], ...]:
    """Each word of ``text.split()`` with the lowest probability of its tokens (``pieces``, decoded one by one,
    spell " " + text). Punctuation tokens do not count: a full stop's probability says nothing of the word."""
    words = text.split()
    lowest = [1.0] * len(words)
    for index, piece, p in zip(word_of_token(pieces), pieces, probs, strict=True):
        if index >= len(words):
            break
        if any(ch.isalnum() for ch in piece):
            lowest[index] = min(lowest[index], float(p))
    return tuple(zip(words, lowest, strict=True))


def word_of_token(pieces: Sequence[str]) -> list[int]:
    """The index of the word each token belongs to: a token with a leading space starts the next word."""
    out: list[int] = []
    for piece in pieces:
        out.append(out[-1] + piece[:1].isspace() if out else 0)
    return out


def deciding_positions(words: Sequence[str], names: Sequence[str] = (), objects: bool = True) -> dict[int, str]:
    """The indexes of ``words`` that decide what runs, with their kind: verb, name, noun, file or object."""
    known = {n.lower() for n in names for n in n.split()}
    verbs = set(verb_positions(words))
    out: dict[int, str] = {}
    for i, token in enumerate(words):
        word = bare(token)
        low = word.lower()
        if not word:
            continue
        if i in verbs:
            out[i] = "verb"
        elif low in known:
            out[i] = "name"
        elif _FILE.search(word) or (i + 1 < len(words) and bare(words[i + 1]).lower() == "dot"):
            out[i] = "file"
        elif low in DECIDING_NOUNS or low in _VERBS:
            out[i] = "noun"
    if objects:
        for v in verbs:
            j = v + 1
            while j < len(words) and bare(words[j]).lower() in ARTICLES:
                j += 1
            if j < len(words) and j not in out and not re.search(r"[.!?;:,]$", words[v]):
                out[j] = "object"
    return out


def _beam_words(best: Sequence[str], other: str) -> dict[int, str]:
    """Words another beam has where the best has ``best[i]`` (aligned by difflib), by index."""
    theirs = other.split()
    a, b = [bare(w).lower() for w in best], [bare(w).lower() for w in theirs]
    out: dict[int, str] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            said = " ".join(bare(w) for w in theirs[j1:j2])
            if _squash(" ".join(a[i1:i2])) == _squash(said):
                continue  # the same words spelled apart ("settings.py", "settings dot py", "fix log", "fixlog")
            for i in range(i1, i2):
                out.setdefault(i, said)
    return out


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", re.sub(r"\bdot\b", "", text.lower()))


def find_flags(
    text: str,
    evidence: Evidence,
    names: Sequence[str] = (),
    considered: Sequence[Scored] = (),
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> tuple[Flag, ...]:
    """The unsure deciding words of ``text`` (after snapping), each with up to three alternatives."""
    words = text.split()
    probs = dict(enumerate(p for _, p in evidence.words)) if len(evidence.words) == len(words) else {}
    beams = [(_beam_words(words, h), gap) for h, gap in evidence.hypotheses]
    flags: list[Flag] = []
    owners = {w.lower() for w in (*names, *DECIDING_NOUNS, *DEV_VERBS)}  # every word of the owner's vocabulary
    # A word a rival was scored for is weighed as a deciding one ("the last dash" when "stash" sounds like it).
    positions = {r.index: "noun" for r in evidence.rivals if not r.head and r.index < len(words)}
    positions.update(deciding_positions(words, names, thresholds.objects))
    for i, kind in sorted(positions.items()):
        heard = bare(words[i])
        reasons: list[str] = []
        # Alternatives with a rank: what the audio was scored on first, then the beams' lexicon words, then
        # lexicon words that sound like what was heard (nearest first), like a beam's word, other beam words.
        ranked: list[tuple[float, str]] = []
        p = probs.get(i, 1.0)
        lexicon_verb = kind == "verb" and heard.lower() in _VERBS
        if p < (thresholds.verb_probability if lexicon_verb else thresholds.probability):
            near = [r.gap for r in evidence.rivals if r.index == i and r.span == 1 and not r.head]
            if kind == "verb" or thresholds.alone == float("inf") or (near and max(near) >= -thresholds.alone):
                reasons.append(f"p={p:.2f}")
        for r in evidence.rivals:
            if r.index == i and r.span == 1 and not r.head:
                if r.gap >= -_gap_for(heard, r, thresholds):
                    reasons.append(f"rival {r.word} ({r.gap:.1f})")
                    ranked.append((-1.0 - r.gap / 100, r.word))  # the audio's own choice goes first
                else:  # too far to doubt the word, but the owner's word the audio liked best when it is doubted
                    ranked.append((0.5 - r.gap / 100, r.word))
        beam_words: list[str] = []
        for other, gap in beams:
            if i in other:
                # Every beam's word is a likely alternative; only one nearly as good as the best is a doubt.
                if gap <= thresholds.beam_gap:
                    reasons.append(f"beam {gap:.2f}")
                beam_words.append(other[i])
        for sc in sorted((sc for sc in considered if sc.candidate.index == i), key=lambda sc: -sc.gap):
            if sc.candidate.word.lower() != heard.lower():
                if sc.gap >= -thresholds.snap_gap:
                    reasons.append(f"sounds like {sc.candidate.word} ({sc.gap:.1f})")
                ranked.append((0.0, sc.candidate.word))
            else:  # snapping took this word: what was heard is the alternative
                if sc.gap < thresholds.snap_sure:
                    reasons.append(f"snapped from {sc.candidate.heard} ({sc.gap:.1f})")
                ranked.append((0.0, sc.candidate.heard))
        if evidence.fallback and kind == "verb":
            reasons.append("fallback")
        if not reasons:
            continue
        vocabulary = (*DEV_VERBS, *names) if kind in ("verb", "object") else (*names, *DECIDING_NOUNS)
        known = {w.lower() for w in (*vocabulary, *DECIDING_NOUNS)}
        ranked += [(1.0 if w.lower() in known else 5.0, w) for w in beam_words]
        for base, said in ((2.0, heard), *((3.0, w) for w in beam_words)):
            if " " in said:
                continue
            ranked += [
                (
                    base
                    + key_distance(phonetic_key(said), phonetic_key(w)) / 10
                    + edit_distance(said.lower(), w.lower()) / 100,
                    w,
                )
                for w in vocabulary
                if " " not in w and sounds_like(said, w)
            ]
        picked = _unique([w for _, w in sorted(ranked, key=lambda r: r[0])], heard)
        # With own_words: one of the owner's words heard as itself, with only its misspellings to offer.
        only_p = reasons == [f"p={p:.2f}"]
        if thresholds.own_words and kind in ("name", "noun") and only_p and not _another_word(heard, picked, owners):
            continue
        flags.append(Flag(i, heard, tuple(picked[:_MAX_ALTERNATIVES]), ", ".join(reasons)))
    flags = _with_pairs(words, flags, evidence.rivals, thresholds)
    return _with_head(words, flags, evidence.rivals, thresholds.head_gap)


def _gap_for(heard: str, rival: Rival, thresholds: Thresholds) -> float:
    """How far below what was heard a rival may score and still be a doubt: further when it sounds alike, or
    when it stands for a word the owner's vocabulary lacks."""
    reach = (thresholds.rival_gap, thresholds.alike_gap, thresholds.homophone_gap)[likeness(heard, rival.word)]
    return max(thresholds.rival_gap, reach, thresholds.unknown_gap if rival.unknown else 0.0)


def _another_word(heard: str, alternatives: Sequence[str], owners: set[str]) -> bool:
    """Whether an alternative is another word of the owner's vocabulary, not a spelling of ``heard``."""
    return any(a.lower() in owners and not same_word(heard, a) for a in alternatives)


def _with_pairs(words: Sequence[str], flags: list[Flag], rivals: Sequence[Rival], thresholds: Thresholds) -> list[Flag]:
    """``flags`` and a flag for each run of words that one word of the owner's explains nearly as well ("the
    back of timer" → backoff); it takes the place of flags on those words."""
    out = list(flags)
    taken: set[int] = set()

    def near(r: Rival) -> bool:
        said = "".join(bare(w) for w in words[r.index : r.index + r.span])
        return r.gap >= -_gap_for(said, r, thresholds)

    pairs = sorted((r for r in rivals if not r.head and r.span > 1 and near(r)), key=lambda r: -r.gap)
    for r in pairs:
        covered = set(range(r.index, r.index + r.span))
        if covered & taken or r.index + r.span > len(words):
            continue
        taken |= covered
        alternatives = _unique([p.word for p in pairs if (p.index, p.span) == (r.index, r.span)], "")
        reasons = [f.reason for f in out if f.index in covered]
        reason = ", ".join([*reasons, f"rival {r.word} ({r.gap:.1f})"])
        heard = " ".join(bare(w) for w in words[r.index : r.index + r.span])
        out = [f for f in out if f.index not in covered]
        out.append(Flag(r.index, heard, tuple(alternatives[:_MAX_ALTERNATIVES]), reason, r.span))
    return sorted(out, key=lambda f: f.index)


def _with_head(words: Sequence[str], flags: list[Flag], rivals: Sequence[Rival], gap: float) -> tuple[Flag, ...]:
    """``flags`` and, when a command verb explains the opening of a sentence that lacks one nearly as well
    as what was heard, a flag on those opening words offering the verbs (it takes the place of flags there)."""
    heads = sorted((r for r in rivals if r.head and r.gap >= -gap), key=lambda r: -r.gap)
    if not heads:
        return tuple(flags)
    span = heads[0].span
    reason = f"no command; {heads[0].word} ({heads[0].gap:.1f})"
    # The verbs the audio supports best first: the head's, and the opening word's own rivals within the same
    # gap ("Let the relay folder": lint was scored as its rival, load as a head).
    scored = [(r.gap, r.word) for r in heads if r.span == span]
    if span == 1:
        scored += [(r.gap, r.word) for r in rivals if r.index == 0 and r.span == 1 and not r.head and r.gap >= -gap]
    rest: list[str] = []
    for f in flags:
        if f.index < span:  # the same opening words: one question, with both kinds of alternative
            if span == 1:
                rest += f.alternatives
            reason = f"{f.reason}, {reason}"
    verbs = _unique([w for _, w in sorted(scored, key=lambda s: -s[0])] + rest, "")
    head = Flag(0, " ".join(bare(w) for w in words[:span]), tuple(verbs[:_MAX_ALTERNATIVES]), reason, span)
    return (head, *(f for f in flags if f.index >= span))


def _unique(words: Sequence[str], heard: str) -> list[str]:
    seen = {heard.lower()}
    out: list[str] = []
    for w in words:
        w = w.strip()
        if w and w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def substitute(text: str, index: int, word: str, span: int = 1) -> str:
    """``text`` with the word at ``index`` (of ``text.split()``) replaced, its punctuation and capital kept;
    with ``span`` > 1 the words up to ``index + span`` go too (the last one's punctuation is kept)."""
    words = text.split()
    span = max(1, min(span, len(words) - index))
    token = words[index]
    m = re.match(r"^([^A-Za-z0-9]*)(.*?)([^A-Za-z0-9]*)$", token)
    lead, core = (m.group(1), m.group(2)) if m else ("", token)
    last = re.match(r"^.*?([^A-Za-z0-9]*)$", words[index + span - 1])
    tail = last.group(1) if last else ""
    if core[:1].isupper() and word[:1].islower():
        word = word[:1].upper() + word[1:]
    words[index : index + span] = [lead + word + tail]
    return " ".join(words)
