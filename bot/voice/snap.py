"""Words that decide what runs, heard right: a misheard command verb or project name is "snapped" back to it.

tiny.en mishears a few coding words in a way no prompt fixes ("Sash my changes" for stash, "Pump the
version" for bump). After transcription, each word in a command position (the first word of a clause) is
compared with a closed lexicon of common development verbs (``DEV_VERBS``), and every word with the
owner's own names (project names, memory keywords), by a phonetic key (a small Metaphone,
``phonetic_key``) and a weighted edit distance on it. The words that sound alike are only *candidates*:
the Whisper model itself then scores each candidate sentence against the note's audio (``Scorer``), and a
candidate replaces what was heard only when the audio supports it nearly as well, within ``margin`` nats
of log-probability (docs/speech.md, "Snapping", has the measurement). So "pump" said clearly stays
"pump"; only a word the audio leaves in doubt is taken as the lexicon's. A word the lexicon has is kept
as heard: "Run" is never weighed against "rerun", nor "Push" against "pull".

Pure text and arithmetic here: the scoring lives with the model in bot.voice.transcribe.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MARGIN",
    "DEV_VERBS",
    "Candidate",
    "Scored",
    "Scorer",
    "Snapped",
    "candidates",
    "choose",
    "edit_distance",
    "key_distance",
    "phonetic_key",
    "snap",
    "sounds_like",
    "verb_positions",
]

# The commands a developer gives a coding agent by voice: git, test, build and release, refactoring, and the
# agent's own verbs. A closed list, kept general (not the words of any test sentence); the owner's own
# vocabulary comes from the project names and memory keywords passed beside it.
DEV_VERBS: tuple[str, ...] = (
    "add", "amend", "apply", "approve", "archive", "ask", "backport", "benchmark", "bisect", "blame", "build",
    "bump", "cancel", "check", "checkout", "clean", "clone", "close", "commit", "compare", "compile", "configure",
    "continue", "copy", "create", "debug", "decrease", "delete", "deploy", "describe", "diff", "discard",
    "disable", "document", "download", "drop", "edit", "enable", "explain", "export", "extract", "fetch", "find",
    "fix", "fork", "format", "generate", "grep", "ignore", "import", "improve", "increase", "inline", "inspect",
    "install", "lint", "list", "load", "log", "lower", "merge", "migrate", "mock", "move", "open", "optimize",
    "patch", "pin", "profile", "prune", "publish", "pull", "push", "raise", "read", "rebase", "rebuild",
    "redeploy", "refactor", "reformat", "release", "reload", "remove", "rename", "reopen", "replace", "rerun",
    "reset", "resolve", "restart", "restore", "retry", "revert", "review", "rewrite", "rollback", "run", "save",
    "search", "send", "set", "ship", "show", "skip", "sort", "split", "squash", "stage", "start", "stash", "stop",
    "summarize", "switch", "sync", "tag", "test", "trace", "try", "undo", "uninstall", "unpin", "unstage",
    "update", "upgrade", "upload", "validate", "verify", "write",
)  # fmt: skip
DEFAULT_MARGIN = 2.0  # nats: measured, docs/speech.md "Snapping" (6 over-corrected: 6 of 48 piper sentences)

# Words that may open a clause before its verb ("please stash…", "and then push…", "can you rebase…").
_LEADERS = frozenset(
    "please okay ok so now then and also just alright hey can could would will you let's lets go ahead "
    "kindly quickly first next finally after that".split()
)
# A clause opened by one of these is a question or a statement, not a command: no verb position.
_NOT_COMMANDS = frozenset(
    "why what how where when who which whose is are was were does do did should shall may might the a an "
    "i we it this that there these those my our your its".split()
)
_CLAUSE_END = re.compile(r"[.!?;:,]$")
_TOKEN = re.compile(r"\S+")
_EDGE = re.compile(r"^([^A-Za-z']*)([A-Za-z][A-Za-z']*)([^A-Za-z']*)$")
_MIN_LETTERS = 3  # "a", "is", "on": too short to tell apart by sound


@dataclass(frozen=True, slots=True)
class Candidate:
    """Replace the word at ``index`` (in the transcript's whitespace-split words) by ``word``."""

    index: int
    heard: str
    word: str
    kind: str  # "verb" or "name"


@dataclass(frozen=True, slots=True)
class Scored:
    """A candidate and how the audio took it: its sentence's log-probability minus the transcript's."""

    candidate: Candidate
    gap: float


@dataclass(frozen=True, slots=True)
class Snapped:
    """The transcript after snapping, what was heard, each replacement made (heard → word), and every
    candidate the model scored (kept for logs and for bench/voice_wer.py's margin sweep)."""

    text: str
    heard: str
    changes: tuple[tuple[str, str], ...] = ()
    considered: tuple[Scored, ...] = ()
    margin: float = DEFAULT_MARGIN

    def without(self, words: Sequence[str]) -> Snapped:
        """The same decision with ``words`` no longer in the lexicon (a prompt's answer words, once the note
        turned out to be an instruction)."""
        drop = {w.lower() for w in words}
        kept = [sc for sc in self.considered if sc.candidate.word.lower() not in drop]
        return choose(self.heard, kept, self.margin)


# Log-probability (nats) of each text given the note's audio, in order; bot.voice.transcribe supplies it.
Scorer = Callable[[Sequence[str]], list[float]]


_SILENT_GH = frozenset("though although through thorough borough dough bough plough".split())


def phonetic_key(word: str) -> str:
    """A Metaphone-like key: letters → sounds, vowels dropped after the first, doubles collapsed.

    "stash" → "STX", "sash" → "SX", "bump" → "PMP"-like keys differ from "pump" only in the voiced B.
    """
    w = re.sub(r"[^a-z]", "", word.lower())
    if not w:
        return ""
    for start, sound in (("kn", "n"), ("gn", "n"), ("pn", "n"), ("wr", "r"), ("ps", "s"), ("wh", "w"), ("x", "s")):
        if w.startswith(start):
            w = sound + w[len(start) :]
            break
    out: list[str] = []
    vowels = "aeiou"
    last = ""  # the last sound, forgotten after a vowel: "rerun" is R-R-N, "bubble" B-B-L…, "stash" S-T-X
    i = 0
    while i < len(w):
        c = w[i]
        nxt = w[i + 1] if i + 1 < len(w) else ""
        prev = w[i - 1] if i > 0 else ""
        sound = ""
        step = 1
        if c == prev and c != "c":
            i += 1
            continue
        if c in vowels:
            sound = "A" if i == 0 else ""
            last = ""
        elif c == "b":
            sound = "" if prev == "m" and not nxt else "B"
        elif c == "c":
            if nxt == "h":
                sound, step = "X", 2
            elif nxt in ("i", "e", "y"):
                sound = "S"
            elif nxt == "k":
                sound, step = "K", 2
            else:
                sound = "K"
        elif c == "d":
            sound = "J" if nxt == "g" and w[i + 2 : i + 3] in ("e", "i", "y") else "T"
        elif c == "g":
            if nxt == "h":
                # A last "gh" after "ou"/"au" is mostly F ("rough" sounds like ruff, "laugh"), else silent.
                rough = i + 2 == len(w) and w[i - 2 : i] in ("ou", "au") and w not in _SILENT_GH
                sound, step = ("F" if rough else "" if i > 0 else "K"), 2
            elif nxt == "n" and i + 2 >= len(w):
                sound = ""
            elif nxt in ("i", "e", "y") and prev != "g":
                sound = "J"
            else:
                sound = "K"
        elif c == "h":
            sound = "H" if prev not in "cgpst" and nxt in vowels else ""
        elif c == "k":
            sound = "" if prev == "c" else "K"
        elif c == "p":
            sound, step = ("F", 2) if nxt == "h" else ("P", 1)
        elif c == "q":
            sound = "K"
        elif c == "s":
            if nxt == "h" or (nxt == "i" and w[i + 2 : i + 3] in ("o", "a")):
                sound, step = "X", 2 if nxt == "h" else 1
            else:
                sound = "S"
        elif c == "t":
            if nxt == "h":
                sound, step = "0", 2
            elif nxt == "i" and w[i + 2 : i + 3] in ("o", "a"):
                sound = "X"
            elif nxt == "c" and w[i + 2 : i + 3] == "h":
                sound = ""
            else:
                sound = "T"
        elif c == "v":
            sound = "F"
        elif c in "wy":
            sound = c.upper() if nxt in vowels else ""
        elif c == "x":
            sound = "KS"
        elif c == "z":
            sound = "S"
        else:
            sound = c.upper()
        if sound and sound != last:
            out.append(sound)
        last = sound or last
        i += step
    return "".join(out)


# Sounds a small model confuses more easily than others: voiced/unvoiced pairs and near places.
_CLOSE = {frozenset(p) for p in ("BP", "TD", "KG", "FV", "SX", "SZ", "0T", "JX", "MN", "RL", "WA", "YA")}


def key_distance(a: str, b: str) -> float:
    """Edit distance between two phonetic keys; a swap of close sounds (B/P, S/SH…) costs half."""
    row = [float(j) for j in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], float(i)
        for j, cb in enumerate(b, 1):
            swap = 0.0 if ca == cb else (0.5 if frozenset((ca, cb)) in _CLOSE else 1.0)
            prev, row[j] = row[j], min(row[j] + 1.0, row[j - 1] + 1.0, prev + swap)
    return row[-1]


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two spellings, or two word lists (the benchmark's word error rate)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def sounds_like(heard: str, word: str) -> bool:
    """Worth asking the model: at most one edit on the phonetic key (1.5 for long keys), and spelled alike
    (at most half the letters differ) unless the keys are the same, so "sash" offers "stash" but not "push"."""
    h, w = heard.lower(), word.lower()
    a, b = phonetic_key(h), phonetic_key(w)
    if not a or not b or h.removesuffix("s") == w.removesuffix("s"):  # the same word, or its plural
        return False
    distance = key_distance(a, b)
    if distance > (1.0 if max(len(a), len(b)) <= 4 else 1.5):
        return False
    # The same key is a homophone by our rules ("console"/"cancel"): spelling says nothing more then.
    return distance == 0 or edit_distance(h, w) <= max(len(h), len(w)) / 2


def verb_positions(words: Sequence[str]) -> list[int]:
    """Indexes of the words that open a command: the first, and the first after a clause ends or "and"/"then"."""
    positions: list[int] = []
    start = True
    for i, token in enumerate(words):
        bare = token.strip("\"'()[]").lower().rstrip(".!?;:,")
        if start:
            if bare in _LEADERS:
                if _CLAUSE_END.search(token):
                    start = True
                continue
            if bare not in _NOT_COMMANDS:
                positions.append(i)
            start = False
        if _CLAUSE_END.search(token) or bare in ("and", "then"):
            start = True
    return positions


def candidates(transcript: str, names: Sequence[str] = (), verbs: Sequence[str] = DEV_VERBS) -> list[Candidate]:
    """Lexicon words that sound like a word of ``transcript``: verbs in command positions, names anywhere."""
    words = _TOKEN.findall(transcript)
    single_names = [n for n in dict.fromkeys(names) if re.fullmatch(r"[A-Za-z][A-Za-z']+", n)]
    known = {w.lower() for w in (*verbs, *single_names)}
    out: list[Candidate] = []
    verb_at = set(verb_positions(words))
    for i, token in enumerate(words):
        m = _EDGE.match(token)
        if m is None or len(m.group(2)) < _MIN_LETTERS:
            continue
        heard = m.group(2)
        # A word the lexicon has is taken as heard: swapping one command for another ("push" for "pull") is
        # the worst mistake snapping can make, and each candidate costs a pass of the model.
        if heard.lower() in known:
            continue
        if i in verb_at:
            out += [Candidate(i, heard, v, "verb") for v in verbs if sounds_like(heard, v)]
        out += [Candidate(i, heard, n, "name") for n in single_names if sounds_like(heard, n)]
    return out


def _replace(words: list[str], c: Candidate, lower_first: bool = False) -> str:
    m = _EDGE.match(words[c.index])
    assert m is not None  # candidates() only offers words it matched
    word = c.word
    if c.kind == "verb" and m.group(2)[:1].isupper() and not lower_first:
        word = word[:1].upper() + word[1:]
    out = list(words)
    out[c.index] = m.group(1) + word + m.group(3)
    return " ".join(out)


def snap(
    transcript: str,
    score: Scorer,
    names: Sequence[str] = (),
    *,
    verbs: Sequence[str] = DEV_VERBS,
    margin: float = DEFAULT_MARGIN,
) -> Snapped:
    """Replace misheard command verbs and names where the audio supports the lexicon's word.

    Every candidate sentence is scored; see ``choose`` for which are taken. A sentence-initial verb is also
    scored in lower case ("rerun the…"): Whisper's tokens for a capitalised rare word are poor ("R", "er",
    "un"), and case is not something the owner said.
    """
    heard = " ".join(transcript.split())
    found = candidates(heard, names, verbs)
    if not found:
        return Snapped(heard, heard, margin=margin)
    words = heard.split()
    texts = [heard]
    owners: list[Candidate] = []
    for c in found:
        texts.append(_replace(words, c))
        owners.append(c)
        if c.index == 0 and c.kind == "verb":
            texts.append(_replace(words, c, lower_first=True))
            owners.append(c)
    scores = score(texts)
    best: dict[Candidate, float] = {}
    for c, s in zip(owners, scores[1:], strict=True):
        best[c] = max(best.get(c, float("-inf")), s - scores[0])
    return choose(heard, [Scored(c, gap) for c, gap in best.items()], margin)


def choose(heard: str, considered: Sequence[Scored], margin: float = DEFAULT_MARGIN) -> Snapped:
    """Per word, the best-scoring candidate, taken when it scores at most ``margin`` nats below what was heard."""
    best: dict[int, Scored] = {}
    for sc in considered:
        at = sc.candidate.index
        if sc.gap >= -margin and (at not in best or sc.gap > best[at].gap):
            best[at] = sc
    words = heard.split()
    changes: list[tuple[str, str]] = []
    for at in sorted(best):
        c = best[at].candidate
        words = _replace(words, c).split()
        changes.append((c.heard, c.word))
    return Snapped(" ".join(words), heard, tuple(changes), tuple(considered), margin)
