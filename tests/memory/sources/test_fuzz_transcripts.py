"""Fuzzing the transcript parsers (Claude Code JSONL, Codex rollouts) with generated and damaged real lines.

Each parser gets FUZZ_EXAMPLES files of a few lines each, parsed in-process and rendered as ingest renders
them: no exception may escape, every line that is not a JSON object is a counted problem at its line, and
everything headed for SQLite is encodable text. The end-to-end properties (a damaged file still stores
every intact line; one poisoned file leaves the rest of a run alone) are in test_fuzz_ingest.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from memory.models import Transcript
from memory.redact.redactor import Redactor
from memory.render.markdown import render_markdown
from memory.sources.codex import _RESPONSE_TYPES, parse_codex_file
from memory.sources.jsonl import MAX_LINE_BYTES
from tests.fuzzing import (
    claude_fixture_files,
    codex_fixture_files,
    damaged_line,
    fuzz_settings,
    json_bytes,
    json_values,
    junk,
    lines_of,
    pick,
    records,
    shaped,
    texts,
)

_DECODER = json.JSONDecoder()
REDACTOR = Redactor(())

# -- what a line may hold ------------------------------------------------------------------------------

_STAMPS = st.one_of(
    st.sampled_from(
        [
            "2025-06-01T10:00:00Z",
            "2025-06-01T10:00:00.123+02:00",
            "2025-06-01T10:00:00",
            "0001-01-01T00:00:00+01:00",  # before year 1 once in UTC
            "9999-12-31T23:59:59-23:59",  # past year 9999 once in UTC
            "2025-13-45T99:00:00Z",
            "",
        ]
    ),
    texts,
)
_IDS = st.sampled_from(["u1", "u2", "u3", "u4", "u5", ""])
_TOOL_IDS = st.sampled_from(["t1", "t2", "call_1"])
_SHORT = st.one_of(texts, st.sampled_from(["hello world", "Fix the cart total", "<command-name>x"]))

_block = records(
    {"type": shaped(st.sampled_from(["text", "thinking", "tool_use", "tool_result", "image", "document", "x"]))},
    {
        "text": shaped(_SHORT),
        "thinking": shaped(_SHORT),
        "name": shaped(st.sampled_from(["Bash", "Task", "Agent", "Read"])),
        "id": shaped(_TOOL_IDS),
        "input": shaped(st.dictionaries(st.sampled_from(["description", "command", "path"]), _SHORT, max_size=2)),
        "tool_use_id": shaped(_TOOL_IDS),
        "content": shaped(st.one_of(_SHORT, st.lists(st.one_of(_SHORT, st.fixed_dictionaries({"text": _SHORT}))))),
        "is_error": shaped(st.booleans()),
        "source": shaped(st.fixed_dictionaries({"media_type": shaped(texts)})),
    },
)
_message = records(
    {"content": shaped(st.one_of(_SHORT, st.lists(st.one_of(_block, _SHORT), max_size=3)))},
    {"role": shaped(st.sampled_from(["user", "assistant"])), "model": shaped(st.sampled_from(["m", "<synthetic>"]))},
    max_extra=1,
)
claude_records = records(
    {
        "type": shaped(st.sampled_from(["user", "assistant", "system", "summary", "custom-title", "ai-title", "x"])),
        "uuid": shaped(_IDS),
        "parentUuid": shaped(_IDS),
        "message": shaped(_message),
    },
    {
        "logicalParentUuid": shaped(_IDS),
        "isSidechain": shaped(st.booleans()),
        "agentId": shaped(st.sampled_from(["a1", "a2"])),
        "toolUseResult": shaped(st.one_of(_SHORT, st.fixed_dictionaries({"agentId": shaped(texts)}))),
        "timestamp": shaped(_STAMPS),
        "sessionId": shaped(st.sampled_from(["s1", "s2"])),
        "cwd": shaped(texts),
        "gitBranch": shaped(texts),
        "version": shaped(texts),
        "summary": shaped(_SHORT),
        "leafUuid": shaped(_IDS),
        "customTitle": shaped(_SHORT),
        "aiTitle": shaped(_SHORT),
        "agentName": shaped(_SHORT),
        "isMeta": shaped(st.booleans()),
        "isCompactSummary": shaped(st.booleans()),
        "subtype": shaped(texts),
        "content": shaped(_SHORT),
        "durationMs": shaped(st.one_of(st.integers(), st.floats())),
        "error": shaped(st.fixed_dictionaries({"message": shaped(_SHORT)})),
        "retryAttempt": shaped(st.integers()),
        "maxRetries": junk,
    },
)

_codex_content = st.lists(
    records({"type": shaped(st.sampled_from(["input_text", "output_text"])), "text": shaped(_SHORT)}, {}), max_size=2
)
# The parser's own list of response items (kept in step with it), its event_msg kinds and a kind it never saw.
_RESPONSE_KINDS = [*sorted(_RESPONSE_TYPES), "user_message", "agent_message", "other"]
_codex_payload = records(
    {"type": shaped(st.sampled_from(_RESPONSE_KINDS))},
    {
        "role": shaped(st.sampled_from(["user", "assistant", "developer", "system"])),
        "content": shaped(_codex_content),
        "summary": shaped(_codex_content),
        "name": shaped(st.sampled_from(["shell", "apply_patch"])),
        "arguments": shaped(st.one_of(json_values.map(json.dumps), junk.map(lambda v: json_bytes(v).decode()))),
        "call_id": shaped(_TOOL_IDS),
        "id": shaped(_IDS),
        "output": shaped(
            st.one_of(
                _SHORT,
                st.fixed_dictionaries(
                    {"output": shaped(_SHORT), "metadata": shaped(st.fixed_dictionaries({"exit_code": junk}))}
                ).map(json.dumps),
                st.fixed_dictionaries({"content": shaped(st.one_of(_SHORT, _codex_content)), "success": junk}),
            )
        ),
        "action": shaped(st.dictionaries(texts, json_values, max_size=3)),
        "input": junk,
        "message": shaped(_SHORT),
        "timestamp": shaped(_STAMPS),
        "cwd": shaped(texts),
        "model": shaped(texts),
        "cli_version": shaped(texts),
        "git": shaped(st.fixed_dictionaries({"branch": shaped(texts)})),
    },
)
_codex_typed = records(
    {
        "type": shaped(
            st.sampled_from(["session_meta", "turn_context", "response_item", "event_msg", "compacted", "other"])
        ),
        "timestamp": shaped(_STAMPS),
        "payload": shaped(_codex_payload),
    },
    {"record_type": junk},
    max_extra=1,
)
# Legacy rollouts: a bare session-meta object, then bare response items.
codex_records = st.one_of(_codex_typed, _codex_typed, _codex_payload, st.fixed_dictionaries({"id": shaped(_IDS)}))


def _line_bytes(records: st.SearchStrategy[Any], real: list[bytes]) -> st.SearchStrategy[bytes]:
    """One physical line: a generated record, a damaged real one, or plain garbage."""
    generated = st.tuples(records, st.booleans()).map(lambda r: json_bytes(r[0], ascii_only=r[1]))
    damaged = pick(real).flatmap(damaged_line) if real else generated
    return st.one_of(generated, generated, damaged, damaged, st.binary(max_size=40))


_CLAUDE_LINES = lines_of(claude_fixture_files())
_CODEX_LINES = lines_of(codex_fixture_files())
claude_lines = _line_bytes(claude_records, _CLAUDE_LINES)
codex_lines = _line_bytes(codex_records, _CODEX_LINES)


# -- what must hold --------------------------------------------------------------------------------------


_TOOL_USE_HEAD = b'{"type":"assistant","message":{"content":[{"type":"tool_use","input":{"a":'
_CALL_HEAD = b'{"type":"response_item","payload":{"type":"function_call","arguments":"'


def _certainly_bad(raw: bytes) -> bool:
    """Whether a physical line holds no JSON object at its start (so the parser must report it)."""
    data = raw.strip()
    if b"\x00" in data:
        return True  # reported even when JSON is salvaged around the NULs
    if not data:
        return False
    try:
        value, _ = _DECODER.raw_decode(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return True
    return not isinstance(value, dict)


def _check(transcripts: list[Transcript], content: bytes) -> None:
    """The parse invariants, then render every transcript as ingest does."""
    main = transcripts[0]
    physical = content.split(b"\n")
    if physical and physical[-1] == b"":
        physical.pop()
    assert main.lines_read == len(physical)
    assert main.bytes_read == len(content)
    reported = {p.line_no for p in main.problems}
    must = {n for n, raw in enumerate(physical, 1) if len(raw) <= MAX_LINE_BYTES and _certainly_bad(raw)}
    assert must <= reported, f"bad lines not reported: {sorted(must - reported)}"
    assert all(1 <= p.line_no <= len(physical) for p in main.problems)
    for t in transcripts:
        markdown = render_markdown(t)
        # Everything stored is text SQLite takes: UTF-8 encodable (no lone surrogates).
        for value in (markdown, t.session_id, t.parent_id, t.title, t.cwd, t.git_branch, t.model, t.started_at):
            value.encode("utf-8")
        for name in t.skipped_types:
            assert len(name) <= 120, "an unknown type's name is echoed by ingest: it must stay short"


@fuzz_settings()
@given(
    lines=st.lists(claude_lines, min_size=1, max_size=3),
    name=st.sampled_from(["main.jsonl", "sess/subagents/agent-a1.jsonl", "agent-x.jsonl"]),
    newline_at_end=st.booleans(),
)
@example(lines=[b'{"type":"system","uuid":"a","durationMs":1e400}'], name="main.jsonl", newline_at_end=True)
@example(lines=[b"[" * 100_000, b'{"type":"user","message":{"content":"hi"}}'], name="main.jsonl", newline_at_end=True)
@example(lines=[_TOOL_USE_HEAD + b"[" * 900 + b"]" * 900 + b"}}]}}"], name="main.jsonl", newline_at_end=True)
def test_claude_parser_reports_every_bad_line_and_never_raises(
    tmp_path: Path, lines: list[bytes], name: str, newline_at_end: bool
) -> None:
    from memory.sources.claude import parse_claude_file

    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    content = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    path.write_bytes(content)
    _check(parse_claude_file(path, redact=REDACTOR), content)


@fuzz_settings(500)
@given(
    doc=st.one_of(
        st.fixed_dictionaries({"loglines": shaped(st.lists(claude_records, max_size=5))}).map(json_bytes),
        junk.map(json_bytes),
        st.binary(max_size=60),
    )
)
def test_claude_export_parser_never_raises(tmp_path: Path, doc: bytes) -> None:
    # The {"loglines": [...]} export is one JSON document; 500 examples: it shares every line rule above.
    from memory.sources.claude import parse_claude_file

    path = tmp_path / "export.json"
    path.write_bytes(doc)
    for t in parse_claude_file(path, redact=REDACTOR):
        render_markdown(t).encode("utf-8")


@fuzz_settings()
@given(lines=st.lists(codex_lines, min_size=1, max_size=3), newline_at_end=st.booleans())
@example(lines=[b'{"type":["x"],"payload":null}', b'{"type":{"a":1}}'], newline_at_end=True)
@example(lines=[_CALL_HEAD + b"[" * 5000 + b'"}}'], newline_at_end=True)
@example(lines=[b'{"type":"event_msg","payload":{"type":"' + b"x" * 500 + b'"}}'], newline_at_end=True)  # a long name
def test_codex_parser_reports_every_bad_line_and_never_raises(
    tmp_path: Path, lines: list[bytes], newline_at_end: bool
) -> None:
    path = tmp_path / "rollout-2025-06-01T10-00-00-0b7e4c2a-9d1f-4e3a-8c55-2f6a7d9e1b30.jsonl"
    content = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    path.write_bytes(content)
    _check([parse_codex_file(path, redact=REDACTOR)], content)


def test_the_fuzzers_start_from_real_lines() -> None:
    # The damaged-line strategies need the real fixtures; without them they would silently fuzz less.
    assert len(_CLAUDE_LINES) > 100 and len(_CODEX_LINES) > 10
