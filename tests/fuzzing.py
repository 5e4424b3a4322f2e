"""Shared parts of the fuzz tests: hypothesis settings sized for CI, JSON value strategies, byte mutations.

Every fuzz test runs derandomized (the same examples on every run, no example database): CI stays
reproducible, and a failure found once is found again by the next run. New ground is broken by
changing the strategies, not by luck. ``FUZZ_EXAMPLES`` is the count each parser gets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = [
    "FIXTURES",
    "FUZZ_EXAMPLES",
    "ROOT",
    "claude_fixture_files",
    "codex_fixture_files",
    "damaged_line",
    "fuzz_settings",
    "json_bytes",
    "json_values",
    "junk",
    "lines_of",
    "mutated_bytes",
    "mutated_json",
    "pick",
    "records",
    "shaped",
    "texts",
    "toml_text",
    "toml_value",
]

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
_DEEP = "\x00deep:"  # a junk string that json_bytes turns into a deep nest (json.dumps itself cannot write one)
_DEEP_JSON = re.compile(r'"\\u0000deep:(\d+)"')
FIXTURES = ROOT / "tests" / "fixtures"
FUZZ_EXAMPLES = 5000
_INF = float("inf")


def fuzz_settings(max_examples: int = FUZZ_EXAMPLES) -> settings:
    # MACUPOS_FUZZ_SCALE=0.05 runs a twentieth of every count: a quick local pass, never what CI runs.
    scale = float(os.environ.get("MACUPOS_FUZZ_SCALE", "1"))
    return settings(
        max_examples=max(1, round(max_examples * scale)),
        deadline=None,  # CI machines stall; a slow example is not a failure here
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),  # big generated inputs are the point
    )


# Text with what breaks naive code: controls, NULs, RTL and zero-width marks, astral emoji, a combining mark,
# lone surrogates (JSON can escape half a pair; UTF-8 cannot encode it), a BOM, non-ASCII digits, Tcl and
# JSON metacharacters. Drawn from a small alphabet: far cheaper to generate than lists of pieces.
_ODD_CHARS = list('ab Z0\x00\n\r\t\u202e\u200b\U0001f600\u0301\ud83d\udc00\ufeff²٣{}[]"\\$;#')
texts = st.one_of(
    st.text(max_size=10),
    st.text(st.sampled_from(_ODD_CHARS), max_size=10),
    st.sampled_from(["", " ", "null", "[]", "{}", "0", "-1", "1e400", "NaN", "\\", '"', "{{", "$x", "[cmd]"]),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: 2**80 does not fit SQLite or C longs
    st.floats(),  # NaN and infinities: Python's json writes and reads them
    texts,
)
# JSON values two levels deep, built by hand: st.recursive costs several times more per example.
_level1 = st.one_of(_scalars, st.lists(_scalars, max_size=3), st.dictionaries(texts, _scalars, max_size=3))
json_values: st.SearchStrategy[Any] = st.one_of(
    _scalars, _scalars, st.lists(_level1, max_size=3), st.dictionaries(texts, _level1, max_size=3)
)
# A value that is not what a field should hold: any JSON, a deep nest, or a long string.
junk: st.SearchStrategy[Any] = st.one_of(
    json_values,
    st.integers(min_value=1, max_value=3000).map(lambda n: f"{_DEEP}{n}"),  # json_bytes writes a nest this deep
    st.integers(min_value=1, max_value=200_000).map(lambda n: "x" * n),
)


def _deep_json(depth: int) -> str:
    """JSON text nested ``depth`` levels (lists and objects in turn): too deep for a recursive walk."""
    opens = "".join('{"k":' if i % 2 else "[" for i in range(depth))
    closes = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
    return opens + "0" + closes


def pick(items: Sequence[T]) -> st.SearchStrategy[T]:
    """One of ``items``, like sampled_from, but with a short repr: hypothesis shows a strategy's repr, and
    sampled_from's holds every item (whole fixture files)."""
    return st.integers(0, len(items) - 1).map(items.__getitem__)


def shaped(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the expected shape, sometimes junk: fields deep inside a line are reached often enough."""
    return st.one_of(strategy, strategy, strategy, junk)


@st.composite
def records(
    draw: st.DrawFn,
    core: dict[str, st.SearchStrategy[Any]],
    extra: dict[str, st.SearchStrategy[Any]],
    max_extra: int = 3,
) -> dict[str, Any]:
    """A JSON object with most ``core`` fields and a few ``extra`` ones: few draws per object, so thousands of
    examples stay cheap, yet every field is reached across them."""
    keys = [k for k in core if draw(st.integers(0, 3))]
    names = sorted(extra)
    if names:  # a count, then indexes: cheaper to draw than a unique list (a repeat just adds nothing)
        keys += dict.fromkeys(
            names[draw(st.integers(0, len(names) - 1))] for _ in range(draw(st.integers(0, max_extra)))
        )
    fields = core | extra
    return {k: draw(fields[k]) for k in dict.fromkeys(keys)}


def json_bytes(value: Any, *, ascii_only: bool = True) -> bytes:
    """One JSON text as bytes; a value with lone surrogates or NaN is written as Python's json writes it."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    text = _DEEP_JSON.sub(lambda m: _deep_json(int(m.group(1))), text)
    return text.encode("utf-8", "surrogatepass")


@st.composite
def mutated_bytes(draw: st.DrawFn, raw: bytes) -> bytes:
    """``raw`` damaged at the byte level: cut, spliced, flipped, NUL-padded or made invalid UTF-8."""
    if not raw:
        return draw(st.binary(max_size=20))
    at = draw(st.integers(min_value=0, max_value=len(raw)))
    how = draw(st.sampled_from(["cut", "insert", "flip", "delete", "nul", "bad-utf8", "newline", "double"]))
    if how == "cut":
        return raw[:at]
    if how == "insert":
        return raw[:at] + draw(st.binary(min_size=1, max_size=12)) + raw[at:]
    if how == "flip" and at < len(raw):
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    if how == "delete":
        end = draw(st.integers(min_value=at, max_value=len(raw)))
        return raw[:at] + raw[end:]
    if how == "nul":
        return raw[:at] + b"\x00" * draw(st.integers(1, 64)) + raw[at:]
    if how == "bad-utf8":
        return raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])) + raw[at:]
    if how == "newline":
        return raw[:at] + b"\n" + raw[at:]
    return raw + raw  # two values on one line


@st.composite
def mutated_json(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """``value`` with one place inside it replaced by junk, dropped, or retyped."""
    if isinstance(value, dict) and value and depth < 6 and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value, key=str)))
        out = dict(value)
        if draw(st.integers(0, 4)) == 0:
            del out[key]
        else:
            out[key] = draw(mutated_json(value[key], depth + 1))
        return out
    if isinstance(value, list) and value and depth < 6 and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        out_list = list(value)
        out_list[i] = draw(mutated_json(value[i], depth + 1))
        return out_list
    return draw(junk)


def damaged_line(raw: bytes) -> st.SearchStrategy[bytes]:
    """A real line, damaged in its bytes or in its JSON structure."""
    try:
        value = json.loads(raw)
    except ValueError:
        return mutated_bytes(raw)
    structural: st.SearchStrategy[bytes] = mutated_json(value).map(json_bytes)
    return st.one_of(mutated_bytes(raw), structural, structural)


def claude_fixture_files() -> list[Path]:
    """The real Claude Code transcripts in the repository (JSONL; the export and .meta.json files left out)."""
    return sorted(p for p in (FIXTURES / "transcripts").rglob("*.jsonl") if not p.name.startswith("rollout-"))


def codex_fixture_files() -> list[Path]:
    """The real Codex rollouts in the repository."""
    return sorted(
        {*ROOT.glob("tests/fixtures/**/rollout-*.jsonl"), *ROOT.glob("tests/memory/fixtures/**/rollout-*.jsonl")}
    )


def toml_value(value: Any) -> str:
    """A TOML value (inline tables for mappings); a string TOML cannot hold (half a surrogate pair, DEL) makes
    the document invalid, which is a case worth having too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value > 0 else "-inf") if value in (_INF, -_INF) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def toml_text(doc: dict[str, Any]) -> str:
    """A TOML document: each top-level mapping as a [table], anything else as a top-level key."""
    plain = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [
        f"[{json.dumps(k)}]\n" + "".join(f"{json.dumps(str(kk))} = {toml_value(vv)}\n" for kk, vv in v.items())
        for k, v in doc.items()
        if isinstance(v, dict)
    ]
    return "\n".join(plain) + "\n" + "\n".join(tables)


def lines_of(paths: list[Path]) -> list[bytes]:
    """Every non-empty line of the given files (the real fixtures the mutations start from)."""
    out: list[bytes] = []
    for path in paths:
        out.extend(line for line in path.read_bytes().splitlines() if line.strip())
    return out


def never_raises(fn: Callable[[], Any], allowed: tuple[type[BaseException], ...] = ()) -> Any:
    """Call ``fn``; an exception of an ``allowed`` type is returned, anything else propagates (the failure)."""
    try:
        return fn()
    except allowed as exc:
        return exc
