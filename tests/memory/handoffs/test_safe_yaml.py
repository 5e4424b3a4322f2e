"""Strict YAML for frontmatter: plain data loads exactly as PyYAML loads it; aliases, tags and depth are refused."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bench._handoff_tree import hostile_frontmatters
from memory.handoffs import safe_yaml
from memory.handoffs.yaml_subset import dump_subset, load_subset
from tests.fuzzing import fuzz_settings

DUMP_ARGS: dict[str, Any] = {"sort_keys": True, "allow_unicode": True, "default_flow_style": False, "width": 10_000}

PLAIN_DOCS = [
    'session_id: 9b1c\ndate: 2025-03-04\nduration: "1h 5m"\nheadline: "Ship BM25: index"\n'
    "projects: [sorbent, pratchett-os]\nkeywords: [bm25-search, eywa-handoff]\nsubstance: 2\n",
    "projects: macupos, eywa\ncustom_note:   keep me\n",
    "a: 1\nb: 1.5\nc: .inf\nd: yes\ne: ~\nf: 2025-01-01 10:00:00\ng: 0x1F\nh: 1_000\ni: 1:30\nj: ''\n",
    "list:\n- a\n- 'b c'\n-\n- \"d\"\nindented:\n  - x\n  - 2\nempty: []\nnothing:\n",
    "# a comment\nkey: value # trailing comment\nweird: a#b\ncolon: a:b\nbrackets: x[1], y{2}\n",
    "multi: >\n  folded\n  text\nblock: |\n  kept\n  lines\nnested:\n  inner: [1, {a: b}]\n",
    "quoted: 'it''s'\nescaped: \"tab\\there \\u00e9\"\nflow: ['a, b', \"c\", d e]\n",
    "yes: 1\nnull: 2\n'3': 3\n? complex\n: value\n",
    "emoji: 🚀 launch\nnbsp: a\u00a0b\nrtl: \u202eabc\n",
]


@pytest.mark.parametrize("text", PLAIN_DOCS)
def test_plain_data_loads_exactly_as_pyyaml_loads_it(text: str) -> None:
    assert safe_yaml.load(text) == yaml.safe_load(text)


@pytest.mark.parametrize(("name", "front"), sorted(hostile_frontmatters().items()))
def test_hostile_frontmatter_is_refused_as_yaml_error(name: str, front: str) -> None:
    if name == "spaces-duration":
        assert safe_yaml.load(front)["duration"].endswith("x")  # valid YAML: handoff_format refuses it
        return
    with pytest.raises(yaml.YAMLError):
        safe_yaml.load(front)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: &x 1\nb: *x\n", "anchor"),
        ("a: *x\n", "alias"),  # an alias of nothing: PyYAML's own error would do, but it is refused first
        ("a: !!float 1.5\n", "tag"),
        ("a: !!timestamp 2025-01-01\n", "tag"),
        ("a: !!python/object/apply:os.system [id]\n", "tag"),
        ("a: !local x\n", "tag"),
        ("a: !!str 1\n", "tag"),
        ("<<: {a: 1}\n", "merge"),
        ("a: 2025-13-45\n", "not a valid timestamp"),
        ("a: " + "9" * 5000 + "\n", "not a valid int"),
        ("a: 1\n---\nb: 2\n", "more than one"),
        ("a: " + "[" * 17 + "]" * 17 + "\n", "deeper than 16"),
        ("a: " + "[" * 50_000 + "]" * 50_000 + "\n", "deeper than 16|maximum nesting depth"),  # libyaml: 1,000
        ("? [a, b]\n: c\n", "used as a key"),
    ],
)
def test_what_the_strict_loader_refuses_is_named(text: str, why: str) -> None:
    with pytest.raises(yaml.YAMLError, match=why):
        safe_yaml.load(text)


def test_sixteen_levels_load() -> None:
    assert safe_yaml.load("a: " + "[" * 15 + "1" + "]" * 15) == {"a": [[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]}


def test_an_alias_bomb_is_refused_without_expanding() -> None:
    # Nine levels of nine: 387 million strings if anything expanded it.
    with pytest.raises(safe_yaml.StrictYamlError, match="anchor"):
        safe_yaml.load(hostile_frontmatters()["laughs-in-keywords"])


# -- dumping: byte for byte what PyYAML writes ------------------------------------------------------------

_odd = st.text(
    st.sampled_from(list("ab Z09:#-'\"{}[],&*!|>%@`?=~.\n\t\r é\u00a0€🚀\x85\u2028\ufeff\x07_")), max_size=12
)
_words = st.sampled_from(["", "yes", "No", "null", "~", "1", "-1", "1.5", "1e3", "0x1F", "1:30", "2025-01-02",
                          "2025-01-02 10:00:00", ".inf", ".nan", "<<", "=", "---", "...", "- a", "a: b", "a #b",
                          "'q'", '"q"', "a" * 200])  # fmt: skip
_strings = st.one_of(_odd, _words, st.text(max_size=8))
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=False), _strings)
_values = st.one_of(
    _scalars, st.lists(_scalars, max_size=4), st.dates(), st.dictionaries(_strings, _scalars, max_size=3)
)
_mappings = st.dictionaries(_strings, _values, min_size=1, max_size=6)


@fuzz_settings(1000)
@given(_mappings)
def test_dump_writes_what_pyyaml_writes(data: dict[str, Any]) -> None:
    assert safe_yaml.dump(data) == yaml.dump(data, Dumper=yaml.SafeDumper, **DUMP_ARGS)


@fuzz_settings(1000)
@given(_mappings)
def test_what_dump_writes_loads_back(data: dict[str, Any]) -> None:
    # PyYAML folds a line separator (\x85, \u2028) inside a quoted string into a space; the subset never
    # writes one, and what it writes reads back exactly.
    if "\\x00" in repr(data):  # written as "\0"; read back, a NUL is refused: binary, not text
        with pytest.raises(safe_yaml.StrictYamlError, match="NUL"):
            safe_yaml.load(safe_yaml.dump(data))
    elif dump_subset(data) is not None or not any(c in repr(data) for c in ("\\x85", "\\u2028")):
        assert safe_yaml.load(safe_yaml.dump(data)) == data


def test_the_fast_paths_take_the_common_frontmatter() -> None:
    front = {"session_id": "s1", "date": "2025-01-02", "headline": "Ship it: now", "keywords": ["a-b", "c"]}
    text = dump_subset(front)
    assert text is not None and load_subset(text) == front
    assert dump_subset({"when": dt.date(2025, 1, 2)}) is None  # dates, nested data: PyYAML's dumper
    assert load_subset(PLAIN_DOCS[0]) == yaml.safe_load(PLAIN_DOCS[0])


# -- loading the subset: equal to PyYAML wherever it answers ------------------------------------------------

_line_values = st.one_of(
    _strings,
    _strings.map(lambda s: "'" + s.replace("'", "''") + "'"),
    _strings.map(lambda s: f'"{s}"'),
    st.lists(_strings, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
)
_lines = st.one_of(
    st.tuples(_strings, _line_values).map(lambda kv: f"{kv[0]}: {kv[1]}"),
    st.tuples(st.sampled_from(["k", "key_1", "yes", "a-b"]), _line_values).map(lambda kv: f"{kv[0]}: {kv[1]}"),
    _line_values.map(lambda v: f"- {v}"),
    _line_values.map(lambda v: f"  - {v}"),
    st.sampled_from(["", "# note", "key:", "list:", "  indented: x", "-", "---", "..."]),
)


@fuzz_settings(2000)
@given(st.lists(_lines, max_size=8).map("\n".join))
def test_the_subset_loader_agrees_with_pyyaml_wherever_it_answers(text: str) -> None:
    fast = load_subset(text)
    if fast is None:
        return
    assert fast == yaml.safe_load(text)
