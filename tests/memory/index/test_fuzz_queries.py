"""Fuzzing `memory get --queries` lines: each line gets its results or an error line, and the command lives on.

FUZZ_EXAMPLES lines go through the command's own per-line step against a real memory (a few real transcripts
ingested into a SQLite file, handoffs extracted); a hundred whole query files then go through the command
itself, in-process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from memory.cli.main import _answer_query_line, memory_group
from memory.facade import Eywa
from tests.fuzzing import fuzz_settings, json_bytes, junk, mutated_bytes, records, shaped, texts
from tests.memory.conftest import ingested_home, offline_settings

_STAMPS = st.sampled_from(
    ["2026-01-01T00:00:00Z", "2025-06-03", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59", "yesterday"]
)
_QUERY_TEXT = st.one_of(
    texts,
    st.sampled_from(
        ["hello function", "on 3 June", "in May 2024", "2024-06-03", "9999-12-31", "0001-01-01", "on 31 February"]
    ),
)
_NUMBERS = st.one_of(st.integers(), st.floats(), st.sampled_from([0, -1, 10**400, 1e308]))
specs = records(
    {"query": shaped(_QUERY_TEXT)},
    {
        "project": shaped(st.sampled_from(["macupos", "Example Project", ""])),
        "as_of": shaped(_STAMPS),
        "days_back": shaped(_NUMBERS),
        "max": shaped(_NUMBERS),
    },
    max_extra=4,
)
_REAL = json.dumps({"query": "hello function", "as_of": "2026-01-01T00:00:00Z", "days_back": 10000, "max": 2})
query_lines = st.one_of(
    specs.map(lambda s: json_bytes(s).decode()),
    specs.map(lambda s: json_bytes(s).decode()),
    junk.map(lambda v: json_bytes(v).decode()),
    mutated_bytes(_REAL.encode()).map(lambda b: b.decode("utf-8", "replace")),  # the command reads with "replace"
    texts,
)


@pytest.fixture(scope="module")
def memory_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory with a few real sessions ingested and their handoffs extracted, so queries find something."""
    root = Path(tmp_path_factory.mktemp("queries"))
    names = ("simonw/sample_session.jsonl", "daaain_old/session_b.jsonl", "episodic_memory/tiny-conversation.jsonl")
    return ingested_home(root, names)


@pytest.fixture(scope="module")
def eywa(memory_home: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Eywa]]:
    loop = asyncio.new_event_loop()
    opened = loop.run_until_complete(Eywa.open(offline_settings(memory_home)))
    yield loop, opened
    loop.run_until_complete(opened.close())
    loop.close()


def _check(out: dict[str, Any], n: int) -> None:
    assert set(out) in ({"line", "error"}, {"query", "results"}), out
    if "error" in out:
        assert out["line"] == n and out["error"].startswith("invalid query line")
    else:
        assert len(out["results"]) <= 5
    json.dumps(out)  # what the command prints


@fuzz_settings()
@given(line=query_lines)
@example(line="[" * 100_000)  # the decoder's recursion
@example(line='{"query": "\\ud83d hello"}')  # half a surrogate pair: SQLite cannot take it
@example(line='{"query": "on 3 June", "as_of": "0001-01-01T00:00:00+01:00", "days_back": 1e308}')
def test_every_query_line_gets_results_or_an_error_line(
    eywa: tuple[asyncio.AbstractEventLoop, Eywa], line: str
) -> None:
    loop, opened = eywa
    _check(loop.run_until_complete(_answer_query_line(opened, 7, line, 5, True)), 7)


@fuzz_settings(100)
@given(lines=st.lists(query_lines.map(lambda s: s.replace("\n", " ").replace("\r", " ")), min_size=1, max_size=6))
def test_the_queries_command_answers_every_line_of_any_file(
    memory_home: Path, tmp_path: Path, lines: list[str]
) -> None:
    # 100 examples: each is a whole command run (the database opened and closed); the lines get 5,000 above.
    qfile = tmp_path / "q.jsonl"
    qfile.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    result = CliRunner().invoke(memory_group, ["get", "--queries", str(qfile)], obj=offline_settings(memory_home))
    assert result.exit_code == 0, result.output
    out = [json.loads(x) for x in result.output.splitlines()]
    answered = [n for n, line in enumerate(lines, 1) if line.strip()]
    assert len(out) == len(answered)
    for n, obj in zip(answered, out, strict=True):
        _check(obj, n)
