"""Tcl word quoting and a small parser for one command line, so the host never needs an interpreter.

``quote`` writes a word Tcl reads back exactly, both as a script word and as a list element (braces
are escaped inside quotes, so any quoted text is brace-balanced and can itself be wrapped in braces).
``split_command`` reads bare, "quoted" and {braced} words plus an optional trailing ``;# comment``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["TclSyntaxError", "format_list", "quote", "split_command"]

_BARE = re.compile(r'[^\s"\\$\[\]{};\x00-\x1f\x7f]+')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "$": "\\$", "[": "\\[", "]": "\\]", "{": "\\{", "}": "\\}"}
_CONTROL = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_UNESCAPE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


class TclSyntaxError(ValueError):
    pass


def quote(word: str) -> str:
    if _BARE.fullmatch(word) and word[0] != "#":
        return word
    out = ['"']
    for c in word:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c in _CONTROL:
            out.append(_CONTROL[c])
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def format_list(words: Iterable[str]) -> str:
    return " ".join(quote(w) for w in words)


def _backslash(text: str, i: int, out: list[str]) -> int:
    """Decode the escape at text[i] == '\\'; return the index after it."""
    if i + 1 >= len(text):
        out.append("\\")
        return i + 1
    c = text[i + 1]
    if c in _UNESCAPE:
        out.append(_UNESCAPE[c])
        return i + 2
    if c in "ux":
        width = 4 if c == "u" else 2
        digits = ""
        j = i + 2
        while j < len(text) and len(digits) < width and text[j] in "0123456789abcdefABCDEF":
            digits += text[j]
            j += 1
        if digits:
            out.append(chr(int(digits, 16)))
            return j
    if c == "\n":
        out.append(" ")
        return i + 2
    out.append(c)
    return i + 2


def split_command(line: str) -> tuple[list[str], str]:
    """Words of one command line and the text of a trailing ``;#`` comment ('' if none)."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        c = line[i]
        if c == ";":
            rest = line[i + 1 :].lstrip()
            if rest.startswith("#"):
                return words, rest[1:].strip()
            if rest.strip():
                raise TclSyntaxError("only one command per line")
            break
        out: list[str] = []
        if c == '"':
            i += 1
            while True:
                if i >= n:
                    raise TclSyntaxError("missing closing quote")
                if line[i] == "\\":
                    i = _backslash(line, i, out)
                elif line[i] == '"':
                    i += 1
                    break
                else:
                    out.append(line[i])
                    i += 1
            if i < n and line[i] not in " \t\r\n;":
                raise TclSyntaxError("extra characters after close-quote")
        elif c == "{":
            depth, i = 1, i + 1
            start = i
            while i < n:
                if line[i] == "\\":
                    i += 2
                    continue
                if line[i] == "{":
                    depth += 1
                elif line[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            if depth:
                raise TclSyntaxError("missing close-brace")
            out.append(line[start:i])
            i += 1
            if i < n and line[i] not in " \t\r\n;":
                raise TclSyntaxError("extra characters after close-brace")
        else:
            while i < n and line[i] not in " \t\r\n;":
                if line[i] in "$[":
                    raise TclSyntaxError(f"substitution ({line[i]}) is not allowed in a snapshot")
                if line[i] == "\\":
                    i = _backslash(line, i, out)
                else:
                    out.append(line[i])
                    i += 1
        words.append("".join(out))
    return words, ""
