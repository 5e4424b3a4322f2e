from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from memory.errors import HandoffFormatError
from memory.handoffs.format import (
    SECTIONS_KEY,
    from_markdown,
    normalize_keyword,
    normalized,
    redacted,
    to_markdown,
)
from memory.models import Handoff, SessionKind
from memory.redact.redactor import Redactor
from tests.fuzzing import fuzz_settings


def full_handoff() -> Handoff:
    return Handoff(
        session_id="3f2a-77",
        date="2025-06-01T10:00:00+00:00",
        headline="Teach the parser sidechains: ünïcode — and colons",
        duration_min=42.5,
        model="claude-opus-4-5",
        projects=["macupos", "eywa-mcp"],
        keywords=["parse-claude-file", "sidechain", "bm25-search"],
        substance=2,
        what_happened=["Split inline sidechains", "Kept two lines\nin one item\n\n  with an indented third"],
        insights=["**wrong belief** -> **truth**"],
        key_files=["memory/sources/claude.py", "tests/memory/test_transcript.py"],
        open_threads=["golden tests for the loglines form"],
        kind=SessionKind.SUBAGENT,
        parent_id="parent-1",
        source="llm",
        extra={"reviewer": "nick", "tags": [1, 2], SECTIONS_KEY: {"Notes": "free text\n\nsecond paragraph"}},
    )


def test_round_trip_is_exact_for_a_full_handoff() -> None:
    h = full_handoff()
    assert from_markdown(to_markdown(h)) == h


def test_round_trip_is_exact_for_a_minimal_handoff_and_omits_empty_sections() -> None:
    h = Handoff(session_id="s1", date="2025-01-02T03:04:05+00:00", headline="Nothing much happened here")
    text = to_markdown(h)
    assert "## " not in text
    assert from_markdown(text) == h


def test_output_is_deterministic_with_sorted_frontmatter() -> None:
    h = full_handoff()
    other = full_handoff()
    other.extra = dict(reversed(list(h.extra.items())))
    assert to_markdown(h) == to_markdown(other)
    front = to_markdown(h).split("---\n")[1]
    keys = [line.split(":")[0] for line in front.splitlines() if line and not line.startswith(("-", " "))]
    assert keys == sorted(keys)


def test_body_has_headline_and_sections_in_fixed_order() -> None:
    text = to_markdown(full_handoff())
    body = text.split("---\n", 2)[2]
    titles = [line for line in body.splitlines() if line.startswith("#")]
    assert titles == [
        "# Teach the parser sidechains: ünïcode — and colons",
        "## What happened",
        "## Insights",
        "## Key files",
        "## Open threads",
        "## Notes",
    ]
    assert "- memory/sources/claude.py\n" in body


EYWA_FILE = """---
session_id: 9b1c2d3e-aaaa-bbbb-cccc-1234567890ab
date: 2025-03-04
duration: "1h 5m"
model: claude-sonnet-4-5
headline: "Ship BM25 search: index rebuild"
projects: [sorbent, pratchett-os]
keywords: [bm25-search, eywa-handoff, sorbent-benchmark-v4]
substance: 2
---

# Ship BM25 search: index rebuild

## What Happened
- Rebuilt the BM25 index after the schema change
- Benchmarked against v3
  (numbers in the notes)

## Insights
**Stemming** -- hurts recall on identifiers, so it is off.

## Key Files
- sorbent/index.py
- bench/run.py

## Open Threads
None.
"""


def test_eywa_mcp_file_is_adopted() -> None:
    h = from_markdown(EYWA_FILE)
    assert h.session_id == "9b1c2d3e-aaaa-bbbb-cccc-1234567890ab"
    assert h.date == "2025-03-04"
    assert h.duration_min == 65.0
    assert h.headline == "Ship BM25 search: index rebuild"
    assert h.projects == ["sorbent", "pratchett-os"]
    assert h.keywords == ["bm25-search", "eywa-handoff", "sorbent-benchmark-v4"]
    assert h.substance == 2
    assert h.what_happened == [
        "Rebuilt the BM25 index after the schema change",
        "Benchmarked against v3\n(numbers in the notes)",
    ]
    assert h.insights == ["**Stemming** -- hurts recall on identifiers, so it is off."]
    assert h.key_files == ["sorbent/index.py", "bench/run.py"]
    assert h.open_threads == []
    assert h.source == "import"
    assert h.kind is SessionKind.MAIN
    assert h.extra == {}
    # Adopted once, it is ours: exact from then on.
    assert from_markdown(to_markdown(h)) == h


def test_eywa_substance_zero_placeholder_gives_empty_lists() -> None:
    text = "---\nsession_id: abcd\ndate: 2025-03-04\nheadline: Said hello only\nsubstance: 0\n---\n\n"
    text += "# Said hello only\n\nNo meaningful work.\n"
    h = from_markdown(text)
    assert (h.substance, h.what_happened, h.open_threads) == (0, [], [])


def test_synonym_keys_and_sections_map_to_our_fields() -> None:
    text = """---
session_id: s-syn
date: 2025-03-04T10:00:00+02:00
duration_minutes: 12
headline: Decide the retry policy
open_loops: [wire the retry into ingest]
---

## Decisions
- one retry, then the fallback

## Files
- memory/handoffs/model_written.py
"""
    h = from_markdown(text)
    assert h.duration_min == 12.0
    assert h.date == "2025-03-04T10:00:00+02:00"
    assert h.open_threads == ["wire the retry into ingest"]
    assert h.insights == ["one retry, then the fallback"]
    assert h.key_files == ["memory/handoffs/model_written.py"]
    assert h.extra == {}


def test_hand_edited_file_loads_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "handoffs" / "2025" / "07" / "09" / "hand-made.md"
    text = """
---
projects: macupos, eywa
custom_note:   keep me
---
#   Fixed the   flaky hook test

##   what happened
*   made the hook test wait on the file, not a sleep

*  documented why
"""
    h = from_markdown(text, path=path)
    assert h.session_id == "hand-made"
    assert h.date == "2025-07-09"
    assert h.headline == "Fixed the flaky hook test"
    assert h.projects == ["macupos", "eywa"]
    assert h.what_happened == ["made the hook test wait on the file, not a sleep", "documented why"]
    assert (h.substance, h.duration_min, h.model, h.kind, h.source) == (1, 0.0, "", SessionKind.MAIN, "import")
    assert h.extra == {"custom_note": "keep me"}


def test_missing_date_uses_the_given_default() -> None:
    h = from_markdown("---\nsession_id: x1\nheadline: Some work was done\n---\n", default_date="2024-12-31")
    assert h.date == "2024-12-31"


def test_unknown_frontmatter_keys_are_written_back() -> None:
    h = from_markdown("---\nsession_id: x1\ndate: 2025-01-01\nheadline: Keep odd keys\nreview: kept\nscore: 3\n---\n")
    assert h.extra == {"review": "kept", "score": 3}
    front = yaml.safe_load(to_markdown(h).split("---\n")[1])
    assert front["review"] == "kept" and front["score"] == 3


def test_unquoted_yaml_timestamps_become_iso_strings() -> None:
    h = from_markdown("---\nsession_id: x1\ndate: 2025-01-01 10:00:00\nheadline: Timestamps\nseen: 2025-01-02\n---\n")
    assert h.date == "2025-01-01T10:00:00+00:00"
    assert h.extra == {"seen": dt.date(2025, 1, 2)}
    assert from_markdown(to_markdown(h)) == h


@pytest.mark.parametrize(
    "text",
    [
        "",
        "just some notes, no frontmatter\n",
        "---\nsession_id: [unclosed\n---\n",
        "---\n- a\n- list\n---\n",
        "---\nsession_id: a\ndate: 2025-01-01\nheadline: x y\nsubstance: 5\n---\n",
        "---\nsession_id: a\ndate: 2025-01-01\nheadline: x y\nsubstance: lots\n---\n",
        "---\nsession_id: a\ndate: 2025-01-01\nheadline: x y\nduration: forever\n---\n",
        "---\nsession_id: a\ndate: 2025-01-01\nheadline: x y\nkind: robot\n---\n",
        "---\nsession_id: a\ndate: 2025-01-01\n---\n\nno title\n",
        "---\nsession_id: a\nheadline: no date anywhere\n---\n",
        "---\nsession_id: a\x00\x00\n---\n",
    ],
)
def test_junk_raises_handoff_format_error(text: str) -> None:
    with pytest.raises(HandoffFormatError):
        from_markdown(text)


def test_missing_session_id_without_a_path_is_an_error() -> None:
    with pytest.raises(HandoffFormatError, match="session_id"):
        from_markdown("---\ndate: 2025-01-01\nheadline: Orphan file\n---\n")


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("parseClaudeFile", "parse-claude-file"),
        ("BM25 Search", "bm25-search"),
        ("HTTPServer_v2", "http-server-v2"),
        ("  --eywa_handoff--  ", "eywa-handoff"),
        ("Telegram Voice-Notes!", "telegram-voice-notes"),
    ],
)
def test_normalize_keyword_is_lowercase_hyphenated_and_idempotent(raw: str, want: str) -> None:
    assert normalize_keyword(raw) == want
    assert normalize_keyword(want) == want


def test_free_text_under_the_title_is_kept_and_written_back() -> None:
    text = (
        "---\nsession_id: hand-1\ndate: '2026-11-20T10:00:00+00:00'\nheadline: Hand edited\n---\n\n"
        "# Hand edited\n\nFree paragraph about the quetzal migration plan.\n\n## Notes\n\n- the ocelot flag\n"
    )
    h = from_markdown(text)
    out = to_markdown(h)
    assert "Free paragraph about the quetzal migration plan." in out and "the ocelot flag" in out
    assert out.index("# Hand edited") < out.index("quetzal") < out.index("## Notes")
    assert from_markdown(out) == h and to_markdown(from_markdown(out)) == out
    assert "_preamble" not in yaml.safe_load(out.split("---\n")[1])  # body text, not frontmatter


def test_a_field_redacted_to_a_marker_reads_back_as_that_text() -> None:
    # Unquoted, "[REDACTED:openai-key]" is a YAML list: fields are redacted before the YAML is written.
    def redact(value: object) -> object:
        if isinstance(value, str):
            return "[REDACTED:openai-key]" if value.startswith("sk-") else value
        if isinstance(value, list):
            return [redact(v) for v in value]
        if isinstance(value, dict):
            return {k: redact(v) for k, v in value.items()}
        return value

    h = Handoff(
        session_id="s",
        date="2026-01-01T00:00:00+00:00",
        headline="sk-proj-abc",
        keywords=["sk-proj-abc", "deploy"],
        model="sk-ant-x",
        extra={"owner": "sk-live"},
    )
    back = from_markdown(to_markdown(redacted(h, redact)))
    assert back.keywords == ["[REDACTED:openai-key]", "deploy"]
    assert (back.headline, back.model, back.extra) == ("[REDACTED:openai-key]",) * 2 + (
        {"owner": "[REDACTED:openai-key]"},
    )
    assert back.session_id == "s"


# -- hostile and odd input ----------------------------------------------------------------------------------


def test_a_duration_of_thousands_of_spaces_is_refused_at_once() -> None:
    # Three `\s*` in a row made the duration regex backtrack cubically: 67 s for 2,000 spaces and a letter.
    text = '---\nsession_id: a\ndate: 2025-01-01\nheadline: x y\nduration: "' + " " * 100_000 + 'x"\n---\n'
    with pytest.raises(HandoffFormatError, match="invalid duration") as caught:
        from_markdown(text)
    assert len(str(caught.value)) < 300  # the message quotes the value, cut short


@pytest.mark.parametrize(
    ("front", "why"),
    [
        ("keywords: &k [a, b]\nprojects: *k\n", "anchor"),
        ("duration: !!float lots\n", "tag"),
        ("date: !!timestamp yesterday\n", "tag"),
        ("headline: !!python/object/apply:os.system [id]\n", "tag"),
        ("x: " + "[" * 50_000 + "]" * 50_000 + "\n", "nesting"),
        ("date: 2026-13-45\n", "not a valid timestamp"),
    ],
)
def test_refused_yaml_is_a_handoff_format_error(front: str, why: str) -> None:
    text = f"---\nsession_id: a\ndate: 2025-01-01\nheadline: x y\n{front}---\n"
    with pytest.raises(HandoffFormatError, match=why):
        from_markdown(text)


def test_emoji_and_line_separators_are_written_as_pyyaml_writes_them() -> None:
    h = Handoff(session_id="s", date="2025-01-01", headline="🚀 Launch day", keywords=["🚀", "a\u2028b"])
    front = to_markdown(h).split("---\n")[1]
    assert "headline: 🚀 Launch day\n" in front  # libyaml's emitter would write "\U0001F680"
    assert front == yaml.safe_dump(yaml.safe_load(front), sort_keys=True, allow_unicode=True, width=10_000)


# -- normalized(): what import stores, parsed once ------------------------------------------------------------


def _the_long_way(h: Handoff, redactor: Redactor) -> tuple[Handoff, str]:
    """What import did before: redact the fields, write, redact the text, parse the whole file again."""
    markdown = redactor(to_markdown(redacted(h, redactor.redact_obj)))
    return from_markdown(markdown), markdown


NORMALIZE_CASES = [
    full_handoff(),
    from_markdown(EYWA_FILE),
    Handoff(session_id="s", date="2025-01-01", headline="🚀 emoji: PyYAML's dumper", keywords=["a\u2028b"]),
    Handoff(session_id="s", date="", headline="key sk-proj-" + "a1B2" * 12, model="x", extra={"api_key": "hunter2!!x"}),
    Handoff(
        session_id="s",
        date="2025-01-01T10:00:00+02:00",
        headline="lists from frontmatter",
        what_happened=["a  \ntrailing", "   \n", "x\n## not a section\ny", "None"],
        extra={"decisions": ["d"], "Files": ["f"], "files": ["g"], "_sections": "odd", "n": float("inf")},
    ),
    # Every item one plain line (the body is not read again), beside what still changes on reading back:
    # frontmatter synonyms of empty sections, bullets inside items, placeholders, a line separator.
    Handoff(
        session_id="s",
        date="2025-01-01",
        headline="  two   spaces\tand a tab  ",
        what_happened=["- a dash", "1. numbered", "* star", "## heading-like", "# title-like"],
        key_files=["a.py"],
        extra={"decisions": ["from the frontmatter"], "open_loops": "one\ntwo", "title": "t"},
    ),
    *(
        Handoff(session_id="s", date="2025-01-01", headline="h", insights=["plain", item])
        for item in ("None.", "n/a", " padded ", "x\u2028y", "\x85", "a\rb", "two\nlines", "")
    ),
    # A secret beside its name in one field, and one split over two: each field is redacted on its own.
    *(
        Handoff(session_id="s", date="2025-01-01", headline="the tokenizer", keywords=["key-files"], open_threads=t)
        for t in (["set DB_PASSWORD=hunter2x9 again"], ["machine db.example.com login me", "password hunter2x9"])
    ),
]


@pytest.mark.parametrize("h", NORMALIZE_CASES)
def test_normalized_stores_what_parsing_the_written_file_again_gives(h: Handoff) -> None:
    redactor = Redactor(["owner-secret-1"])
    assert normalized(h, redactor) == _the_long_way(h, redactor)


_texts = st.text(st.sampled_from(list("ab Z0:#-'\"[],\n é🚀\u2028_sk")), max_size=12)
_handoffs = st.builds(
    Handoff,
    session_id=_texts.filter(str.strip),
    date=st.sampled_from(["", "2025-01-01", "2025-01-01T10:00:00+00:00"]),
    headline=_texts.filter(str.strip),
    model=_texts,
    projects=st.lists(_texts, max_size=3),
    keywords=st.lists(_texts, max_size=3),
    what_happened=st.lists(_texts, max_size=3),
    insights=st.lists(_texts, max_size=2),
    key_files=st.lists(_texts, max_size=2),
    open_threads=st.lists(_texts, max_size=2),
    extra=st.dictionaries(
        st.one_of(
            _texts.filter(lambda k: k.strip() and k not in ("_sections", "_preamble")),
            st.sampled_from(["decisions", "files", "open_loops", "tags", "title", "id", "project"]),
        ),
        st.one_of(_texts, st.lists(_texts, max_size=2)),
        max_size=3,
    ),
)


@fuzz_settings(1000)
@given(_handoffs)
def test_normalized_equals_the_long_way_on_generated_handoffs(h: Handoff) -> None:
    redactor = Redactor()
    try:
        expected = _the_long_way(h, redactor)
    except HandoffFormatError:
        with pytest.raises(HandoffFormatError):
            normalized(h, redactor)
        return
    assert normalized(h, redactor) == expected
