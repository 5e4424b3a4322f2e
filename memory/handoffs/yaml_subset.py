"""The YAML subset handoff frontmatter is written in, read and written in one pass of line regexes.

A handoff's frontmatter is almost always a flat mapping of scalars and lists of scalars: what
:func:`memory.handoffs.format.to_markdown` writes, and what eywa-mcp writes (``keywords: [a, b]``,
``headline: "..."``). PyYAML spends most of an import's parse and dump time on that in general-purpose
machinery (an event object and two marks per scalar; a node, a resolver call and a style analysis per
scalar). These two functions handle only that subset and say ``None`` to anything else, which then
goes to :mod:`memory.handoffs.safe_yaml`'s strict loader or to PyYAML's dumper:

- :func:`load_subset` takes ``key: scalar``, ``key: [scalar, ...]`` and ``key:`` followed by ``- scalar``
  lines, where a scalar is plain, ``'single-quoted'`` or ``"double-quoted"`` without escapes, on one
  line; blank lines and whole-line comments; nothing else (no anchors, tags, nesting, multi-line or
  block scalars, flow mappings, tabs, control characters).
- :func:`dump_subset` writes a mapping of ``None``, booleans, numbers, one-line strings and lists of them,
  choosing each string's style by PyYAML's own rules (plain where a plain scalar reads back as that
  string, else single quotes).

Whatever they accept comes out exactly as ``yaml.safe_load`` reads it and as ``yaml.safe_dump(data,
sort_keys=True, allow_unicode=True, default_flow_style=False, width=10_000)`` writes it; the tests hold
them to that over generated documents. Plain scalars are resolved by PyYAML's resolver and built by its
safe constructors.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

__all__ = ["PLAIN_BUILDERS", "dump_subset", "load_subset"]

_STR = "tag:yaml.org,2002:str"
_FLOAT = "tag:yaml.org,2002:float"
_resolver = Resolver()
_constructor = SafeConstructor()
# The implicit types a plain scalar may resolve to, and how PyYAML's safe loader builds each.
PLAIN_BUILDERS: dict[str, Callable[[ScalarNode], Any]] = {
    "tag:yaml.org,2002:null": _constructor.construct_yaml_null,
    "tag:yaml.org,2002:bool": _constructor.construct_yaml_bool,
    "tag:yaml.org,2002:int": _constructor.construct_yaml_int,
    "tag:yaml.org,2002:float": _constructor.construct_yaml_float,
    "tag:yaml.org,2002:timestamp": _constructor.construct_yaml_timestamp,
}


class _Unsupported(Exception):
    """Outside the subset: the caller takes the general path."""


# Resolver.resolve tries the implicit types registered for a plain scalar's first character; most words
# start with one that has none, so they are strings without the call.
_RESOLVED_FIRST = frozenset(Resolver.yaml_implicit_resolvers)


def _tag(value: str) -> str:
    if value and value[0] not in _RESOLVED_FIRST:
        return _STR
    tag: str = _resolver.resolve(ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    return tag


# -- reading ------------------------------------------------------------------------------------------

# Printable, no tab, no line break other than \n, no BOM: anything else has rules of its own in YAML.
_OUTSIDE = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010fffd]")
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: (.*))?\Z")  # the value is stripped after
_ITEM_LINE = re.compile(r"( *)-(?: (.*))?\Z")
_SINGLE = re.compile(r"'((?:[^']|'')*)'\Z")
_DOUBLE = re.compile(r'"([^"\\]*)"\Z')
_FLOW_ITEM = re.compile(r" *('(?:[^']|'')*'|\"[^\"\\]*\"|[^,'\"\[\]{}#&*!|>%@`? ][^,\[\]{}]*?) *(?:,|\Z)")
# Characters that end or open something inside a flow list; an unquoted list holding none splits on ",".
_FLOW_SPECIAL = re.compile(r"[\[\]{}:?#'\"]")
# Plain in block context: no indicator first, no ": " or " #" inside, no ":" last.
_NOT_PLAIN = re.compile(r"\A(?:[\-?:,\[\]{}#&*!|>'\"%@`]|---|\.\.\.)|: |:\Z| #")


# Keys, projects, keywords and models recur from file to file (an import reads each a thousand times), and
# what a plain scalar reads as or how a string is written depends on the string alone; the values are
# immutable (str, None, bool, int, float, date, datetime), so a cached one can be handed out again. Only
# short strings are kept: free text is seldom seen twice, and 4,096 long ones would hold megabytes.
_CACHED_LEN = 200


def _plain(raw: str) -> Any:
    return _plain_cached(raw) if len(raw) <= _CACHED_LEN else _plain_read(raw)


def _plain_read(raw: str) -> Any:
    if not raw or _NOT_PLAIN.search(raw):
        raise _Unsupported
    tag = _tag(raw)
    if tag == _STR:
        return raw
    build = PLAIN_BUILDERS.get(tag)
    if build is None:
        raise _Unsupported
    try:
        return build(ScalarNode(tag, raw))
    except (ValueError, OverflowError):
        raise _Unsupported from None  # 2025-13-45: the strict loader says what is wrong


_plain_cached = functools.lru_cache(maxsize=4096)(_plain_read)


def _scalar(raw: str) -> Any:
    if raw[:1] == "'":
        m = _SINGLE.match(raw)
        if m is None:
            raise _Unsupported
        return m.group(1).replace("''", "'")
    if raw[:1] == '"':
        m = _DOUBLE.match(raw)
        if m is None:
            raise _Unsupported
        return m.group(1)
    return _plain(raw)


def _flow_list(raw: str) -> list[Any]:
    inner = raw[1:-1].strip(" ")
    if not inner:
        return []
    if not _FLOW_SPECIAL.search(inner):  # eywa-mcp's `keywords: [a, b]`
        parts = [part.strip(" ") for part in inner.split(",")]
        if not all(parts):
            raise _Unsupported  # "[a, , b]", a trailing comma: leave them to the full parser
        return [_plain(part) for part in parts]
    items: list[Any] = []
    pos = 0
    while pos < len(inner):
        m = _FLOW_ITEM.match(inner, pos)
        if m is None or not m.group(1):
            raise _Unsupported
        item = m.group(1)
        if item[0] not in "'\"" and (":" in item or "?" in item):
            raise _Unsupported  # in a flow list ":" and "?" have meanings of their own
        items.append(_scalar(item))
        pos = m.end()
        if pos == len(inner) and inner.endswith(","):
            raise _Unsupported  # a trailing comma: leave it to the full parser
    return items


def _value(raw: str) -> Any:
    if raw[:1] == "[":
        if not raw.endswith("]"):
            raise _Unsupported
        return _flow_list(raw)
    return _scalar(raw)


def load_subset(text: str) -> dict[Any, Any] | None:
    """The mapping ``text`` holds when it is in the subset, else ``None`` (not an error: ask the full loader)."""
    if _OUTSIDE.search(text):
        return None
    lines = text.split("\n")
    out: dict[Any, Any] = {}
    i = 0
    try:
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.strip(" ") or line[0] == "#":
                continue
            m = _KEY_LINE.match(line)
            if m is None:
                return None
            key = _plain(m.group(1))
            raw = (m.group(2) or "").strip(" ")
            if raw:
                out[key] = _value(raw)
                continue
            items: list[Any] = []
            indent: str | None = None
            while i < len(lines) and (item := _ITEM_LINE.match(lines[i])) is not None:
                if indent is None:
                    indent = item.group(1)
                if item.group(1) != indent or indent not in ("", "  "):
                    return None
                raw = (item.group(2) or "").strip(" ")
                items.append(_scalar(raw) if raw else None)
                i += 1
            out[key] = items or None
    except _Unsupported:
        return None
    return out or None


# -- writing ------------------------------------------------------------------------------------------

# What PyYAML's emitter writes as it is (allow_unicode), on one line; anything else it escapes or breaks.
_WRITABLE = re.compile("[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010fffe]*")
# Where PyYAML's analysis forbids a plain scalar in block context (one line, no special characters).
_NO_BLOCK_PLAIN = re.compile(r"\A(?:[#,\[\]{}&*!|>'\"%@`]|[?:\-](?: |\Z)|---|\.\.\.| )|:(?: |\Z)| #| \Z")
_LONGEST = 4_000  # far below width=10_000, so PyYAML never folds the line


def _str(value: str, *, key: bool) -> str:
    return _str_cached(value, key) if len(value) <= _CACHED_LEN else _str_written(value, key)


def _str_written(value: str, key: bool) -> str:
    if len(value) > (100 if key else _LONGEST) or not _WRITABLE.fullmatch(value) or (key and not value):
        raise _Unsupported  # an empty key or one of 128+ characters is written as "? key"; long lines fold
    if value and not _NO_BLOCK_PLAIN.search(value) and _tag(value) == _STR:
        return value
    return "'" + value.replace("'", "''") + "'"


_str_cached = functools.lru_cache(maxsize=4096)(_str_written)


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)
    if _tag(text) != _FLOAT:
        raise _Unsupported
    return text


def _dump_scalar(value: Any, *, key: bool = False) -> str:
    if isinstance(value, str):
        return _str(value, key=key)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return _float(value)
    raise _Unsupported


def dump_subset(data: Mapping[Any, Any]) -> str | None:
    """``data`` as PyYAML writes it (block style, sorted keys) when it is in the subset, else ``None``."""
    if not data or not all(type(k) is str for k in data):
        return None
    lines: list[str] = []
    try:
        for key in sorted(data):
            name = _dump_scalar(key, key=True)
            value = data[key]
            if type(value) is list:
                if not value:
                    lines.append(f"{name}: []\n")
                    continue
                lines.append(f"{name}:\n")
                lines.extend(f"- {_dump_scalar(item)}\n" for item in value)
            else:
                lines.append(f"{name}: {_dump_scalar(value)}\n")
    except _Unsupported:
        return None
    return "".join(lines)
