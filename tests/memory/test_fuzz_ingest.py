"""Damaged real transcripts through a real ingest into a real SQLite file: every intact line is still stored,
and one poisoned file never takes the rest of a run down with it.

A damaged file is a real fixture (Claude Code or Codex) with one to three lines cut, garbled, retyped or
NUL-padded, plus lines glued together and garbage lines put in. The probe for "stored" is each intact
user or assistant text line of the undamaged parse: its first line must be in the markdown the run stored.
These examples are full ingests (a database per example, extraction included), so they are counted in
hundreds, not thousands: the thousands of per-line examples are in test_fuzz_transcripts.py.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memory.facade import Eywa
from memory.ingest import IngestReport
from memory.models import BlockKind, Transcript
from memory.redact.redactor import Redactor
from memory.settings import MemorySettings
from memory.sources.claude import parse_claude_file
from memory.sources.codex import parse_codex_file
from tests.fuzzing import FIXTURES, claude_fixture_files, codex_fixture_files, damaged_line, fuzz_settings, pick

_HEAD_LINES = 80  # a long fixture is fuzzed by its head: a full ingest per example must stay cheap


@dataclass(frozen=True)
class _Fixture:
    name: str  # the path it is written to, relative to the example's folder
    lines: tuple[bytes, ...]
    codex: bool


def _fixtures() -> list[_Fixture]:
    out = []
    for path in claude_fixture_files():
        rel = path.relative_to(FIXTURES / "transcripts")
        lines = tuple(path.read_bytes().splitlines()[:_HEAD_LINES])
        out.append(_Fixture(str(rel), lines, codex=False))
    for path in codex_fixture_files():
        out.append(_Fixture(path.name, tuple(path.read_bytes().splitlines()), codex=True))
    return out


FIXTURE_FILES = _fixtures()
REDACTOR = Redactor(())


def _parse(path: Path, codex: bool) -> list[Transcript]:
    return [parse_codex_file(path, redact=REDACTOR)] if codex else parse_claude_file(path, redact=REDACTOR)


@cache
def _probes(fixture: _Fixture, root: Path) -> tuple[tuple[int, str], ...]:
    """(line number, the first line of its text) for every user or assistant text the intact file stores."""
    path = root / "intact" / fixture.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(fixture.lines) + b"\n")
    out = []
    for t in _parse(path, fixture.codex):
        for e in t.entries:
            if e.role not in ("user", "assistant") or e.is_meta:
                continue
            for b in e.blocks:
                if b.kind not in (BlockKind.TEXT, BlockKind.THINKING):
                    continue
                lines = [x.rstrip() for x in b.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
                first = next((x.strip() for x in lines if x.strip()), "")
                if len(first) >= 8:
                    out.append((e.line_no, first[:60].rstrip()))
    return tuple(out)


@dataclass
class _Damaged:
    fixture: _Fixture
    content: bytes
    damaged: frozenset[int]  # 1-based numbers of the original lines that were damaged


@st.composite
def damaged_files(draw: st.DrawFn) -> _Damaged:
    fixture = draw(pick(FIXTURE_FILES))
    n = len(fixture.lines)
    hits = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    glue = set(draw(st.lists(st.integers(0, n - 1), max_size=2)))  # no newline after these lines
    garbage = set(draw(st.lists(st.integers(0, n - 1), max_size=2)))  # a garbage line after these
    out: list[bytes] = []
    for i, line in enumerate(fixture.lines):
        chunk = draw(damaged_line(line)).replace(b"\n", b" ") if i in hits else line
        if i in garbage:
            chunk += b"\n" + draw(st.binary(max_size=30)).replace(b"\n", b"")
        glued = i in glue and i not in hits and i not in garbage and i + 1 not in hits
        out.append(chunk + (b"" if glued else b"\n"))
    return _Damaged(fixture, b"".join(out), frozenset(i + 1 for i in hits))


def _settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


async def _stored_markdown(eywa: Eywa) -> str:
    async with eywa.db.conn.execute("SELECT markdown FROM sessions") as cur:
        return "\n".join(str(r[0]) for r in await cur.fetchall())


_counter = iter(range(1_000_000))


@fuzz_settings(200)
@given(case=damaged_files())
def test_a_damaged_transcript_still_stores_every_intact_line(tmp_path: Path, case: _Damaged) -> None:
    # 200 examples, each a whole ingest into its own database (extraction included): about 8 per fixture file.
    run = tmp_path / f"run{next(_counter)}"
    path = run / "src" / case.fixture.name
    path.parent.mkdir(parents=True)
    path.write_bytes(case.content)
    expected = [text for line_no, text in _probes(case.fixture, tmp_path) if line_no not in case.damaged]

    async def main() -> tuple[str, IngestReport]:
        eywa = await Eywa.open(_settings(run / "home"))
        try:
            report = await eywa.ingest([path], use_llm=False)
            return await _stored_markdown(eywa), report
        finally:
            await eywa.close()

    stored, report = asyncio.run(main())
    assert not report.unreadable, report.unreadable
    lost = [text for text in expected if text not in stored]
    assert not lost, f"intact lines not stored: {lost[:3]}"


def test_one_poisoned_rollout_leaves_the_rest_of_the_run_alone(tmp_path: Path) -> None:
    src = tmp_path / "src"
    claude = [p for p in claude_fixture_files() if p.stat().st_size < 50_000]
    for p in claude:
        dest = src / "claude" / p.relative_to(FIXTURES / "transcripts")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(p.read_bytes())
    rollout = codex_fixture_files()[0]
    poisoned = src / "codex" / rollout.name
    poisoned.parent.mkdir(parents=True)
    lines = rollout.read_bytes().splitlines()
    # The line: a "type" that is a list (then an object), which once ended the whole run.
    bad = [json.dumps({"type": ["response_item"], "payload": None}), json.dumps({"type": {"a": 1}, "payload": {}})]
    poisoned.write_bytes(b"\n".join([lines[0], *(b.encode() for b in bad), *lines[1:]]) + b"\n")

    async def main() -> tuple[IngestReport, set[str]]:
        eywa = await Eywa.open(_settings(tmp_path / "home"))
        try:
            report = await eywa.ingest([src], use_llm=False)
            async with eywa.db.conn.execute("SELECT session_id FROM sessions") as cur:
                return report, {str(r[0]) for r in await cur.fetchall()}
        finally:
            await eywa.close()

    report, stored = asyncio.run(main())
    assert not report.unreadable
    assert _parse(poisoned, True)[0].session_id in stored
    # Every session of every Claude file is stored (session-empty.jsonl holds no entry, hence nothing to store).
    wanted = {t.session_id for p in (src / "claude").rglob("*.jsonl") for t in _parse(p, False) if t.entries}
    assert len(wanted) > 10 and wanted <= stored
    assert report.types_skipped["(a list, not a name)"] == 1
    assert report.types_skipped["(a dict, not a name)"] == 1
