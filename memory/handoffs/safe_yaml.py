"""Strict YAML for handoff frontmatter: plain data in, plain data out, bounded work.

A handoff file may come from anywhere (an eywa-mcp tree, a download, a hand edit), so :func:`load` takes
only what a frontmatter needs: mappings, sequences and the standard scalars (strings, numbers, booleans,
null, dates) that YAML resolves implicitly. It refuses, naming the place:

- aliases and anchors (``&a`` / ``*a``): an alias is the whole "billion laughs" attack, a few hundred
  bytes that expand to gigabytes once anything walks the result;
- explicit tags (``!!float``, ``!!timestamp``, ``!!python/...``, ``!local``): a tag is a request to build
  a value of that type, and PyYAML's builders raise ``ValueError``/``TypeError`` on bad input;
- nesting deeper than :data:`MAX_DEPTH`, and collections or merge keys (``<<``) used as keys.

It reads libyaml's event stream (the C parser when PyYAML was built with it, else PyYAML's own) and
builds the values itself in one loop, without recursion, so no input can exhaust the stack, and it
stops at the first refused event, so a hostile file costs no more than its bytes. Scalars are resolved
and converted by PyYAML's own resolver and safe constructors: an accepted file loads exactly as
``yaml.safe_load`` loads it.

:func:`dump` is ``yaml.safe_dump`` with libyaml's emitter where that writes the same bytes as PyYAML's
(it escapes astral characters such as emoji, ``\\r`` and ``\\x85``, which PyYAML writes as they are),
and never writes an alias.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from memory.handoffs.yaml_subset import PLAIN_BUILDERS, dump_subset, load_subset

__all__ = ["MAX_DEPTH", "StrictYamlError", "dump", "load"]

# Frontmatter is a mapping of lists (depth 2); hand-kept extra keys may nest a little more.
MAX_DEPTH = 16

try:
    from yaml import CSafeDumper as _FastDumper
    from yaml import CSafeLoader as _Parser
except ImportError:  # PyYAML built without libyaml: the same events, from pure Python
    from yaml import SafeDumper as _FastDumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Parser  # type: ignore[assignment]


class StrictYamlError(yaml.YAMLError):
    """YAML the strict loader refuses (an alias, a tag, too deep, a date with month 13); ``str()`` says
    which and where."""


_STR = "tag:yaml.org,2002:str"
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
_resolver = Resolver()
_END = object()  # the loop's "no value yet"


def _where(event: Any) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"


def _scalar(event: ScalarEvent) -> Any:
    if _NOT_TEXT.search(event.value):  # "\\0" or "\\ud800" in double quotes: binary, or no file can hold it
        raise StrictYamlError(f"a NUL or lone surrogate escape at {_where(event)}: not text")
    tag: str = _resolver.resolve(ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
    if tag == _STR:
        return event.value
    kind = tag.rsplit(":", 1)[-1]
    build = PLAIN_BUILDERS.get(tag)
    if build is None:  # the merge key "<<" and the value key "=" resolve to types we do not build
        raise StrictYamlError(f"{event.value[:40]!r} ({kind}) is not plain data at {_where(event)}")
    try:
        return build(ScalarNode(tag, event.value))
    except (ValueError, OverflowError) as exc:  # 2025-13-45, an int of 5,000 digits
        raise StrictYamlError(f"{event.value[:40]!r} is not a valid {kind} at {_where(event)}") from exc


def load(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The one YAML document in ``text`` as plain Python data (``None`` when empty).

    Raises ``yaml.YAMLError``: :class:`StrictYamlError` for what this loader refuses, PyYAML's own
    errors for text that is no YAML at all.
    """
    simple = load_subset(text)  # the common case, in one pass of line regexes
    if simple is not None:
        return simple
    parser = _Parser(text)
    try:
        return _build(parser, max_depth)
    finally:
        parser.dispose()


def _build(parser: Any, max_depth: int) -> Any:
    # stack of open collections; for a mapping, `keys` holds its pending key (or _END while none is read)
    stack: list[list[Any] | dict[Any, Any]] = []
    keys: list[Any] = []
    root: Any = _END
    documents = 0
    while True:
        event = parser.get_event()
        kind = type(event)
        if kind is AliasEvent:
            raise StrictYamlError(f"an alias (*{event.anchor}) at {_where(event)}: aliases are not accepted")
        if kind in (ScalarEvent, SequenceStartEvent, MappingStartEvent):
            if event.anchor is not None:
                raise StrictYamlError(f"an anchor (&{event.anchor}) at {_where(event)}: anchors are not accepted")
            if event.tag is not None:
                raise StrictYamlError(f"a tag ({event.tag}) at {_where(event)}: tags are not accepted")
        value: Any = _END
        if kind is ScalarEvent:
            value = _scalar(event)
        elif kind is SequenceStartEvent or kind is MappingStartEvent:
            if len(stack) >= max_depth:
                raise StrictYamlError(f"nesting deeper than {max_depth} levels at {_where(event)}")
            if stack and isinstance(stack[-1], dict) and keys[-1] is _END:
                raise StrictYamlError(f"a list or mapping used as a key at {_where(event)}")
            stack.append([] if kind is SequenceStartEvent else {})
            keys.append(_END)
            continue
        elif kind is SequenceEndEvent or kind is MappingEndEvent:
            value = stack.pop()
            keys.pop()
        elif kind is DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise StrictYamlError(f"more than one YAML document (a second starts at {_where(event)})")
            continue
        elif kind is StreamEndEvent:
            return None if root is _END else root
        else:  # StreamStartEvent, DocumentEndEvent
            assert kind in (StreamStartEvent, DocumentEndEvent), kind
            continue
        if not stack:
            root = value
            continue
        top = stack[-1]
        if isinstance(top, list):
            top.append(value)
        elif keys[-1] is _END:
            keys[-1] = value  # a scalar: hashable (a collection key was refused at its start)
        else:
            top[keys[-1]] = value
            keys[-1] = _END


# Characters libyaml's emitter writes differently from PyYAML's (escaped, or quoted otherwise): astral
# characters (emoji), lone surrogates, CR and NEL. A frontmatter holding one, or an empty key, is written
# by PyYAML's (tests/memory/handoffs/test_safe_yaml.py holds the two to the same bytes).
_C_DIFFERS = re.compile("[\r\x85\ud800-\udfff\U00010000-\U0010ffff]")


class _NoAliasFast(_FastDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # the same list twice is written twice: load() refuses aliases


class _NoAliasPython(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _strings_differ_in_c(value: Any) -> bool:
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            if _C_DIFFERS.search(v):
                return True
        elif isinstance(v, Mapping):
            if "" in v:
                return True  # libyaml writes an empty key as '': where PyYAML writes ? ''
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list | tuple):
            todo.extend(v)
    return False


def dump(data: Mapping[str, Any]) -> str:
    """``data`` as block-style YAML with sorted keys, unicode as it is, long lines unwrapped."""
    simple = dump_subset(data)  # the common case, without PyYAML's machinery
    if simple is not None:
        return simple
    dumper = _NoAliasPython if _strings_differ_in_c(data) else _NoAliasFast
    text: str = yaml.dump(
        data, Dumper=dumper, sort_keys=True, allow_unicode=True, default_flow_style=False, width=10_000
    )
    return text
