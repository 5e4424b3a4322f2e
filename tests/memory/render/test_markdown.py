"""Deterministic markdown: each element's layout, byte-identical output across environments, goldens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory.models import Block, BlockKind, Entry, SessionKind, Transcript
from memory.render.markdown import render_markdown
from memory.sources.claude import parse_claude_file
from tests.memory.conftest import TRANSCRIPTS

REPO = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _t(*entries: Entry, **fields: object) -> Transcript:
    t = Transcript(session_id="s-1", kind=SessionKind.MAIN, source_path="/x/s-1.jsonl", entries=list(entries))
    for key, value in fields.items():
        setattr(t, key, value)
    return t


def _text(role: str, ts: str, text: str, **kw: object) -> Entry:
    return Entry(role, ts, (Block(BlockKind.TEXT, text),), **kw)  # type: ignore[arg-type]


def _body(md: str) -> str:
    """The markdown after the metadata list (the part the entries produce)."""
    return md.split("- entries: ", 1)[1].split("\n", 1)[1]


def test_header_lists_metadata_and_summaries() -> None:
    t = _t(
        _text("user", "2025-06-14T10:00:00Z", "hi"),
        title="Fix the login bug",
        parent_id="p-0",
        cwd="/home/me/app",
        git_branch="main",
        model="claude-sonnet-4",
        started_at="2025-06-14T10:00:00Z",
        ended_at="2025-06-14T11:02:03.500Z",
        summaries=["First summary\nover two lines", "Second"],
    )
    md = render_markdown(t)
    assert md.startswith(
        "# Fix the login bug\n\n"
        "- session: `s-1`\n"
        "- kind: main\n"
        "- parent: `p-0`\n"
        "- project: `/home/me/app`\n"
        "- branch: `main`\n"
        "- model: claude-sonnet-4\n"
        "- started: 2025-06-14 10:00:00 +00:00\n"
        "- ended: 2025-06-14 11:02:03 +00:00\n"
        "- duration: 1h 02m 03s\n"
        "- timezone: UTC\n"
        "- entries: 1\n\n"
        "## Summaries\n\n"
        "- First summary over two lines\n"
        "- Second\n\n"
        "## User · 10:00:00\n\nhi\n"
    )


def test_untitled_session_is_named_by_its_id() -> None:
    assert render_markdown(_t()).startswith("# Session s-1\n")


def test_turn_headings_show_role_and_time_and_date_when_the_day_changes() -> None:
    t = _t(
        _text("user", "2025-06-14T23:59:00Z", "question"),
        _text("assistant", "2025-06-15T00:00:05Z", "part one"),
        _text("assistant", "2025-06-15T00:00:06Z", "part two"),
        _text("user", "", "no time"),
        started_at="2025-06-14T23:59:00Z",
    )
    assert _body(render_markdown(t)) == (
        "\n## User · 23:59:00\n\nquestion\n\n"
        "## Assistant · 2025-06-15 00:00:05\n\npart one\n\npart two\n\n"
        "## User\n\nno time\n"
    )


def test_thinking_is_a_quoted_block_marked_thinking() -> None:
    t = _t(Entry("assistant", "", (Block(BlockKind.THINKING, "step 1\n\nstep 2"),)))
    assert "> **thinking**\n>\n> step 1\n>\n> step 2\n" in render_markdown(t)


def test_tool_use_shows_sorted_input_in_a_fence_longer_than_any_backtick_run() -> None:
    block = Block(
        BlockKind.TOOL_USE,
        tool_name="Bash",
        tool_id="t1",
        tool_input={
            "description": "List",
            "command": "echo ````x````\nls",
            "opts": {"b": 1, "a": [1, None]},
            "e": "",
            "edits": [{"old": "a\nb", "new": " c"}, []],
        },
    )
    md = render_markdown(_t(Entry("assistant", "", (block,))))
    assert (
        "**Tool: Bash**\n\n"
        "`````\n"
        "command: |\n  echo ````x````\n  ls\n"
        "description: List\n"
        'e: ""\n'
        "edits:\n"
        '  - new: " c"\n'
        "    old: |\n      a\n      b\n"
        "  - []\n"
        "opts:\n  a:\n    - 1\n    - null\n  b: 1\n"
        "`````\n"
    ) in md


def test_tool_result_is_fenced_and_truncated_with_a_marker() -> None:
    long = Block(BlockKind.TOOL_RESULT, "x" * 30, tool_id="t1")
    parsed_cut = Block(BlockKind.TOOL_RESULT, "abc", tool_id="t2", truncated_chars=12345)
    error = Block(BlockKind.TOOL_RESULT, "boom", tool_id="t3", is_error=True)
    empty = Block(BlockKind.TOOL_RESULT, "", tool_id="t4")
    t = _t(Entry("user", "", (long, parsed_cut, error, empty)))
    body = _body(render_markdown(t, tool_output_limit=10))
    assert body == (
        "\n**Result**\n\n```\nxxxxxxxxxx\n```\n\n… [truncated 20 chars]\n\n"
        "**Result**\n\n```\nabc\n```\n\n… [truncated 12,345 chars]\n\n"
        "**Result (error)**\n\n```\nboom\n```\n\n"
        "**Result** _(empty)_\n"
    )


def test_tool_results_stay_under_the_assistant_turn() -> None:
    t = _t(
        Entry("assistant", "", (Block(BlockKind.TOOL_USE, tool_name="Read", tool_id="t", tool_input={"p": "a"}),)),
        Entry("user", "", (Block(BlockKind.TOOL_RESULT, "content", tool_id="t"),)),
        _text("assistant", "", "done"),
    )
    assert render_markdown(t).count("## Assistant") == 1
    assert "## User" not in render_markdown(t)


def test_system_lines_are_one_italic_line() -> None:
    t = _t(
        Entry("system", "", (), subtype="api_error"),
        Entry("system", "", (Block(BlockKind.TEXT, "Conversation compacted"),), subtype="compact_boundary"),
        Entry("system", "", (Block(BlockKind.TEXT, "1200"),), subtype="turn_duration"),
        Entry("system", "", (Block(BlockKind.TEXT, "hook ran: pre_tool"),)),
    )
    assert _body(render_markdown(t)) == (
        "\n_api error_\n\n_compact boundary: Conversation compacted_\n\n_turn 1.2 s_\n\n_hook ran: pre\\_tool_\n"
    )


def test_compaction_summary_gets_its_own_heading() -> None:
    t = _t(_text("user", "2025-01-01T10:30:00Z", "This session continues…", is_compact_summary=True))
    assert "## Compaction summary · 2025-01-01 10:30:00\n\nThis session continues…\n" in render_markdown(t)


def test_meta_lines_are_compact_quoted_lines() -> None:
    t = _t(_text("user", "", "<command-name>/clear</command-name>\n  <command-args></command-args>", is_meta=True))
    assert (
        _body(render_markdown(t)) == "\n> _meta:_ <command-name>/clear</command-name> <command-args></command-args>\n"
    )


def test_a_subagent_run_is_one_line_naming_the_subagent_session() -> None:
    sub = Transcript(session_id="s-1/agent-a1", kind=SessionKind.SUBAGENT, source_path="", title="Research X")
    call = Block(BlockKind.TOOL_USE, tool_name="Task", tool_id="tu1", tool_input={"prompt": "long…"})
    result = Block(BlockKind.TOOL_RESULT, "the subagent's report", tool_id="tu1")
    t = _t(
        Entry("assistant", "", (Block(BlockKind.TEXT, "Delegating."), call)),
        Entry("user", "", (result,), subagent_ref="s-1/agent-a1"),
        subagents=[sub],
    )
    assert _body(render_markdown(t)) == "\n## Assistant\n\nDelegating.\n\n→ subagent `s-1/agent-a1`: Research X\n"


def test_images_are_named() -> None:
    t = _t(Entry("user", "", (Block(BlockKind.IMAGE, "image/png"), Block(BlockKind.TEXT, "see"))))
    assert "_[image: image/png]_\n\nsee\n" in render_markdown(t)


def test_output_has_unix_newlines_no_trailing_whitespace_and_one_final_newline() -> None:
    md = render_markdown(_t(_text("user", "", "a  \r\nb\t\r\n\n\n")))
    assert "\r" not in md
    assert all(line == line.rstrip() for line in md.split("\n"))
    assert md.endswith("a\nb\n")
    assert not md.endswith("\n\n")


def test_timezone_setting_converts_times() -> None:
    t = _t(_text("user", "2025-06-14T22:30:00Z", "hi"), started_at="2025-06-14T22:30:00Z")
    md = render_markdown(t, timezone="Asia/Tokyo")
    assert "- started: 2025-06-15 07:30:00 +09:00\n" in md
    assert "- timezone: Asia/Tokyo\n" in md
    assert "## User · 07:30:00\n" in md
    md_ny = render_markdown(t, timezone="America/New_York")
    assert "- started: 2025-06-14 18:30:00 -04:00\n" in md_ny


def test_unknown_timezone_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="Mars/Olympus"):
        render_markdown(_t(), timezone="Mars/Olympus")


def test_tool_input_key_order_does_not_change_the_output() -> None:
    def with_input(tool_input: dict[str, object]) -> Transcript:
        return _t(Entry("assistant", "", (Block(BlockKind.TOOL_USE, tool_name="X", tool_input=tool_input),)))

    a = with_input({"a": 1, "b": {"y": 2, "x": 1}, "c": "z"})
    b = with_input({"c": "z", "b": {"x": 1, "y": 2}, "a": 1})
    assert render_markdown(a) == render_markdown(b)


_SUBPROCESS_RENDER = """
import sys
from pathlib import Path
from memory.render.markdown import render_markdown
from memory.sources.claude import parse_claude_file
out = []
for name in sys.argv[1:]:
    for t in parse_claude_file(Path(name)):
        out.append(render_markdown(t, timezone="Europe/Berlin"))
sys.stdout.buffer.write("\\x00".join(out).encode("utf-8"))
"""


def test_render_is_byte_identical_under_other_tz_locale_and_hash_seed() -> None:
    files = [str(p) for p in _fixtures()]
    here = "\x00".join(
        render_markdown(t, timezone="Europe/Berlin") for f in files for t in parse_claude_file(Path(f))
    ).encode("utf-8")
    for env_overrides in (
        {"TZ": "Pacific/Kiritimati", "LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8", "PYTHONHASHSEED": "1"},
        {"TZ": "America/Los_Angeles", "LANG": "C", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "4242"},
    ):
        env = {**os.environ, **env_overrides, "PYTHONPATH": str(REPO), "PYTHONUTF8": "1"}
        proc = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS_RENDER, *files],
            env=env,
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=120,
        )
        assert proc.stdout == here


# --- golden files over the transcript fixtures ----------------------------------------------------------


def _fixtures() -> list[Path]:
    return sorted(
        p
        for p in TRANSCRIPTS.rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".json") and not p.name.endswith(".meta.json")
    )


def _render_file(path: Path) -> str:
    return "\n---\n\n".join(render_markdown(t) for t in parse_claude_file(path))


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: str(p.relative_to(TRANSCRIPTS)))
def test_golden_markdown(path: Path) -> None:
    golden = GOLDEN / (str(path.relative_to(TRANSCRIPTS)) + ".md")
    rendered = _render_file(path)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(rendered.encode("utf-8"))
    assert golden.exists(), f"missing {golden}; run with UPDATE_GOLDEN=1 to create it"
    assert rendered == golden.read_bytes().decode("utf-8")
