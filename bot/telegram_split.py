"""Splitting a message under Telegram's 4,096-character limit, at the best boundary, never inside a tag.

Boundaries, best first: blank line, line end, sentence end, space, anywhere. HTML chunks stay valid on their
own: tags open at a cut are closed at the end of the chunk and reopened at the start of the next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TELEGRAM_LIMIT", "split_message", "utf16_len"]

TELEGRAM_LIMIT = 4096


def utf16_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (an emoji outside the BMP is two)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def split_message(text: str, limit: int = TELEGRAM_LIMIT, *, html: bool = True) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` UTF-16 units at the best boundary available.

    Boundaries, best first: blank line, line end, sentence end, space, anywhere. With ``html=True``
    tags and entities are never cut; tags open at a split are closed at the end of the chunk and
    reopened at the start of the next (a ``<pre>`` block continues as a ``<pre>`` block), and chunks
    without visible text are dropped. With ``html=False`` the chunks rejoin to ``text`` exactly.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    units = _units(text, html)
    if utf16_len(text) <= limit:
        return [text] if text and (not html or _visible(units, 0, len(units)).strip()) else []
    chunks: list[str] = []
    stack: list[_Unit] = []
    i = 0
    while i < len(units):
        k, chunk, stack = _next_chunk(units, i, stack, limit)
        if not html or _visible(units, i, k).strip():
            chunks.append(chunk)
        i = k
    return chunks


_TEXT, _OPEN, _CLOSE = 0, 1, 2
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)(?:\s[^<>]*)?>|&(?:[a-zA-Z]+|#[0-9]+|#[xX][0-9a-fA-F]+);")


@dataclass(frozen=True, slots=True)
class _Unit:
    """An atom the splitter never cuts: one character, one entity, or one tag."""

    text: str
    kind: int = _TEXT
    name: str = ""


def _units(text: str, html: bool) -> list[_Unit]:
    if not html:
        return [_Unit(ch) for ch in text]
    units: list[_Unit] = []
    pos = 0
    for m in _TAG.finditer(text):
        units.extend(_Unit(ch) for ch in text[pos : m.start()])
        if m.group(2) is None:
            units.append(_Unit(m.group(0)))  # an entity: one visible character
        else:
            units.append(_Unit(m.group(0), _CLOSE if m.group(1) else _OPEN, m.group(2).lower()))
        pos = m.end()
    units.extend(_Unit(ch) for ch in text[pos:])
    return units


def _closing(stack: list[_Unit]) -> str:
    return "".join(f"</{u.name}>" for u in reversed(stack))


def _step(stack: list[_Unit], unit: _Unit) -> None:
    if unit.kind == _OPEN:
        stack.append(unit)
    elif unit.kind == _CLOSE and stack and stack[-1].name == unit.name:
        stack.pop()


def _priority(prev2: str, prev1: str) -> int:
    if prev1 == "\n":
        return 4 if prev2 == "\n" else 3
    if prev1 in " \t":
        return 2 if prev2 in ".!?" else 1
    return 0


def _next_chunk(units: list[_Unit], i: int, stack: list[_Unit], limit: int) -> tuple[int, str, list[_Unit]]:
    prefix = "".join(u.text for u in stack)
    budget = limit - utf16_len(prefix)
    cur = list(stack)
    closing = len(_closing(cur))
    length = 0
    prev1 = prev2 = ""
    # (end index, priority, chunk length so far); -1 marks a cut right after an opening tag.
    cuts: list[tuple[int, int, int]] = []
    j = i
    while j < len(units):
        unit = units[j]
        _step(cur, unit)
        closing = len(_closing(cur)) if unit.kind != _TEXT else closing
        length += utf16_len(unit.text)
        j += 1
        if length + closing > budget and (cuts or unit.kind != _TEXT):  # never shrinks again
            break  # (a lone character wider than the budget, an emoji at a tiny limit, still goes alone)
        if unit.kind == _TEXT:
            prev2, prev1 = prev1, unit.text[-1] if len(unit.text) == 1 else "x"
            cuts.append((j, _priority(prev2, prev1), length))
        else:
            cuts.append((j, -1 if unit.kind == _OPEN else 0, length))
    else:
        return len(units), prefix + "".join(u.text for u in units[i:]) + _closing(cur), cur
    if not cuts:
        raise ValueError(f"limit {limit} is too small for the markup open at this point")
    k = _best_cut(cuts, budget)
    end_stack = list(stack)
    for unit in units[i:k]:
        _step(end_stack, unit)
    return k, prefix + "".join(u.text for u in units[i:k]) + _closing(end_stack), end_stack


def _best_cut(cuts: list[tuple[int, int, int]], budget: int) -> int:
    half = budget // 2
    for pri in (4, 3, 2, 1):  # the best boundary that still fills at least half a chunk
        for end, p, length in reversed(cuts):
            if p == pri and length >= half:
                return end
    for floor in (1, 0, -1):
        for end, p, _ in reversed(cuts):
            if p >= floor:
                return end
    return cuts[-1][0]


def _visible(units: list[_Unit], i: int, k: int) -> str:
    return "".join(u.text for u in units[i:k] if u.kind == _TEXT)
