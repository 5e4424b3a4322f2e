"""Rivals: the owner's vocabulary scored against the audio, slot by slot, for the words that decide what runs.

tiny.en is often sure of a wrong deciding word: "Hold the latest changes" (pull), "Close the poll request",
"And a retry with backoff" (add). Its word probability does not expose these, but the audio does when it is
asked the right question: does "Pull the latest changes." explain the note about as well as what was heard?
So, for each deciding word that is not a command verb the lexicon has (those are taken as heard, as snapping
does), the vocabulary words the decoder found likeliest at that very token (one pass with the vocabulary's
logits) are put in its place and the sentence is scored again (one forced pass each). A sentence that does
not open with a command verb ("And a retry…", "That's origin and rebase…") has its opening words weighed
against the command verbs the same way, and against the verb it sounds like ("And do the last commit" → undo,
"We run" or "You run" → rerun): a verb the audio supports nearly as well means the action itself was probably
misheard; so is a verb run into the owner's word after it ("Deathstaging against main" → diff staging). Any word
that sounds like one of the owner's ("the last dash" → stash) is weighed too, and so are two words that run
together sound like one ("the back of timer" → backoff; an acronym by its letters: "the eye" → CI), and a word
none of the owner's where a noun goes ("the conflicts in the reading" → readme; two capitals: "for IO" → Eywa).

A rival within a few nats of what was heard is a doubt (bot.voice.doubt flags the word and offers the rival
first); it never replaces the word: only the owner does. The limits keep a note's extra passes few
(measured: docs/benchmarks.md, "Voice: rivals scored against the audio").

Pure text here; the model's side (the logits pass and the scoring) lives in bot.voice.evidence, run by
bot.voice.transcribe after the echo (``Transcriber.weigh``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.voice.snap import DEV_VERBS, key_distance, phonetic_key, sounds_like, verb_positions

__all__ = [
    "ARTICLES",
    "MAX_PER_NOTE",
    "WEIGH_BELOW",
    "Rival",
    "candidates",
    "has_command",
    "likeness",
    "same_word",
    "sound_of",
    "unknown_nouns",
    "weighable",
]

MAX_PER_NOTE = 8  # forced passes a note may spend on rivals (≈ 0.1 s each on two cores)
# A deciding word at least this probable is not weighed: every one caught on the tuning sets was below 0.8
# (0.56 "Hold" for pull, 0.68 "poll"), and about a third of deciding words are above it.
WEIGH_BELOW = 0.8
_OPENING_WORDS = 4  # a command further in than this ("Please, okay, so now run…") does not open the sentence
_PER_SLOT = 2  # vocabulary rivals scored for one deciding word
_FIRST_GAP = 3.0  # nats: a rival's first token at most this far below the heard word's first token
_HEAD_VERBS = 3  # command verbs (the likeliest first tokens) weighed against a sentence's opening words
_HEAD_ALIKE = 1  # command verbs weighed because the opening sounds like them ("And do" → undo)
_HEAD_SPANS = (1, 2)  # how many opening words a verb may stand for ("We run" → rerun, "And then" → amend)
_VERBS = frozenset(DEV_VERBS)
# Commands of two words whose first is no verb of the lexicon ("Cherry pick the fix", "Roll back the deploy").
_TWO_WORD_COMMANDS = frozenset({("cherry", "pick"), ("roll", "back"), ("roll", "out")})
_MIN_LETTERS = 3  # "a", "is", "on": too short to tell apart by sound
# The words that may stand between a verb and what it acts on ("push the branch", "stash all my changes").
ARTICLES = frozenset("the a an my our this that these those all me".split())
# The owner gives orders; a sentence opening "You run…" is what tiny.en makes of "rerun…" ("can you rebase"
# keeps its command: "you" opens it only after "can"). All 8 of 2,088 bench transcripts that open with "You"
# were misheard (docs/benchmarks.md, "Voice: a fourth round").
_YOU = "you"
# "Un-" heard as a word of its own: "And stage the readme changes" for unstage, the opposite action. An opening
# "And" or "An" before a verb whose un- form the lexicon has (stage, install, pin) is weighed as an opening
# without a command, so the un- verb is scored in place of both words.
_UN_HEARD = frozenset({"and", "an"})
# Where a thing goes: after one of these, or after one of the owner's nouns ("the merge complex"), a word the
# owner's vocabulary does not have may be a deciding noun misheard ("the reading" → readme, "the last five
# minutes" → commits, "the old pack" → tag). Such a word is weighed like a deciding one, beyond MAX_PER_NOTE but
# at most _MAX_UNKNOWN passes a note (the 2,088 bench notes needed at most 4; docs/benchmarks.md, "a fourth round").
_BEFORE_NOUN = ARTICLES | frozenset(
    "last latest old open failed failing whole stale first new next previous current every its their your other "
    "two three four five six seven ten in for on to from into against of with about onto".split()
)
_NOT_NOUNS = frozenset("it is are was be and or but not now then so please just me you we i".split())
_MAX_UNKNOWN = 4
_ALIKE_RANK = 0.0  # a sound-alike ranks with a rival whose first token was as likely as the heard word's
_BARE = re.compile(r"^[^A-Za-z0-9]*(.*?)[^A-Za-z0-9]*$")
# Coding nouns said letter by letter (bot.voice.doubt.DECIDING_NOUNS holds them in lower case), as written.
_ACRONYMS = {"ci": "CI"}
_LETTER_NAMES = (
    "ay bee see dee ee eff jee aitch eye jay kay ell em en oh pee cue are ess tee you vee doubleyou ex why zee"
)
_LETTERS = dict(zip("abcdefghijklmnopqrstuvwxyz", _LETTER_NAMES.split(), strict=True))

# (word index, candidate word) → the candidate's first-token log-probability minus the heard word's, at that
# word's first token in the transcript forced through the decoder.
FirstGap = Callable[[int, str], float]


@dataclass(frozen=True, slots=True)
class Rival:
    """``word`` in place of the ``span`` words from ``index``; ``text`` the sentence it makes; ``gap`` its
    log-probability given the audio minus the transcript's (0 until scored; above 0: the audio prefers it)."""

    index: int
    span: int
    word: str
    text: str
    gap: float = 0.0
    head: bool = False  # a command verb weighed against the opening of a sentence that does not open with one
    unknown: bool = False  # weighed for a word the owner's vocabulary lacks, where a noun goes (unknown_nouns)


def _bare(token: str) -> str:
    m = _BARE.match(token)
    return m.group(1) if m else token


def _squash(word: str) -> str:
    return re.sub(r"[^a-z0-9]", "", word.lower())


def _acronym(word: str) -> bool:
    return word.isalpha() and word.isupper() and 2 <= len(word) <= 4


def sound_of(word: str) -> str:
    """What ``word`` sounds like, for comparing sounds: an acronym is its letters' names ("CI" → "seeeye", which
    tiny.en writes "the eye" or "see eye"); any other word is itself."""
    if not _acronym(word):
        return word
    return "".join(_LETTERS[c] for c in word.lower())


def likeness(heard: str, word: str) -> int:
    """How much ``heard`` (one word, or words run together) sounds like ``word``, an acronym by its letters:
    2 the very same sound (phonetic key: "rough" and ruff, "see eye" and CI), 1 alike (snap.sounds_like: "dip"
    and diff), 0 neither."""
    sound = sound_of(word)
    key = phonetic_key(heard)
    if key and key == phonetic_key(sound):
        return 2
    return 1 if sounds_like(heard, sound) else 0


def same_word(heard: str, other: str) -> bool:
    """Spellings of one word, not rivals: case, a plural, a file's stem, words run together ("roll back")."""
    a, b = _squash(heard), _squash(other)
    if not a or not b:
        return True
    if a == b or {a, b} & {b + "s", a + "s", b + "es", a + "es"}:
        return True
    return heard.lower().split(".")[0] == other.lower() or other.lower().split(".")[0] == heard.lower()


def has_command(words: Sequence[str]) -> bool:
    """Whether the sentence opens with a verb of the lexicon where its command goes ("Run…", "Please stash…"):
    "That's origin and rebase…" does not, though a later clause has one, nor does one that opens by telling
    the bot what it does ("You run the failed job", heard for "rerun…"), nor "And stage…" (unstage heard apart)."""
    if words and _bare(words[0]).lower() == _YOU:
        return False
    if len(words) > 1 and _bare(words[0]).lower() in _UN_HEARD and "un" + _bare(words[1]).lower() in _VERBS:
        return False
    positions = verb_positions(words)
    if not positions or positions[0] >= _OPENING_WORDS:
        return False
    verb = _bare(words[positions[0]]).lower()
    after = _bare(words[positions[0] + 1]).lower() if positions[0] + 1 < len(words) else ""
    return verb in _VERBS or (verb, after) in _TWO_WORD_COMMANDS


def weighable(words: Sequence[str], deciding: dict[int, str], probabilities: Sequence[float] = ()) -> dict[int, str]:
    """The deciding words (index → kind) worth weighing: not a lexicon verb where a verb goes (taken as heard,
    as snapping does), and below ``WEIGH_BELOW`` when each word's probability is known."""
    verbs = set(verb_positions(words))
    known = len(probabilities) == len(words)
    return {
        i: kind
        for i, kind in deciding.items()
        if not (i in verbs and _bare(words[i]).lower() in _VERBS) and (not known or probabilities[i] < WEIGH_BELOW)
    }


def unknown_nouns(words: Sequence[str], nouns: Sequence[str]) -> list[int]:
    """Indexes of the words neither ``nouns`` (the owner's names and the coding nouns) nor the command verbs
    have, where a noun goes: after an article, a quantity or a few adjectives ("the last", "five"), a
    preposition, or one of ``nouns`` ("the merge complex"); not across a clause's end."""
    owners = {w.lower() for w in nouns}
    out: list[int] = []
    for j in range(1, len(words)):
        word, before = _bare(words[j]), _bare(words[j - 1]).lower()
        # Two capitals are letters said one by one, long enough to be a name misheard ("for IO" → Eywa).
        short = len(word) < _MIN_LETTERS and not _acronym(word)
        if not word.isalpha() or short or words[j - 1][-1:] in ".,!?;:":
            continue
        low = word.lower()
        if low in owners or low in _VERBS or low in _BEFORE_NOUN or low in _NOT_NOUNS:
            continue
        if before in _BEFORE_NOUN or before in owners:
            out.append(j)
    return out


def _pair(words: Sequence[str], index: int, known: set[str]) -> str:
    """Words ``index`` and the next run together, when both are plain words and neither is a lexicon word
    itself nor ends a clause ("" otherwise)."""
    if index + 1 >= len(words) or words[index][-1:] in ".,!?;:":
        return ""
    a, b = _bare(words[index]), _bare(words[index + 1])
    if not (a.isalpha() and b.isalpha()) or {a.lower(), b.lower()} & known:
        return ""
    return a + b if len(a) + len(b) >= _MIN_LETTERS + 2 else ""


def _closer(pair: str, heard: Sequence[str], word: str) -> bool:
    """Whether the two words run together sound more like ``word`` than either does alone ("back of" is backoff,
    but "last dash" is no nearer stash than "dash" is); as near will do for an acronym, whose letters are words
    of their own ("the eye" is CI as much as "eye" is)."""
    key = phonetic_key(sound_of(word))
    alone = min(key_distance(phonetic_key(_bare(h)), key) for h in heard)
    pair_distance = key_distance(phonetic_key(pair), key)
    return pair_distance < alone or (_acronym(word) and pair_distance <= alone)


def _alike_verbs(opening: str, verbs: Sequence[str]) -> list[str]:
    """The ``verbs`` that sound most like ``opening`` (at most ``_HEAD_ALIKE``)."""
    key = phonetic_key(opening)
    close = sorted(
        (key_distance(key, phonetic_key(v)), v) for v in verbs if sounds_like(opening, v) and not same_word(opening, v)
    )
    return [v for _, v in close[:_HEAD_ALIKE]]


def _spoken(word: str, capital: bool) -> str:
    return word[:1].upper() + word[1:] if capital else word


def _replace(words: Sequence[str], index: int, span: int, word: str) -> str:
    """The sentence with ``words[index:index+span]`` replaced by ``word``, keeping the last one's punctuation
    unless it was a comma after an opening word ("Tarsier, my changes" → "Stash my changes")."""
    last = words[index + span - 1]
    tail = last[len(last.rstrip(".,!?;:")) :]
    if tail == "," and index == 0:
        tail = ""
    out = [*words[:index], _spoken(word, words[index][:1].isupper()) + tail, *words[index + span :]]
    return " ".join(out)


def _likeliest(
    index: int, heard: str, words: Sequence[str], first_gap: FirstGap, limit: int
) -> list[tuple[float, str]]:
    """The ``limit`` words likeliest at word ``index`` by their first token; words sharing one ("rerun",
    "revert", "reopen" all start " Re") are told apart by how much they sound like what was heard."""
    key = phonetic_key(heard)
    capital = heard[:1].isupper()
    scored = [
        (round(first_gap(index, _spoken(w, capital)), 3), -key_distance(key, phonetic_key(w)), w)
        for w in words
        if not same_word(heard, w)
    ]
    return [(gap, w) for gap, _, w in sorted(scored, reverse=True)[:limit]]


def candidates(
    text: str,
    slots: dict[int, str],
    vocabulary: Callable[[str], Sequence[str]],
    first_gap: FirstGap,
    alike: Sequence[str] = (),
    unknown: Sequence[int] = (),
) -> list[Rival]:
    """The rivals worth a forced pass, best first: any word that sounds like one of ``alike`` (the owner's names
    and the coding nouns: "dash" → stash, "poll" → pull) and is not one itself, and any two words that run
    together sound like one ("back of" → backoff); per deciding slot (index → kind, not lexicon verbs) the
    vocabulary words whose first token the decoder found nearly as likely; for a sentence that does not open
    with a command, the command verbs likeliest at its first token and the one it sounds like, standing for
    its first one or two words. ``vocabulary(kind)`` gives a slot kind's words. At most ``MAX_PER_NOTE`` of
    those; then, for each index in ``unknown`` (``unknown_nouns``), the nouns likeliest there the same way, at
    most ``_MAX_UNKNOWN`` more."""
    words = text.split()
    ranked: list[tuple[float, Rival]] = []
    known = {w.lower() for w in alike} | _VERBS  # the lexicon's own words are taken as heard ("push" ≠ pull)
    singles = [_ACRONYMS.get(w, w) for w in alike if " " not in w]
    for i, token in enumerate(words):
        heard = _bare(token)
        if len(heard) >= _MIN_LETTERS and heard.lower() not in known:
            for w in singles:
                # An acronym's letters are two words or more: one word in its place is no rival ("the CI").
                if not _acronym(w) and likeness(heard, w) and not same_word(heard, w):
                    ranked.append((_ALIKE_RANK, Rival(i, 1, w, _replace(words, i, 1, w))))
        # One word heard as two ("the back of timer" → backoff, "the eye" → CI): the pair sounds like one.
        pair = _pair(words, i, known)
        for w in singles if pair else ():
            if likeness(pair, w) and not same_word(pair, w) and _closer(pair, words[i : i + 2], w):
                ranked.append((_ALIKE_RANK, Rival(i, 2, w, _replace(words, i, 2, w))))
    for i, kind in sorted(slots.items()):
        for gap, w in _likeliest(i, _bare(words[i]), vocabulary(kind), first_gap, _PER_SLOT):
            if gap >= -_FIRST_GAP:
                ranked.append((gap, Rival(i, 1, w, _replace(words, i, 1, w))))
    if words and not has_command(words):
        for span in _HEAD_SPANS:
            if span >= len(words):
                break
            opening = "".join(_bare(w) for w in words[:span])
            likely = _likeliest(0, opening[:1].upper() + opening[1:], DEV_VERBS, first_gap, _HEAD_VERBS)
            # A verb the opening sounds like ("And do" → undo, "We run" → rerun), however unlikely its first token;
            # not one heard in it ("We run" → run is a likely verb above, when it is one).
            said = {_bare(w).lower() for w in words[:span]}
            alike = _alike_verbs(opening, [v for v in DEV_VERBS if v not in said])
            for gap, v in [*likely, *((_ALIKE_RANK, v) for v in alike)]:
                ranked.append((gap, Rival(0, span, v, _replace(words, 0, span, v), head=True)))
        ranked += [(gap, r) for gap, r in _glued_heads(words, singles, first_gap)]
    out = _best(ranked, set(), MAX_PER_NOTE)
    nouns: list[tuple[float, Rival]] = []
    for i in sorted(set(unknown) - set(slots)):
        for gap, w in _likeliest(i, _bare(words[i]), vocabulary("noun"), first_gap, _PER_SLOT):
            if gap >= -_FIRST_GAP:
                nouns.append((gap, Rival(i, 1, w, _replace(words, i, 1, w), unknown=True)))
    return [*out, *_best(nouns, {r.text for r in out}, _MAX_UNKNOWN)]


def _glued_heads(words: Sequence[str], owners: Sequence[str], first_gap: FirstGap) -> list[tuple[float, Rival]]:
    """A verb run into the owner's word it acts on ("Deathstaging against main" for diff staging, "Compostaging"
    for compare staging): the command verbs likeliest at the opening, and the one its first letters sound like,
    each weighed with the owner's word after it. The rival's word is both ("diff staging"), so a tap on it puts
    both back."""
    first = _bare(words[0])
    low = first.lower()
    glued = [
        w for w in owners if len(w) > _MIN_LETTERS and low.endswith(w.lower()) and len(low) - len(w) >= _MIN_LETTERS
    ]
    if not first.isalpha() or not glued:
        return []
    owner = max(glued, key=len)
    prefix = first[: len(first) - len(owner)]
    likely = _likeliest(0, prefix, DEV_VERBS, first_gap, _HEAD_VERBS)
    alike = [(_ALIKE_RANK, v) for v in _alike_verbs(prefix, DEV_VERBS)]
    return [
        (gap, Rival(0, 1, f"{v} {owner}", _replace(words, 0, 1, f"{v} {owner}"), head=True))
        for gap, v in [*likely, *alike]
    ]


def _best(ranked: list[tuple[float, Rival]], seen: set[str], limit: int) -> list[Rival]:
    """The ``limit`` best-ranked rivals, each sentence once (and none in ``seen``)."""
    ranked.sort(key=lambda r: -r[0])
    out: list[Rival] = []
    for _, rival in ranked:
        if rival.text not in seen:
            seen.add(rival.text)
            out.append(rival)
    return out[:limit]
