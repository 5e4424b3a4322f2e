"""parse_claude_file over the transcript fixtures and hand-written malformed files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory.models import BlockKind, SessionKind, Transcript
from memory.sources.claude import PROSE_FACTOR, parse_claude_file
from tests.memory.conftest import TRANSCRIPTS

# Read-only use of the fixtures in place (the parser never writes).
DATA = TRANSCRIPTS

ALL_FIXTURES = sorted(
    p for p in DATA.rglob("*") if p.suffix in (".jsonl", ".json") and not p.name.endswith(".meta.json")
)


def texts(t: Transcript) -> list[str]:
    return [b.text for e in t.entries for b in e.blocks if b.kind is BlockKind.TEXT]


def line(**fields: Any) -> str:
    return json.dumps(fields) + "\n"


def user(uuid: str, text: str, parent: str | None = None, **extra: Any) -> str:
    return line(
        type="user", uuid=uuid, parentUuid=parent, sessionId="S", timestamp=f"2026-01-01T00:00:{len(uuid):02d}Z",
        message={"role": "user", "content": text}, **extra,
    )  # fmt: skip


def assistant(uuid: str, content: Any, parent: str | None = None, **extra: Any) -> str:
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return line(
        type="assistant", uuid=uuid, parentUuid=parent, sessionId="S", timestamp="2026-01-01T00:01:00Z",
        message={"role": "assistant", "model": "claude-x", "content": blocks}, **extra,
    )  # fmt: skip


def problems(t: Transcript) -> list[tuple[int, str]]:
    return [(p.line_no, p.reason) for p in t.problems]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_fixture_parses_with_the_main_transcript_first(path: Path) -> None:
    result = parse_claude_file(path)
    assert result
    assert result[0].source_path == str(path)
    assert result[0].bytes_read == path.stat().st_size
    assert all(t.session_id for t in result)


def test_rewind_keeps_the_live_branch_across_the_compact_boundary() -> None:
    [t] = parse_claude_file(DATA / "daaain_new" / "dag_compact_after_rewind.jsonl")
    got = texts(t)
    for kept in ("Start", "Second attempt", "Keep going", "After compaction", "Final answer"):
        assert kept in got
    assert "First attempt" not in got and "First answer" not in got
    assert got.index("Keep going") < got.index("After compaction")
    boundary = [e for e in t.entries if e.role == "system"]
    assert [e.subtype for e in boundary] == ["compact_boundary"]
    assert [e.is_compact_summary for e in t.entries].count(True) == 1
    assert (t.session_id, t.cwd, t.version, t.model) == ("s1", "/tmp", "2.1.0", "claude-sonnet-4-20250514")
    assert (t.started_at, t.ended_at) == ("2025-07-01T10:00:00.000Z", "2025-07-01T10:41:00.000Z")


def test_bad_json_line_is_a_problem_and_unknown_type_is_counted() -> None:
    [t] = parse_claude_file(DATA / "claude_archive_mcp" / "-test-project" / "session-badjson.jsonl")
    assert problems(t) == [(2, "invalid json")]
    assert t.skipped_types["weird-new-type"] == 1
    assert texts(t) == ["before bad", "after bad"]
    assert t.lines_read == 4


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("session-customtitle.jsonl", "My Custom Title"),  # custom-title beats ai-title
        ("session-tools.jsonl", "Tool heavy session"),  # ai-title
        ("session-uuid.jsonl", "Standard test session"),  # summary
        ("session-multisummary.jsonl", "Second summary"),  # the newest summary
        ("session-nogit.jsonl", "no git here"),  # first user text
    ],
)
def test_title_precedence(name: str, title: str) -> None:
    assert parse_claude_file(DATA / "claude_archive_mcp" / "-test-project" / name)[0].title == title


def test_long_first_message_title_is_one_shortened_line() -> None:
    [t] = parse_claude_file(DATA / "claude_archive_mcp" / "-test-project" / "session-longname.jsonl")
    assert t.title.startswith("This is a very long first user message") and t.title.endswith("…")
    assert len(t.title) <= 120


def test_ai_title_beats_summary_and_meta_lines_never_become_the_title(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(
        line(type="summary", summary="a summary", leafUuid="x")
        + user("u1", "<command-name>/clear</command-name>")
        + user("u2", "real question", "u1")
    )
    assert parse_claude_file(f)[0].title == "a summary"
    f.write_text(f.read_text() + line(type="ai-title", aiTitle="AI named it", sessionId="S"))
    assert parse_claude_file(f)[0].title == "AI named it"
    f.write_text(user("u1", "<command-name>/clear</command-name>") + user("u2", "real question", "u1"))
    assert parse_claude_file(f)[0].title == "real question"


def test_tool_blocks_thinking_and_top_level_tool_result_line() -> None:
    [t] = parse_claude_file(DATA / "claude_archive_mcp" / "-test-project" / "session-tools.jsonl")
    kinds = [[b.kind for b in e.blocks] for e in t.entries]
    assert kinds == [
        [BlockKind.TEXT],
        [BlockKind.THINKING, BlockKind.TEXT, BlockKind.TOOL_USE],
        [BlockKind.TOOL_RESULT, BlockKind.TEXT],
    ]
    tool_use = t.entries[1].blocks[2]
    assert (tool_use.tool_name, tool_use.tool_input) == ("Bash", {"command": "make"})
    assert t.entries[2].blocks[0].text == "build ok"
    assert t.skipped_types["tool_result"] == 1
    assert t.git_branch == "dev"


def test_system_lines_become_system_entries() -> None:
    [t] = parse_claude_file(DATA / "claude_archive_mcp" / "-test-project" / "session-empty.jsonl")
    assert [(e.role, e.subtype) for e in t.entries] == [("system", "turn_duration"), ("system", "api_error")]
    assert t.entries[0].blocks[0].text == "1200"  # milliseconds, formatted by the renderer
    assert t.title == "Empty session"


def test_inline_sidechain_is_split_into_a_linked_subagent() -> None:
    main, sub = parse_claude_file(DATA / "daaain_new" / "sidechain_integrated_trimmed.jsonl")
    parent = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"
    assert (main.kind, main.session_id) == (SessionKind.MAIN, parent)
    assert main.subagents == [sub]
    assert (sub.kind, sub.session_id, sub.parent_id, sub.agent_id) == (
        SessionKind.SUBAGENT,
        f"{parent}/agent-e1c84ba5",
        parent,
        "e1c84ba5",
    )
    assert sub.title.startswith("Research data-border-color usage")
    assert len(sub.entries) == 2 and sub.entries[1].blocks[0].tool_name == "Grep"
    assert len(main.entries) == 3
    assert [e.subagent_ref for e in main.entries] == ["", sub.session_id, ""]
    assert all(not any("I'll research" in b.text for b in e.blocks) for e in main.entries)


def test_inline_sidechains_with_agent_ids_and_tool_use_result(tmp_path: Path) -> None:
    f = tmp_path / "main.jsonl"
    task = [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"description": "Find the bug", "prompt": "p"}}]
    result = [{"type": "tool_result", "tool_use_id": "t1", "content": "found it"}]
    f.write_text(
        user("u1", "please delegate")
        + assistant("a1", task, "u1")
        + user("s1", "Find the bug", None, isSidechain=True, agentId="abc")
        + assistant("s2", "looking", "s1", isSidechain=True, agentId="abc")
        + line(type="user", uuid="u2", parentUuid="a1", sessionId="S", toolUseResult={"agentId": "abc"},
               message={"role": "user", "content": result})
        + assistant("a2", "done", "u2")
    )  # fmt: skip
    main, sub = parse_claude_file(f)
    assert sub.session_id == "S/agent-abc" and sub.parent_id == "S"
    assert sub.title == "Find the bug"
    assert texts(sub) == ["Find the bug", "looking"]
    assert texts(main) == ["please delegate", "done"]
    assert [e.subagent_ref for e in main.entries] == ["", "", "S/agent-abc", ""]


def test_old_sidechains_without_agent_ids_link_to_task_calls_in_order(tmp_path: Path) -> None:
    f = tmp_path / "old.jsonl"
    calls = [
        {"type": "tool_use", "id": f"t{i}", "name": "Task", "input": {"description": f"job {i}", "prompt": "p"}}
        for i in (1, 2)
    ]
    # Claude Code writes each tool result on its own line.
    results = [[{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"done {i}"}] for i in (1, 2)]
    f.write_text(
        user("u1", "two jobs")
        + assistant("a1", calls, "u1")
        + user("sc1-root", "job 1", None, isSidechain=True)
        + assistant("sc1-a", "working 1", "sc1-root", isSidechain=True)
        + user("sc2-root", "job 2", None, isSidechain=True)
        + line(type="user", uuid="r1", parentUuid="a1", sessionId="S", message={"role": "user", "content": results[0]})
        + line(type="user", uuid="r2", parentUuid="r1", sessionId="S", message={"role": "user", "content": results[1]})
        + assistant("a2", "both done", "r2")
    )
    main, one, two = parse_claude_file(f)
    assert (one.session_id, one.title, texts(one)) == ("S/agent-sc1-root", "job 1", ["job 1", "working 1"])
    assert (two.session_id, two.title) == ("S/agent-sc2-root", "job 2")
    assert [e.subagent_ref for e in main.entries] == ["", "", "S/agent-sc1-root", "S/agent-sc2-root", ""]
    assert texts(main) == ["two jobs", "both done"]


def test_subagent_file_uses_meta_json_description_as_title(tmp_path: Path) -> None:
    src = DATA / "daaain_new" / "minimal_showcase" / "subagents"
    [t] = parse_claude_file(src / "agent-showcol1.jsonl", parent_hint="minimal_showcase", agent_hint="showcol1")
    assert t.kind is SessionKind.SUBAGENT
    assert t.title == "Survey the web module"
    assert t.session_id == "55550000-0000-4000-8000-000000000001/agent-showcol1"
    assert t.parent_id == "55550000-0000-4000-8000-000000000001"
    assert t.agent_id == "showcol1"
    assert all(not e.subagent_ref for e in t.entries)
    # Without the meta file the first user message names it.
    shutil.copy(src / "agent-showcol1.jsonl", tmp_path / "agent-showcol1.jsonl")
    [bare] = parse_claude_file(tmp_path / "agent-showcol1.jsonl")
    assert bare.title.startswith("Survey src/web")


def test_subagent_file_without_session_id_takes_the_parent_hint(tmp_path: Path) -> None:
    f = tmp_path / "p1" / "subagents" / "agent-q.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(line(type="user", uuid="u", message={"role": "user", "content": "hi"}, isSidechain=True))
    [t] = parse_claude_file(f, parent_hint="p1", agent_hint="q")
    assert (t.session_id, t.parent_id, t.kind) == ("p1/agent-q", "p1", SessionKind.SUBAGENT)
    [flat] = parse_claude_file(
        DATA / "claude_archive_mcp" / "-test-project" / "some-session" / "subagents" / "agent-test.jsonl"
    )
    assert (flat.session_id, flat.parent_id) == ("sub1/agent-test", "sub1")
    assert texts(flat) == ["subagent task", "subagent reply"]


def test_loglines_json_export_takes_its_session_id_from_the_file_name() -> None:
    [t] = parse_claude_file(DATA / "simonw" / "sample_session.json")
    assert t.session_id == "sample_session" and t.kind is SessionKind.MAIN
    assert len(t.entries) == 33
    assert t.title == "Create a simple Python function to add two numbers"
    assert sum(e.is_compact_summary for e in t.entries) == 1
    assert t.entries[-1].blocks[0].text == "Added multiply function!"


def test_edge_cases_report_malformed_lines_with_numbers() -> None:
    [t] = parse_claude_file(DATA / "daaain_old" / "edge_cases.jsonl")
    assert problems(t) == [
        (10, "message has no content"),
        (11, "message is not an object"),
        (13, "not an object"),
        (15, "not an object"),
        (16, "not an object"),
    ]
    assert t.skipped_types["(no type)"] == 1
    assert [e.line_no for e in t.entries if e.is_meta] == [6, 7, 8]
    failing = t.entries[4].blocks[0]
    assert failing.kind is BlockKind.TOOL_RESULT and failing.is_error
    assert "café" in " ".join(texts(t))
    assert t.title.startswith("Tested various edge cases")  # the summary on the live branch


def test_files_without_parent_links_keep_every_line_in_order() -> None:
    [t] = parse_claude_file(DATA / "daaain_old" / "representative_messages.jsonl")
    assert [e.line_no for e in t.entries] == list(range(1, 12))
    [s] = parse_claude_file(DATA / "simonw" / "sample_session.jsonl")
    assert len(s.entries) == 7


def test_broken_chain_keeps_the_earlier_entries(tmp_path: Path) -> None:
    f = tmp_path / "b.jsonl"
    f.write_text(
        user("u1", "one") + assistant("a1", "two", "u1") + user("u2", "three", "gone") + assistant("a2", "four", "u2")
    )
    assert texts(parse_claude_file(f)[0]) == ["one", "two", "three", "four"]


def test_unknown_lines_with_uuid_still_link_the_chain(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(
        user("u1", "one")
        + assistant("x1", "abandoned", "u1")
        + line(type="progress", uuid="p1", parentUuid="u1", sessionId="S")
        + assistant("a1", "kept", "p1")
    )
    [t] = parse_claude_file(f)
    assert texts(t) == ["one", "kept"]
    assert t.skipped_types["progress"] == 1


def test_truncated_last_line_is_tolerated(tmp_path: Path) -> None:
    f = tmp_path / "live.jsonl"
    f.write_text(user("u1", "one") + assistant("a1", "two", "u1") + '{"type":"user","uuid":"u2","mess')
    [t] = parse_claude_file(f)
    assert problems(t) == [(3, "truncated last line")]
    assert texts(t) == ["one", "two"]


def test_nul_runs_are_reported_and_the_json_after_them_salvaged(tmp_path: Path) -> None:
    f = tmp_path / "nul.jsonl"
    f.write_bytes(
        user("u1", "one").encode() + b"\x00" * 500 + b"\n" + b"\x00" * 64 + assistant("a1", "two", "u1").encode()
    )
    [t] = parse_claude_file(f)
    assert problems(t) == [(2, "nul bytes"), (3, "nul bytes")]
    assert texts(t) == ["one", "two"]


def test_a_bad_line_is_reported_once_whatever_is_wrong_with_it(tmp_path: Path) -> None:
    f = tmp_path / "junk.jsonl"
    f.write_bytes(
        user("u1", "one").encode() + b"\x00\x00\xff\xfe junk\n" + b"[1, 2] {\n" + assistant("a1", "two", "u1").encode()
    )
    [t] = parse_claude_file(f)
    assert problems(t) == [(2, "nul bytes"), (3, "invalid json after the first value")]
    assert texts(t) == ["one", "two"]


def test_a_line_cut_by_a_crash_keeps_the_line_appended_onto_it(tmp_path: Path) -> None:
    # The cut write ends inside a nested object; the next append landed on the same line, after it.
    cut = user("u2", "lost half").rstrip("\n")[:-40]
    f = tmp_path / "cut.jsonl"
    f.write_text(user("u1", "one") + cut + assistant("a1", "two", "u1"))
    [t] = parse_claude_file(f)
    assert problems(t) == [(2, "invalid json before a value")]
    assert texts(t) == ["one", "two"]  # the cut line's inner message object is not taken for a line


def test_invalid_utf8_line_is_a_problem(tmp_path: Path) -> None:
    f = tmp_path / "u.jsonl"
    f.write_bytes(
        user("u1", "one").encode() + b'{"type":"user","x":"\xff\xfe"}\n' + assistant("a1", "two", "u1").encode()
    )
    [t] = parse_claude_file(f)
    assert problems(t) == [(2, "invalid utf-8")]
    assert texts(t) == ["one", "two"]


def test_two_objects_on_one_line_are_both_kept_and_reported(tmp_path: Path) -> None:
    f = tmp_path / "two.jsonl"
    f.write_text(user("u1", "one").rstrip("\n") + assistant("a1", "two", "u1"))
    [t] = parse_claude_file(f)
    assert problems(t) == [(1, "several json values on one line")]
    assert texts(t) == ["one", "two"]


def test_session_id_falls_back_to_hint_then_file_stem(tmp_path: Path) -> None:
    [t] = parse_claude_file(DATA / "episodic_memory" / "medium-conversation.jsonl")
    assert t.session_id == "medium-conversation" and t.entries == []
    assert t.skipped_types["file-history-snapshot"] == 22
    f = tmp_path / "x.jsonl"
    f.write_text(line(type="user", message={"role": "user", "content": "hi"}))
    assert parse_claude_file(f, session_hint="hinted")[0].session_id == "hinted"
    assert parse_claude_file(f)[0].session_id == "x"


def test_long_text_is_truncated_and_everything_is_redacted(tmp_path: Path) -> None:
    secret = "sk-SECRET123"
    long_output = "x" * 1990 + secret + "y" * 5000
    f = tmp_path / "r.jsonl"
    f.write_text(
        line(type="summary", summary=f"summary {secret}", leafUuid="none")
        + user("u1", f"my key is {secret}")
        + assistant("a1", [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"cmd": f"echo {secret}", "n": 3}}])
        + line(type="user", uuid="u2", parentUuid="a1", sessionId="S",
               message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                     "content": long_output}]})
    )  # fmt: skip
    [t] = parse_claude_file(f, redact=lambda s: s.replace(secret, "[REDACTED]"), tool_output_limit=2000)
    assert secret not in repr(t)
    assert t.title == "summary [REDACTED]" and t.summaries == ["summary [REDACTED]"]
    assert t.entries[1].blocks[0].tool_input == {"cmd": "echo [REDACTED]", "n": 3}
    result = t.entries[2].blocks[0]
    assert len(result.text) == 2000 and result.truncated_chars == len(long_output) - 2000
    assert "sk-SECR" not in result.text  # the secret straddling the cut is redacted before cutting


def test_document_and_image_blocks_keep_no_payload() -> None:
    [t] = parse_claude_file(DATA / "episodic_memory" / "long-conversation.jsonl", tool_output_limit=500)
    assert len(t.entries) == 262
    doc = [b for e in t.entries for b in e.blocks if b.text.startswith("[document")]
    assert [b.text for b in doc] == ["[document application/pdf]"]
    limits = {BlockKind.TEXT: 500 * PROSE_FACTOR, BlockKind.THINKING: 500 * PROSE_FACTOR}
    assert all(len(b.text) <= limits.get(b.kind, 500) for e in t.entries for b in e.blocks)
    assert any(len(b.text) > 500 for e in t.entries for b in e.blocks if b.kind is BlockKind.TEXT)
    assert sum(e.subtype == "api_error" for e in t.entries) == 5


def test_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        parse_claude_file(tmp_path / "nope.jsonl")


def _write_big_transcript(path: Path, target_bytes: int) -> None:
    """A realistic large session: short prompts, long tool outputs, a few huge ones."""
    parent = None
    n = 0
    with path.open("w") as fh:
        while fh.tell() < target_bytes:
            n += 1
            u = f"u{n}"
            fh.write(user(u, f"step {n}: please run the tests and fix failures in module_{n % 97}.py", parent))
            a = f"a{n}"
            tool = [
                {"type": "text", "text": "Running the suite now. " * 20},
                {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "pytest -x " + "q" * 500}},
            ]
            fh.write(assistant(a, tool, u))
            size = 1_000_000 if n % 200 == 0 else 6_000 + (n * 37) % 4000
            body = [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"line {n} ok\n" * (size // 12)}]
            r = f"r{n}"
            fh.write(line(type="user", uuid=r, parentUuid=a, sessionId="S", message={"role": "user", "content": body}))
            parent = r


@pytest.mark.slow
def test_100_mb_transcript_parses_within_300_mb_peak_rss(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    _write_big_transcript(big, 100 * 1024 * 1024)
    code = (
        "import re, sys; from pathlib import Path; from memory.sources.claude import parse_claude_file; "
        "[t] = parse_claude_file(Path(sys.argv[1])); assert len(t.entries) > 10000, len(t.entries); "
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    )
    # VmHWM (kB) is the child's own peak: Linux carries ru_maxrss over from the forking parent (this big
    # pytest process) through exec, and RUSAGE_CHILDREN would include every earlier subprocess.
    out = subprocess.run(
        [sys.executable, "-c", code, str(big)], capture_output=True, text=True, check=True, timeout=240
    )
    peak_mb = int(out.stdout.strip()) / 1024
    assert peak_mb <= 300, f"peak RSS {peak_mb:.0f} MB"


def test_two_tool_input_keys_redacted_alike_keep_both_values() -> None:
    from memory.redact.redactor import Redactor
    from memory.sources.jsonl import TextClipper

    a, b = "sk-proj-" + "A1b2C3d4E5" * 4, "sk-proj-" + "F6g7H8i9J0" * 4
    value, dropped = TextClipper(Redactor(()), 1000).value({a: "one", b: "two", "plain": "three"})
    assert dropped == 0 and sorted(value.values()) == ["one", "three", "two"]
    assert not any(a in k or b in k for k in value)
