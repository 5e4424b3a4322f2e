"""Fuzzing the snapshot parser (``memory facts load``): any text is entries or one FactsError naming a line.

Lines are generated word by word (remember / link / other commands, quoted or raw words, a ``;#`` metadata
comment with good and bad pairs) or are real exported lines damaged byte by byte. The parser gets
FUZZ_EXAMPLES texts; a real FactsApi then loads a few hundred of them, as the command does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memory.facts.api import FactsApi
from memory.facts.model import FactsError
from memory.facts.snapshot import parse_snapshot
from memory.facts.tclwords import format_list
from tests.fuzzing import fuzz_settings, mutated_bytes, texts

from .conftest import T0, open_api

# Lines as `macupos memory facts export` writes them: the seeds of the byte-level damage.
EXPORTED = [
    "remember editor user Fact predicate favorite-editor object Helix confidence 0.9 ;# created "
    "2026-01-01T00:00:00.000Z seen 2026-01-04T00:00:00.000Z access 2 from mcp",
    'remember tricky user Fact predicate note object "a \\"quoted\\" \\$value \\[with\\] \\{braces\\} \\\\ and\\n'
    'newline — 柯基犬" confidence 1 ;# created 2026-01-01T00:00:00.000Z',
    "remember prefs user UserPreference code_style black active_project macupos avoid_patterns {} ;# created "
    "2026-01-01T00:00:00.000Z clock 2026-01-02T00:00:00.000Z state Dormant marked 2026-03-01T00:00:00.000Z",
    "link jordan user owned-by 0.8 ;# created 2026-01-01T00:00:00.000Z",
    "# Macupos structured facts: a replayable snapshot (one memory per line, sorted by id).",
]
_ISO = st.sampled_from(
    ["2026-01-01T00:00:00.000Z", "2026-01-01", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59", "x", ""]
)
_META_VALUE = st.one_of(_ISO, texts, st.sampled_from(["2", "²", "٣", "99999999999999999999999", "-1", "Active"]))
_meta = st.lists(
    st.tuples(st.sampled_from(["created", "clock", "seen", "marked", "access", "state", "from", "x"]), _META_VALUE),
    max_size=3,
).map(lambda pairs: [w for pair in pairs for w in pair])
_words = st.lists(
    st.one_of(texts, st.sampled_from(["user", "Fact", "predicate", "object", "Relationship"])), max_size=7
)
_ops = st.sampled_from(["remember", "link", "recall", "forget", "", "#x"])


@st.composite
def _generated_line(draw: st.DrawFn) -> str:
    words = [draw(_ops), *draw(_words)]
    # Words quoted the way export writes them, or pasted raw (unbalanced braces, $, [ and all).
    line = format_list(words) if draw(st.booleans()) else " ".join(words)
    if draw(st.booleans()):
        meta = draw(_meta)
        line += draw(st.sampled_from([" ;# ", ";#", " ; # ", " ;"])) + (
            format_list(meta) if draw(st.booleans()) else " ".join(meta)
        )
    return line


_damaged_export = (
    st.sampled_from(EXPORTED)
    .flatmap(lambda s: mutated_bytes(s.encode()))
    .map(
        lambda b: b.decode("utf-8", "replace")  # load reads UTF-8; undecodable files stop before the parser
    )
)
snapshots = st.lists(st.one_of(_generated_line(), _damaged_export, texts), min_size=1, max_size=4).map("\n".join)


@fuzz_settings()
@given(text=snapshots)
@example(text='remember a user Fact predicate p object o ;# from "unclosed')  # the TclSyntaxError
@example(text="remember a user Fact predicate p object o ;# access ²")  # a digit int() refuses
@example(text="remember a user Fact predicate p object o ;# created {")
@example(text="link jordan user owned-by 0.8 ;# created 2")  # a bad time: the error names its line
@example(text="remember \\ud83d user Fact predicate p object o")  # an escape to half a surrogate pair
def test_snapshot_parser_gives_entries_or_a_facts_error(text: str) -> None:
    try:
        entries = parse_snapshot(text)
    except FactsError as exc:
        assert str(exc).startswith("line "), "the error names the line"
        return
    for e in entries:
        assert e.op in ("remember", "link")
        assert (len(e.words) >= 3 and len(e.words) % 2 == 1) if e.op == "remember" else len(e.words) in (3, 4)
        assert all(isinstance(v, int | str) for v in e.meta.values())


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[asyncio.AbstractEventLoop, FactsApi]]:
    """One real FactsApi (SQLite, event log, snapshot) shared by the examples: loads pile up as they would."""
    loop = asyncio.new_event_loop()
    api = loop.run_until_complete(open_api(Path(tmp_path_factory.mktemp("facts")) / "home"))
    yield loop, api
    loop.run_until_complete(api.close())
    loop.close()


@fuzz_settings(400)
@given(text=snapshots)
@example(text='remember "\\ud83d" "" ""')  # SQLite cannot store a lone surrogate
def test_loading_any_snapshot_reports_lines_or_a_facts_error(
    loader: tuple[asyncio.AbstractEventLoop, FactsApi], text: str
) -> None:
    # 400 examples: each is a real load (a transaction, an event per line); the parser itself gets 5,000 above.
    loop, api = loader
    try:
        report = loop.run_until_complete(api.load_snapshot(text, now=T0))
    except FactsError:
        return
    assert all(1 <= line <= len(text.splitlines()) for line, _ in report.rejected)
