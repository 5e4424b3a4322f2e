"""A rendered transcript's turn index (memory/storage/turns.py): the renderer's turn headings, found outside
code fences; Task calls and subagent lines; long turns split at blocks; and the read through `Eywa`, which
keeps an index per content hash and reads the chosen bytes in the same snapshot."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from memory.facade import Eywa
from memory.models import Block, BlockKind, Entry, SessionKind, Transcript
from memory.render.markdown import render_markdown
from memory.settings import MemorySettings
from memory.storage.turns import TurnIndex, turn_index

FAKE_TURN = "## User · 10:00:00"  # a turn heading inside tool output: no turn of this session


def _transcript(entries: list[Entry]) -> Transcript:
    return Transcript(
        session_id="s1",
        kind=SessionKind.MAIN,
        source_path="/x.jsonl",
        entries=entries,
        title="A session",
        started_at="2026-03-02T10:00:00Z",
    )


def _user(text: str, second: int) -> Entry:
    return Entry("user", f"2026-03-02T10:00:{second:02d}Z", (Block(BlockKind.TEXT, text=text),))


def _assistant(second: int, *blocks: Block) -> Entry:
    return Entry("assistant", f"2026-03-02T10:00:{second:02d}Z", blocks)


def _sample() -> bytes:
    entries = [
        _user("fix the exporter\nsecond line", 1),
        _assistant(
            2,
            Block(BlockKind.TEXT, text="Looking.\n\n## Plan\n\nnot a turn"),
            Block(BlockKind.TOOL_USE, tool_name="Bash", tool_id="t1", tool_input={"command": "cat old.md"}),
        ),
        Entry("user", "2026-03-02T10:00:03Z", (Block(BlockKind.TOOL_RESULT, tool_id="t1", text=f"{FAKE_TURN}\nhi"),)),
        _assistant(
            4,
            Block(
                BlockKind.TOOL_USE,
                tool_name="Task",
                tool_id="t2",
                tool_input={"description": "Check the tests", "prompt": "run them\nall", "subagent_type": "x"},
            ),
        ),
        _user("thanks", 5),
    ]
    return render_markdown(_transcript(entries)).encode("utf-8")


def test_turns_are_the_renderers_headings_outside_fences() -> None:
    data = _sample()
    index = turn_index(data)
    labels = [t.label for t in index.turns]
    assert labels == ["Start", "User · 10:00:01", "Assistant · 10:00:02", "User · 10:00:05"]
    assert FAKE_TURN.encode() in data  # the fenced one is there, and no turn
    for t in index.turns[1:]:
        assert data[t.start :].startswith(b"## " + t.label.encode())
    assert [t.end for t in index.turns[:-1]] == [t.start for t in index.turns[1:]]
    assert index.turns[-1].end == index.total == len(data)
    assert index.turns[1].preview == "fix the exporter"
    assert index.turns[2].tools == 2  # Bash and Task


def test_task_calls_carry_their_description_and_subagent_lines_their_id() -> None:
    index = turn_index(_sample())
    assert [t.description for t in index.tasks] == ["Check the tests"]
    assert _sample()[index.tasks[0].at :].startswith(b"**Tool: Task**")
    linked = Transcript(
        session_id="s1",
        kind=SessionKind.MAIN,
        source_path="/x.jsonl",
        entries=[
            _assistant(1, Block(BlockKind.TOOL_USE, tool_name="Task", tool_id="t9", tool_input={"description": "d"})),
            Entry(
                "user",
                "2026-03-02T10:00:02Z",
                (Block(BlockKind.TOOL_RESULT, tool_id="t9", text="done"),),
                subagent_ref="s1/agent-a1",
            ),
        ],
    )
    named = turn_index(render_markdown(linked).encode("utf-8"))
    assert named.subagents == ("s1/agent-a1",) and named.tasks == ()


def test_a_long_turn_is_split_into_parts_at_its_blocks() -> None:
    calls = [
        Block(BlockKind.TOOL_USE, tool_name="Read", tool_id=f"r{i}", tool_input={"file_path": f"/f{i}.py"})
        for i in range(400)
    ]
    data = render_markdown(_transcript([_user("go", 1), _assistant(2, *calls)])).encode("utf-8")
    index = turn_index(data, part_bytes=2048)
    long = index.turns[2]
    assert len(long.parts) >= (long.end - long.start) // 2048
    bounds = [long.start, *long.parts, long.end]
    assert all(b - a <= 2048 for a, b in itertools.pairwise(bounds))
    assert all(data[p:].startswith(b"**Tool: Read**") for p in long.parts)
    assert index.turn_at(long.parts[3]).n == 2 and index.turn_at(0).n == 0


def test_an_empty_transcript_has_only_its_start() -> None:
    index = turn_index(b"")
    assert index == TurnIndex(total=0, turns=index.turns, tasks=(), subagents=())
    assert [(t.n, t.start, t.end) for t in index.turns] == [(0, 0, 0)]


async def test_eywa_reads_the_index_and_the_chosen_bytes_in_one_snapshot(tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = MemorySettings(home=home, claude_config_dir=home / "c", codex_home=home / "x", llm_enabled=False)
    src = tmp_path / "src"
    src.mkdir()
    lines = []
    parent = None
    for n in range(5):
        for role in ("user", "assistant"):
            content: object = f"turn {n} {role} — ünïcode"
            if role == "assistant":
                content = [{"type": "text", "text": content}]
            lines.append(
                {
                    "type": role,
                    "sessionId": "sess-t",
                    "uuid": f"{role}{n}",
                    "parentUuid": parent,
                    "timestamp": f"2026-03-02T10:00:{n:02d}Z",
                    "message": {"role": role, "content": content},
                }
            )
            parent = f"{role}{n}"
    (src / "sess-t.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([src], use_llm=False)
        third = await eywa.transcript_turns("sess-t", lambda ix: (ix.turns[3].start, ix.turns[3].end))
        assert third is not None
        assert third.text.startswith("## User · 10:00:01") and "turn 1 user — ünïcode" in third.text
        again = await eywa.transcript_turns("sess-t", lambda ix: (0, ix.total))
        assert again is not None and again.index is third.index  # kept: the same content, not scanned again
        row = await eywa.session_row("sess-t", transcript=True)
        assert row is not None and again.text == row.markdown
        assert await eywa.transcript_turns("no-such", lambda ix: (0, 0)) is None
