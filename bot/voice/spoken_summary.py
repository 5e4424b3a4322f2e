"""The words of a spoken answer: a short, deterministic summary of the text answer, no model involved.

The outcome comes first, then what needs the owner's word (the answer's questions and the prompts still
waiting). What reads badly aloud is left to the text message: code blocks and inline code (a single
identifier such as ``parse_config`` is read as its words), paths and file names, URLs, tables, headings,
and all but the first items of a long list ("and 4 more"). ``MAX_SPOKEN_WORDS`` keeps the note within
30 seconds at the Piper voice's pace (docs/speech.md has the measurement).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MAX_SPOKEN_WORDS", "spoken_summary"]

# The joe voice speaks ≈ 2.9 words a second with the sentence pauses; 75 words ≈ 26 s leaves room for long words.
MAX_SPOKEN_WORDS = 75
NOTHING_TO_SAY = "The answer is in the text message."
_LIST_READ = 3  # a list of more items is read as its first two and "and N more"

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE = re.compile(r"^\s*\|")
_ITEM = re.compile(r"^(\s*)(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^\s*>\s?")

_MARK = "\x00"  # stands for something dropped (code, a path, a URL) until the sentence is tidied
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_URL = re.compile(r"<?\b(?:https?://|ftp://|www\.)[^\s<>]*[^\s<>.,;:!?)\]'\"]>?", re.I)
_SLASHED = re.compile(r"(?<![\w/])[~.]*[\w.@+\-]*(?:[/\\][\w.@+\-]*)+")
_FILE_EXT = (
    "py|pyi|md|rst|txt|json|jsonl|toml|yaml|yml|ini|cfg|conf|lock|js|mjs|ts|tsx|jsx|go|rs|rb|java|kt|c|h|cc|"
    "cpp|hpp|cs|sh|bash|zsh|sql|db|sqlite|html|css|scss|xml|csv|tsv|ipynb|log|env|ogg|wav|mp3|png|jpg|svg|pdf"
)
_FILE = re.compile(rf"(?<![\w.])\.?[\w\-]+(?:\.[\w\-]+)*\.(?:{_FILE_EXT})(?!\w|\.\w)", re.I)
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_\-][A-Za-z0-9]+)*")
_EMPHASIS = re.compile(r"(?<!\w)(\*{1,3}|_{1,3}|~~)(?=\S)|(?<=\S)(\*{1,3}|_{1,3}|~~)(?!\w)")
_ARROW = re.compile(r"\s*(?:->|=>|→|⇒)\s*")
_PREPOSITION = r"(?:in|inside|at|to|into|from|of|on|under|for|with|via|using|by)"
_ABBREV = {"e.g.": "for example", "i.e.": "that is", "etc.": "and so on", "vs.": "versus", "approx.": "about"}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    words: int

    @property
    def question(self) -> bool:
        return self.text.endswith("?")


def spoken_summary(answer_markdown: str, *, pending: Sequence[str] = (), max_words: int = MAX_SPOKEN_WORDS) -> str:
    """What to say for ``answer_markdown``: the outcome first, then what needs the owner's word.

    ``pending``: short sentences for prompts still waiting ("Claude asks to run a command: allow or
    deny?"), said after the answer's own questions are weighed against them; they come first among the
    things that need the owner's word. At most ``max_words`` words; "" when there is nothing at all to say.
    """
    if max_words < 5:
        raise ValueError(f"max_words must be at least 5, not {max_words}")
    sentences = _sentences(answer_markdown)
    needs = [s for p in pending for s in _split(_clean(p))]
    needs += [s for s in sentences if s.question and s not in needs]
    outcome = [s for s in sentences if not s.question]
    if not outcome and not needs:
        return NOTHING_TO_SAY if answer_markdown.strip() else ""
    # The owner's word matters most, but never crowds out the outcome entirely.
    need_budget = max_words if not outcome else min(sum(s.words for s in needs), max_words // 2)
    said_needs = _fit(needs, need_budget)
    said_outcome = _fit(outcome, max_words - sum(s.words for s in said_needs))
    return " ".join(s.text for s in [*said_outcome, *said_needs])


def _fit(sentences: list[_Sentence], budget: int) -> list[_Sentence]:
    """Sentences in order while they fit; a first sentence longer than the budget is cut at a word."""
    taken: list[_Sentence] = []
    used = 0
    for s in sentences:
        if used + s.words <= budget:
            taken.append(s)
            used += s.words
        elif not taken and budget >= 3:
            taken.append(_cut(s, budget))
            break
        else:
            break
    return taken


def _cut(s: _Sentence, budget: int) -> _Sentence:
    words = s.text.split()[:budget]
    # Prefer ending at a clause boundary in the second half of what fits.
    for i in range(len(words) - 1, len(words) // 2, -1):
        if words[i - 1].endswith((",", ";", ":")):
            words = words[:i]
            break
    text = " ".join(words).rstrip(",;:—-") + ("?" if s.question else ".")
    return _Sentence(text, len(words))


def _sentences(markdown: str) -> list[_Sentence]:
    out: list[_Sentence] = []
    for block in _blocks(markdown):
        if isinstance(block, str):
            out += _split(_clean(block))
            continue
        items = [s for item in block if (s := _split(_clean(item)))]
        firsts = [s[0] for s in items]
        if len(firsts) <= _LIST_READ:
            out += firsts
        else:
            out += firsts[:2]
            more = len(firsts) - 2
            out.append(_Sentence(f"And {more} more.", 3))
    return out


def _blocks(markdown: str) -> list[str | list[str]]:
    """Paragraphs (str) and lists (the text of each top-level item), in order; code, tables, headings dropped."""
    text = _FENCE.sub("\n", markdown.replace("\r\n", "\n"))
    text = _HTML_TAG.sub(" ", text)
    blocks: list[str | list[str]] = []
    para: list[str] = []
    items: list[str] = []
    item_indent = -1
    previous_blank = True

    def flush_para() -> None:
        if para:
            blocks.append(" ".join(para))
            para.clear()

    def flush_list() -> None:
        nonlocal item_indent
        if items:
            blocks.append(list(items))
            items.clear()
        item_indent = -1

    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line.strip():
            flush_para()
            previous_blank = True
            continue
        if _HEADING.match(line) or _RULE.match(line) or _TABLE.match(line):
            flush_para()
            flush_list()
            previous_blank = True
            continue
        item = _ITEM.match(line)
        if item:
            flush_para()
            indent = len(item.group(1).expandtabs(4))
            if item_indent < 0:
                item_indent = indent
            if indent <= item_indent:  # nested items belong to their parent and are not read
                items.append(item.group(2))
            previous_blank = False
            continue
        indent = len(line) - len(line.lstrip())
        if items and indent > item_indent:  # a wrapped item line
            if indent <= item_indent + 4:
                items[-1] += " " + line.strip()
            continue
        if previous_blank and indent >= 4 and not items:  # an indented code block
            continue
        flush_list()
        para.append(_QUOTE.sub("", line).strip())
        previous_blank = False
    flush_para()
    flush_list()
    return blocks


def _speakable_code(code: str) -> str:
    """A lone identifier in backticks is read as words ("parse config"); anything else is dropped."""
    code = code.strip()
    if _FILE.fullmatch(code) or re.fullmatch(r"[~.]*[\w.@+\-]*(?:[/\\][\w.@+\-]*)+", code):
        return _MARK + "f"  # a path in backticks is still a file
    if len(code) <= 40 and _IDENT.fullmatch(code):
        return re.sub(r"[_\-]+", " ", code)
    return _MARK + "c"


def _clean(text: str) -> str:
    """Markdown prose → plain, speakable text (one line)."""
    text = text.replace(_MARK, " ")  # the marks below must be ours
    for short, spoken in _ABBREV.items():
        text = re.sub(rf"(?<!\w){re.escape(short)}", spoken, text, flags=re.I)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _CODE.sub(lambda m: _speakable_code(m.group(2)), text)
    text = _URL.sub(_MARK + "u", text)
    text = _SLASHED.sub(_slashed, text)
    text = _FILE.sub(_MARK + "f", text)
    text = _EMPHASIS.sub("", text)
    text = _ARROW.sub(", ", text)
    text = "".join(ch for ch in text if _speakable_char(ch))
    text = re.sub(r"(?<=[A-Za-z])_(?=[A-Za-z])", " ", text)  # snake_case outside backticks
    text = re.sub(r"\s+", " ", text).strip()
    return _tidy_marks(text)


def _slashed(match: re.Match[str]) -> str:
    token = match.group(0)
    path = token.rstrip(".")  # a full stop after a path ends the sentence
    parts = path.split("/")
    # "and/or", "read/write": two short words are a choice, not a path.
    if len(parts) == 2 and all(p.isalpha() and len(p) <= 6 for p in parts):
        return f"{parts[0]} or {parts[1]}" + token[len(path) :]
    return _MARK + "f" + token[len(path) :]


def _speakable_char(ch: str) -> bool:
    if ch in _MARK or ch.isspace():
        return True
    category = unicodedata.category(ch)
    return not (category in ("So", "Sk", "Cs", "Co", "Cn", "Cf") or category.startswith("C") or ch in "#|<>{}[]\\^")


def _tidy_marks(text: str) -> str:
    """Drop the marks left for code, paths and URLs, with the words that only pointed at them."""
    mark = rf"{_MARK}[cfu]"
    # A run of marks ("a.py, b.py and c.py") is one thing.
    run = rf"{mark}(?:(?:\s*,\s*|\s+(?:and|or)\s+|\s+){mark})*"
    # "in src/app.py" / "see https://…": the preposition goes with what it pointed at.
    text = re.sub(rf"\b{_PREPOSITION}\s+(?:the\s+)?(?:file\s+|files\s+|link\s+)?{run}", "", text, flags=re.I)

    def replace(m: re.Match[str]) -> str:
        kinds = re.findall(rf"{_MARK}([cfu])", m.group(0))
        if all(k == "f" for k in kinds):
            return "a file" if len(kinds) == 1 else f"{len(kinds)} files"
        if all(k == "u" for k in kinds):
            return "a link"
        return "this"

    if not re.sub(rf"{mark}|[\W_]", "", text):  # nothing but things that are not read
        return ""
    text = re.sub(run, replace, text)
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r"([,;:])(?=[.!?])", "", text)
    text = re.sub(r"\(\s*\)|\s{2,}", " ", text)
    return re.sub(r"^[\s,;:.]+", "", text).strip()


def _split(text: str) -> list[_Sentence]:
    out: list[_Sentence] = []
    for part in _SENTENCE_END.split(text):
        part = part.strip().strip(",;:").strip()
        words = part.split()
        if not any(any(c.isalnum() for c in w) for w in words):
            continue
        if not part.endswith((".", "!", "?")):
            part += "."
        out.append(_Sentence(part[0].upper() + part[1:], len(words)))
    return out
