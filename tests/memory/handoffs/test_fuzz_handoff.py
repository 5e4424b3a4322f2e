"""Fuzzing the handoff reader (`from_markdown`: markdown with YAML frontmatter, from any tree that is imported).

Any text gives a Handoff or one HandoffFormatError: frontmatter generated key by key (good and bad values,
YAML's own hazards: aliases, tags, deep nests, merge keys, odd dates), bodies of headings and bullets, and
real handoffs as the writer writes them, damaged byte by byte. What is read must be writable again: the
export of an imported handoff reads back.
"""

from __future__ import annotations

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from memory.errors import HandoffFormatError
from memory.handoffs.format import from_markdown, to_markdown
from tests.fuzzing import fuzz_settings, json_values, mutated_bytes, records, shaped, texts
from tests.memory.handoffs.test_format import full_handoff

REAL = [
    to_markdown(full_handoff()),  # every field and a free section, as the writer writes them
    # eywa-mcp's layout: its own key names, a date without time, sections in the body only.
    "---\nid: abc\ntimestamp: 2024-03-05\nproject: [billing]\ntags: [a, b]\n---\n# Fixed the invoices\n\n"
    "## What happened\n- found the rounding bug\n- fixed it\n\n## Open threads\n- tests\n",
]
_HAZARDS = st.sampled_from(
    [
        "a: &x [1, 2]\nb: *x\n",
        "a: &a [*a]\n",
        "x: !!python/object:os.system ls\n",
        "duration_min: !!float nan\n",
        "date: !!timestamp not-a-date\n",
        "date: 2025-13-45\n",
        "date: 2025-06-01\n",
        "date: 9999-12-31T23:59:59-23:59\n",
        "<<: {a: 1}\n",
        "? [1, 2]\n: x\n",
        "deep: " + "[" * 200 + "]" * 200 + "\n",
        "substance: 1e400\n",
        "duration_min: .inf\n",
        "kind: [main]\n",
        "session_id: {a: 1}\n",
        "headline: |\n  two\n  lines\n",
        "\t bad indent\n",
        "%YAML 1.1\n---\n",
        "key: 'unclosed\n",
    ]
)
_FRONT = records(
    {"session_id": shaped(texts), "date": shaped(st.sampled_from(["2025-06-01T10:00:00+00:00", "", "2025-06-01"]))},
    {
        "headline": shaped(texts),
        "duration_min": shaped(st.one_of(st.floats(), st.integers(), texts)),
        "model": shaped(texts),
        "projects": shaped(st.lists(texts, max_size=3)),
        "keywords": shaped(st.lists(texts, max_size=3)),
        "substance": shaped(st.one_of(st.integers(), texts)),
        "kind": shaped(st.sampled_from(["main", "subagent", "codex", "x"])),
        "parent_id": shaped(texts),
        "source": shaped(texts),
        "what_happened": shaped(st.lists(texts, max_size=2)),
        "id": shaped(texts),
        "timestamp": shaped(texts),
        "extra": json_values,
    },
    max_extra=4,
)


def _yaml(front: dict[str, object]) -> str:
    try:
        return yaml.safe_dump(front, allow_unicode=True, sort_keys=False)
    except yaml.YAMLError:  # a value safe_dump will not write (half a surrogate pair): write its repr instead
        return "".join(f"{k!r}: {v!r}\n" for k, v in front.items())


_BODY_LINE = st.one_of(
    texts,
    st.sampled_from(["# Title", "## What happened", "## Insights", "## Notes", "- item", "  continued", "#", ""]),
    texts.map(lambda s: f"- {s}"),
    texts.map(lambda s: f"## {s}"),
)


@st.composite
def handoff_texts(draw: st.DrawFn) -> str:
    how = draw(st.integers(0, 3))
    if how == 0:
        raw = draw(st.sampled_from(REAL).flatmap(lambda t: mutated_bytes(t.encode())))
        return raw.decode("utf-8", "replace")  # import reads UTF-8; bytes that are not are refused before this
    front = _yaml(draw(shaped(_FRONT))) if how == 1 else draw(_HAZARDS)
    body = "\n".join(draw(st.lists(_BODY_LINE, max_size=6)))
    return f"---\n{front}---\n{body}\n"


@fuzz_settings()
@given(text=handoff_texts())
@example(text="---\n" + "a: &x [1]\n" * 3 + "b: [*x, *x, *x]\n---\n# t\n")
@example(text="---\nsession_id: s\ndate: ''\nheadline: h\nduration_min: .nan\n---\n")
@example(text='---\nsession_id: s\ndate: ""\nheadline: "\\0"\n---\n')  # a YAML escape to NUL: read, then refused
def test_any_handoff_text_gives_a_handoff_or_one_format_error(text: str) -> None:
    try:
        h = from_markdown(text)
    except HandoffFormatError:
        return
    for value in (h.session_id, h.headline, h.date, h.model, h.parent_id, h.source, *h.projects, *h.keywords):
        assert isinstance(value, str)
        value.encode("utf-8")  # stored in SQLite and written to a file
    again = from_markdown(to_markdown(h))  # an imported handoff can be exported and imported again
    assert again.session_id == h.session_id and again.headline == h.headline
