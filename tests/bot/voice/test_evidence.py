"""What the decoder knew of a transcript (bot.voice.evidence): a word of the owner's counts all its spellings."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.voice.evidence import gather, spellings


class WordTokens:
    """A tokenizer with one token a word (" SQLite", " the."), enough for gather's bookkeeping."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in text.split():
            if " " + word not in self.pieces:
                self.pieces.append(" " + word)
            ids.append(self.pieces.index(" " + word))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.pieces[i] for i in ids)


Forced = list[tuple[list[int], list[float]]]


def forcing(
    tokenizer: WordTokens, likely: dict[str, float], texts_seen: list[str]
) -> Callable[[Sequence[str]], Forced]:
    """The decoder's side: each word's probability from ``likely`` (0.9 when not listed), as spelled."""

    def force(texts: Sequence[str]) -> Forced:
        texts_seen.extend(texts)
        out: Forced = []
        for text in texts:
            ids = tokenizer.encode(text)
            out.append((ids, [likely.get(tokenizer.decode([i]).strip(" .,"), 0.9) for i in ids]))
        return out

    return force


def test_spellings_are_the_words_cases_and_the_owners_own_spelling_once_each() -> None:
    assert spellings("SQLite", ["sqlite"]) == ["sqlite", "Sqlite", "SQLITE"]
    assert spellings("CI", []) == ["ci", "Ci"]
    assert spellings("kestrel", ["Kestrel"]) == ["Kestrel", "KESTREL"]


def test_an_owners_word_is_as_likely_as_all_its_spellings_together() -> None:
    tokenizer, seen = WordTokens(), list[str]()
    likely = {"SQLite": 0.14, "sqlite": 0.06, "Sqlite": 0.04, "SQLITE": 0.001, "Upgrade": 0.5, "upgrade": 0.6}
    evidence = gather(tokenizer, forcing(tokenizer, likely, seen), [], "Upgrade SQLite in the image.", ["sqlite"])
    assert evidence.words[1] == ("SQLite", 0.14 + 0.06 + 0.04 + 0.001)
    # A sentence's first word keeps the better of its two cases, and a sure word or one that is none of the
    # owner's costs no pass.
    assert evidence.words[0] == ("Upgrade", 0.6)
    assert seen == [
        "Upgrade SQLite in the image.",
        "upgrade SQLite in the image.",
        "Upgrade sqlite in the image.",
        "Upgrade Sqlite in the image.",
        "Upgrade SQLITE in the image.",
    ]


def test_a_word_opening_a_sentence_or_none_of_the_owners_keeps_its_spellings_probability() -> None:
    tokenizer, seen = WordTokens(), list[str]()
    likely = {"Kestrel": 0.2, "kestrel": 0.3, "rocket": 0.25, "Rocket": 0.2}
    text = "Done. Kestrel, then rocket Rocket"
    evidence = gather(tokenizer, forcing(tokenizer, likely, seen), [], text, ["Kestrel"])
    assert [p for _, p in evidence.words] == [0.9, 0.2, 0.9, 0.25, 0.2]
    assert seen == [text]
