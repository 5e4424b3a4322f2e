"""Which rules may apply to a text, found fast: a few literal scans and a handful of ``in`` tests.

Every transcript line passes the gate, so it must cost little where nothing is found. Each rule names
anchors: literals every match of it contains (``dop_v1_``, ``SG.``, ``AKIA``). The gate picks a few
characters that, between them, occur in every anchor (``_``, ``-``, ``.``, ``A`` …) and compiles one
regex per character that starts with that literal: CPython's ``re`` finds a literal prefix as fast as
``str.find`` and drops an alternative that goes on with a literal at its first character, while a
regex that starts with a character set is scanned position by position, ten times slower. Anchors with
none of those characters (``bearer``) are looked for with ``in``. A rule whose anchors are absent
never runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Anchor", "Gate"]


@dataclass(frozen=True, slots=True)
class Anchor:
    """A literal every match of a rule contains (``fold``: in any letter case), or with ``regex`` a
    small pattern that starts with a literal character (for formats without a fixed prefix)."""

    text: str
    fold: bool = False
    regex: bool = False


# Characters an anchor may be searched by: not lower-case letters, digits or spaces, which stand
# everywhere. An anchor with none of them ("bearer", "curl") is looked for as a whole word with ``in``.
_SCAN_CHARS = frozenset("~^%!<>&$?|@=#`;[]{}()*_.+-:/ABCDEFGHIJKLMNOPQRSTUVWXYZ")
# From rare to common in transcripts, to break ties when choosing the characters to scan by.
_RARITY = "~^%!<>&$?|@=#`;[]{}()*_.XZJQKVWYHLGUPOBRFENMDTISCA+-:/"
_MAX_HITS = 200  # hits of one scan past which its rules simply run (their regexes are C; this loop is not)
_FIRST_LITERAL = re.compile(r"\\(?P<escaped>[^A-Za-z0-9])|(?P<plain>[^\\\[\](){}.*+?^$|])")


def _scan_chars(texts: Iterable[str], free: Iterable[str]) -> dict[str, str]:
    """Few characters that, between them, occur in every anchor (each costs one scan of the text): a
    greedy set cover, starting from the characters scanned anyway (``free``)."""
    left = {t for t in texts if _SCAN_CHARS.intersection(t)}
    chosen: dict[str, str] = {}
    for char in free:
        for t in [t for t in left if char in t]:
            chosen[t] = char
            left.discard(t)
    while left:
        counts = Counter(c for t in left for c in set(t) if c in _SCAN_CHARS)
        char = max(counts, key=lambda c: (counts[c], -_RARITY.find(c)))
        for t in [t for t in left if char in t]:
            chosen[t] = char
            left.discard(t)
    return chosen


class Gate:
    """Finds which rules' anchors occur in a text: a few literal scans, and an ``in`` test per word."""

    def __init__(self, anchors: Sequence[tuple[Anchor, int]]) -> None:
        # char -> [(offset of the char in the anchor, anchor text, rule)] and [(regex, rule)]: what a hit on
        # that char may be. All are checked at each hit: anchors may share the char's position ("sk-ant-").
        self._literals: dict[str, list[tuple[int, str, int]]] = {}
        self._regexes: dict[str, list[tuple[re.Pattern[str], int]]] = {}
        self._words: dict[tuple[str, bool], list[int]] = {}  # (word, in the lowercased text?) -> rules
        follows: dict[str, list[str]] = {}  # char -> alternatives that go on with a literal after it
        ends: dict[str, dict[int, list[str]]] = {}  # char -> length before it -> anchors that end at it
        free = {
            m.group("escaped") or m.group("plain")
            for a, _ in anchors
            if a.regex and (m := _FIRST_LITERAL.match(a.text))
        }
        by = _scan_chars([a.text for a, _ in anchors if not a.regex and not a.fold], sorted(free))
        for anchor, rule in anchors:
            if anchor.regex:
                first = _FIRST_LITERAL.match(anchor.text)
                if first is None:
                    raise ValueError(f"a regex anchor must start with a literal character: {anchor.text!r}")
                char = first.group("escaped") or first.group("plain")
                self._regexes.setdefault(char, []).append((re.compile(anchor.text), rule))
                follows.setdefault(char, []).append(anchor.text[first.end() :])
                continue
            if len(anchor.text) < 2:
                raise ValueError(f"an anchor of one character would match almost anywhere: {anchor.text!r}")
            if anchor.fold or anchor.text not in by:
                word = anchor.text.lower() if anchor.fold else anchor.text
                self._words.setdefault((word, anchor.fold), []).append(rule)
                continue
            text = anchor.text
            char = by[text]
            i = text.index(char)
            before, after = text[:i], text[i + 1 :]
            self._literals.setdefault(char, []).append((i, text, rule))
            if after:
                follows.setdefault(char, []).append(re.escape(after) + (f"(?<={re.escape(text)})" if before else ""))
            else:
                ends.setdefault(char, {}).setdefault(len(before), []).append(re.escape(text))
        # One regex per character: it starts with that literal, which `re` finds as fast as `str.find`;
        # an alternative that goes on with a literal is dropped at its first character.
        self._scans: list[tuple[str, re.Pattern[str]]] = []
        for char in sorted(follows.keys() | ends.keys()):
            alts = list(dict.fromkeys(follows.get(char, ())))
            for _, texts in sorted(ends.get(char, {}).items()):  # look-behinds: one width each
                alts.append(f"(?<={'|'.join(dict.fromkeys(texts))})")
            self._scans.append((char, re.compile(re.escape(char) + "(?:" + "|".join(alts) + ")")))

    def rules_in(self, text: str, low: str) -> set[int]:
        found: set[int] = set()
        for char, scan in self._scans:
            literals, regexes = self._literals.get(char, ()), self._regexes.get(char, ())
            m = scan.search(text)
            hits = 0
            while m is not None:
                hits += 1
                if hits > _MAX_HITS:  # "sk-sk-sk-…": let the rules' own regexes run rather than Python per hit
                    found.update(rule for *_, rule in literals)
                    found.update(rule for _, rule in regexes)
                    break
                pos = m.start()
                for offset, anchor, rule in literals:
                    if rule not in found and pos >= offset and text.startswith(anchor, pos - offset):
                        found.add(rule)
                for regex, rule in regexes:
                    if rule not in found and regex.match(text, pos):
                        found.add(rule)
                m = scan.search(text, pos + 1)  # from the next character: anchors may overlap
        for (word, fold), rules in self._words.items():
            if word in (low if fold else text):
                found.update(rules)
        return found
