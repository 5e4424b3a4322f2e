"""Claude Code transcripts (JSONL, or the ``{"loglines": [...]}`` JSON export) → `Transcript`.

A main file yields ``[main, *subagents]``: inline sidechain lines are split into their own
``SUBAGENT`` transcripts (also listed in ``main.subagents``), and the main entry that carries the
Task result names the subagent in ``Entry.subagent_ref``. A subagent file (``agent-*.jsonl``, or
anything with an ``agent_hint``) yields ``[subagent]``.

Only the live branch is kept: rewinds leave abandoned sibling subtrees in the file, so we walk
back from the last entry through ``parentUuid`` (``logicalParentUuid`` across compact
boundaries). Where the chain breaks (a null or unknown parent), the walk resumes at the nearest
earlier line of the same thread, so old files without parent links lose nothing.

The file is read line by line; every string is clipped to ``tool_output_limit`` and redacted as
it is parsed, so memory grows with the kept text, not with the file size.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory.models import Block, BlockKind, Entry, SessionKind, Transcript
from memory.sources.claude_lines import agent_of, blocks_of, is_meta, str_field, system_text, text_block
from memory.sources.jsonl import (
    PROSE_FACTOR,
    JsonLine,
    ReadStats,
    TextClipper,
    identity,
    iter_json_lines,
    type_name,
    without_lone_surrogates,
)

__all__ = ["PROSE_FACTOR", "parse_claude_file"]

_TITLE_CHARS = 120


@dataclass(slots=True)
class _Thread:
    """The lines of one conversation thread (the main one, or one inline sidechain) in file order."""

    nodes: array[int] = field(default_factory=lambda: array("q"))
    agent_id: str = ""
    meta: dict[str, str] = field(default_factory=dict)  # first cwd / gitBranch / version / sessionId seen
    model: str = ""


class _Parser:
    def __init__(self, clip: TextClipper, subagent_file: bool) -> None:
        self.clip = clip
        self.subagent_file = subagent_file
        # Per-node columns (compact arrays: a 100 MB file can hold hundreds of thousands of lines).
        self.parent = array("q")  # node -> parent node, -1 = none or unknown
        self.thread_of: list[str] = []  # node -> thread key ("" = main)
        self.pos = array("q")  # node -> position in its thread's node list
        self.entry: list[Entry | None] = []
        self.agent_ref: list[str] = []
        self.by_uuid: dict[str, int] = {}
        self.threads: dict[str, _Thread] = {"": _Thread()}
        self.titles: dict[str, str] = {}
        self.summaries: list[tuple[str, str]] = []  # (summary, leafUuid)
        self.skipped: dict[str, int] = {}
        self.task_titles: dict[str, str] = {}  # tool_use id -> Task description
        self.agent_titles: dict[str, str] = {}  # agentId -> Task description
        self.launched: list[str] = []  # agentIds named by main lines, in file order
        self.task_calls: list[tuple[str, int]] = []  # (tool_use id, node) of main-thread Task calls
        self.result_node: dict[str, int] = {}  # Task tool_use id -> node holding its result
        self.linked_calls: set[str] = set()  # Task calls whose result names an agentId

    def feed(self, line: JsonLine, reader: ReadStats) -> None:
        rec = line.obj
        kind = rec.get("type")
        if kind == "summary":
            text, _ = self.clip.text(str_field(rec, "summary"))
            if text:
                self.summaries.append((text, str_field(rec, "leafUuid")))
            return
        if kind in ("custom-title", "ai-title", "agent-name"):
            key = {"custom-title": "customTitle", "ai-title": "aiTitle", "agent-name": "agentName"}[kind]
            if str_field(rec, key):
                self.titles[kind] = self.clip.text(str_field(rec, key))[0]
            return
        entry: Entry | None = None
        if kind in ("user", "assistant", "system"):
            entry = self._entry(rec, line.line_no, reader)
        else:
            name = type_name(kind)
            self.skipped[name] = self.skipped.get(name, 0) + 1
        if entry is None and not str_field(rec, "uuid"):
            return
        self._add_node(rec, entry)

    def _entry(self, rec: dict[str, Any], line_no: int, reader: ReadStats) -> Entry | None:
        kind = str(rec["type"])
        ts, uuid = str_field(rec, "timestamp"), str_field(rec, "uuid")
        if kind == "system":
            text = system_text(rec)
            blocks = self._blocks(text) if text else ()
            return Entry(
                "system",
                ts,
                blocks,
                uuid=uuid,
                line_no=line_no,
                subtype=str_field(rec, "subtype"),
                is_meta=bool(blocks) and is_meta(rec, blocks),
            )
        message = rec.get("message")
        if not isinstance(message, dict):
            reader.problem(line_no, "message is not an object")
            return None
        if "content" not in message:
            reader.problem(line_no, "message has no content")
            return None
        blocks = blocks_of(message["content"], self.clip, rec.get("toolUseResult"))
        for b in blocks:
            if b.kind is BlockKind.TOOL_USE and b.tool_name in ("Task", "Agent"):
                desc = b.tool_input.get("description")
                if isinstance(desc, str) and desc:
                    self.task_titles[b.tool_id] = desc
        model = message.get("model")
        return Entry(
            kind,
            ts,
            blocks,
            uuid=uuid,
            line_no=line_no,
            is_compact_summary=rec.get("isCompactSummary") is True,
            is_meta=kind == "user" and is_meta(rec, blocks),
            model=model if isinstance(model, str) and model != "<synthetic>" else "",
        )

    def _blocks(self, text: str) -> tuple[Block, ...]:
        clipped, cut = self.clip.prose(text)
        return (text_block(BlockKind.TEXT, clipped, cut),)

    def _add_node(self, rec: dict[str, Any], entry: Entry | None) -> None:
        idx = len(self.parent)
        parent_uuid = rec.get("parentUuid") or rec.get("logicalParentUuid")
        parent = self.by_uuid.get(parent_uuid, -1) if isinstance(parent_uuid, str) else -1
        key, agent = "", ""
        if rec.get("isSidechain") is True and not self.subagent_file:
            if str_field(rec, "agentId"):
                key = f"agent:{str_field(rec, 'agentId')}"
            elif parent >= 0 and self.thread_of[parent]:
                key = self.thread_of[parent]
            else:
                key = f"chain:{idx}"  # a sidechain without agentId: matched to a Task call later
        elif not self.subagent_file:
            agent = agent_of(rec)
            self._note_tasks(idx, entry, agent)
        if parent >= 0 and self.thread_of[parent] != key:
            parent = -1
        thread = self.threads.setdefault(key, _Thread(agent_id=key[6:] if key.startswith("agent:") else ""))
        self.parent.append(parent)
        self.thread_of.append(key)
        self.pos.append(len(thread.nodes))
        thread.nodes.append(idx)
        self.entry.append(entry)
        self.agent_ref.append(agent)
        if uuid := str_field(rec, "uuid"):
            self.by_uuid[uuid] = idx
        for src, dst in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version"), ("sessionId", "sid")):
            if str_field(rec, src) and dst not in thread.meta:
                value = str_field(rec, src)
                # A folder or branch name can carry a token too; the session id is an identifier, kept as is.
                thread.meta[dst] = value if dst == "sid" else self.clip.redact(value)
        if entry is not None and entry.model:
            thread.model = entry.model

    def _note_tasks(self, idx: int, entry: Entry | None, agent: str) -> None:
        """Remember Task calls and results of the main thread, to link sidechains to them."""
        if agent:
            self.launched.append(agent)
        for b in entry.blocks if entry else ():
            if b.kind is BlockKind.TOOL_USE and b.tool_id in self.task_titles:
                self.task_calls.append((b.tool_id, idx))
            elif b.kind is BlockKind.TOOL_RESULT and b.tool_id in self.task_titles:
                self.result_node[b.tool_id] = idx
                if agent:
                    self.linked_calls.add(b.tool_id)
                    self.agent_titles.setdefault(agent, self.task_titles[b.tool_id])

    def name_sidechains(self) -> None:
        """Give sidechains without agentId a name and a link from the main thread.

        First the agentIds that Task results name (newer files), in file order; then, for files
        that name none (older ones), the unlinked Task calls in order, linked at their result.
        """
        explicit = {t.agent_id for t in self.threads.values() if t.agent_id}
        pending = iter([a for a in dict.fromkeys(self.launched) if a not in explicit])
        calls = iter([c for c in self.task_calls if c[0] not in self.linked_calls])
        for key, thread in self.threads.items():
            if not key.startswith("chain:"):
                continue
            if agent := next(pending, ""):
                thread.agent_id = agent
                continue
            root = self.entry[thread.nodes[0]]
            thread.agent_id = root.uuid[:8] if root and root.uuid else f"sidechain{key[6:]}"
            if call := next(calls, None):
                tool_id, use_node = call
                self.agent_ref[self.result_node.get(tool_id, use_node)] = thread.agent_id
                self.agent_titles[thread.agent_id] = self.task_titles[tool_id]

    def live_entries(self, thread: _Thread, session_id: str) -> list[Entry]:
        """The entries on the live branch of one thread, oldest first, with their subagent links set."""
        last = next((n for n in reversed(thread.nodes) if self.entry[n] is not None), -1)
        chain = array("q")
        seen = bytearray(len(self.parent))  # a byte per node: large files have hundreds of thousands
        cur = last
        while cur >= 0 and not seen[cur]:
            seen[cur] = 1
            chain.append(cur)
            nxt = self.parent[cur]
            if nxt < 0 or seen[nxt]:
                # Broken chain: resume at the nearest earlier line of this thread instead of losing it.
                p = self.pos[cur] - 1
                while p >= 0 and seen[thread.nodes[p]]:
                    p -= 1
                nxt = thread.nodes[p] if p >= 0 else -1
            cur = nxt
        entries = []
        for n in reversed(chain):
            e = self.entry[n]
            if e is not None:
                ref = self.agent_ref[n]
                entries.append(replace(e, subagent_ref=f"{session_id}/agent-{ref}") if ref and session_id else e)
        return entries


def _first_user_text(entries: list[Entry]) -> str:
    for e in entries:
        if e.role == "user" and not e.is_meta and not e.is_compact_summary:
            for b in e.blocks:
                if b.kind is BlockKind.TEXT and b.text.strip():
                    return b.text
    return ""


def _one_line(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= _TITLE_CHARS else flat[: _TITLE_CHARS - 1].rstrip() + "…"


def _read_records(path: Path, reader: ReadStats) -> Iterator[JsonLine]:
    if path.suffix == ".json":
        # The loglines export is one JSON document; such exports are small, so it is loaded whole.
        with path.open("rb") as fh:
            raw = fh.read()
        reader.bytes_read = len(raw)
        reader.lines_read = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
        try:
            doc = without_lone_surrogates(json.loads(raw.decode("utf-8")))
        except UnicodeDecodeError:
            reader.problem(1, "invalid utf-8")
            return
        except json.JSONDecodeError:
            reader.problem(1, "invalid json")
            return
        except RecursionError:
            reader.problem(1, "json nested too deeply")
            return
        lines = doc.get("loglines") if isinstance(doc, dict) else None
        if not isinstance(lines, list):
            reader.problem(1, "no loglines list")
            return
        for i, rec in enumerate(lines, 1):  # "line" numbers here are 1-based positions in the list
            if isinstance(rec, dict):
                yield JsonLine(i, rec)
            else:
                reader.problem(i, "not an object")
        return
    with path.open("rb") as fh:
        yield from iter_json_lines(fh, reader)


def _subagent_meta(path: Path) -> dict[str, Any]:
    meta = path.with_name(path.stem + ".meta.json")
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def parse_claude_file(
    path: Path,
    *,
    redact: Callable[[str], str] = identity,
    tool_output_limit: int = 2000,
    session_hint: str = "",
    parent_hint: str = "",
    agent_hint: str = "",
    on_bytes: Callable[[int], None] | None = None,
) -> list[Transcript]:
    """Parse one Claude Code transcript file: ``[main, *inline subagents]``, or ``[subagent]`` for an agent file.

    Raises ``OSError`` only when the file cannot be opened or read; bad lines are `LineProblem`s.
    ``on_bytes`` is told how far the read has got, every few megabytes (from the calling thread).
    """
    subagent_file = bool(agent_hint) or path.name.startswith("agent-") or path.parent.name == "subagents"
    clip = TextClipper(redact, tool_output_limit)
    reader = ReadStats(str(path), on_bytes=on_bytes)
    parser = _Parser(clip, subagent_file)
    for line in _read_records(path, reader):
        try:
            parser.feed(line, reader)
        except RecursionError:  # a value nested too deep for the walks that clip it: this line only
            reader.problem(line.line_no, "json nested too deeply")
    parser.by_uuid.clear()  # only needed while linking lines; free it before the entries are assembled

    main_thread = parser.threads[""]
    sid = main_thread.meta.get("sid") or next((t.meta["sid"] for t in parser.threads.values() if "sid" in t.meta), "")
    if subagent_file:
        parent = sid or parent_hint or session_hint
        agent = agent_hint or path.stem.removeprefix("agent-")
        session_id, kind = (f"{parent}/agent-{agent}" if parent else f"agent-{agent}"), SessionKind.SUBAGENT
    else:
        parent, agent = "", ""
        session_id, kind = sid or session_hint or path.stem, SessionKind.MAIN

    parser.name_sidechains()
    main = _build(parser, main_thread, session_id, kind, path, parent_id=parent, agent_id=agent)
    main.problems = reader.problems
    main.lines_read, main.bytes_read = reader.lines_read, reader.bytes_read
    main.skipped_types.update(parser.skipped)
    if subagent_file:
        meta = _subagent_meta(path)
        if isinstance(meta.get("description"), str) and meta["description"]:
            main.title = _one_line(clip.text(meta["description"])[0])
        return [main]
    for key, thread in parser.threads.items():
        if not key:
            continue
        sub = _build(
            parser,
            thread,
            f"{session_id}/agent-{thread.agent_id}",
            SessionKind.SUBAGENT,
            path,
            parent_id=session_id,
            agent_id=thread.agent_id,
        )
        if thread.agent_id in parser.agent_titles:
            sub.title = _one_line(parser.agent_titles[thread.agent_id])
        main.subagents.append(sub)
    return [main, *main.subagents]


def _build(
    parser: _Parser, thread: _Thread, session_id: str, kind: SessionKind, path: Path, *, parent_id: str, agent_id: str
) -> Transcript:
    # Main lines that name a subagent link to it; subagent threads never do (their agent_ref is "").
    entries = parser.live_entries(thread, session_id if kind is SessionKind.MAIN else "")
    is_main = thread is parser.threads[""]
    summaries = [s for s, _ in parser.summaries] if is_main else []
    # The summary written for a leaf on the live branch describes it best; else the newest one.
    leaves = {leaf for _, leaf in parser.summaries if leaf}
    on_branch = {e.uuid for e in entries if e.uuid in leaves}
    best = next((s for s, leaf in reversed(parser.summaries) if leaf in on_branch), summaries[-1] if summaries else "")
    titles = parser.titles if is_main else {}
    title = (
        titles.get("custom-title")
        or titles.get("ai-title")
        or titles.get("agent-name")
        or best
        or _first_user_text(entries)
    )
    stamps = [e.timestamp for e in entries if e.timestamp]
    return Transcript(
        session_id=session_id,
        kind=kind,
        source_path=str(path),
        entries=entries,
        parent_id=parent_id,
        agent_id=agent_id,
        cwd=thread.meta.get("cwd", ""),
        git_branch=thread.meta.get("git_branch", ""),
        title=_one_line(title),
        summaries=summaries,
        model=thread.model,
        version=thread.meta.get("version", ""),
        started_at=min(stamps, default=""),
        ended_at=max(stamps, default=""),
    )
