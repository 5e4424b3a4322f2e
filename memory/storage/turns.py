"""A session's rendered transcript by turns: where each turn (a ``## User`` / ``## Assistant`` heading that
memory/render/markdown.py wrote) starts, for the session page's outline, its pages and its permalinks.

The index is found by scanning the stored markdown's bytes once, outside code fences (a tool's output that
shows a transcript is fenced, so its headings are no turns): one regular-expression pass over the blob, about
40 ms for 10 MB here. That is too slow to repeat on every page view (reads run on the server's event loop),
and the markdown of a session only changes with its ``content_sha``, so indexes are kept by that hash, a few
at a time. Same hash, same bytes, same index: nothing a tenant could learn from another's entry.
"""

from __future__ import annotations

import bisect
import json
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PART_BYTES", "TaskCall", "Turn", "TurnIndex", "TurnText", "transcript_turns", "turn_index"]

PART_BYTES = 128 * 1024  # the most of one long turn a page shows at once (a phone's worth of scrolling)

# Lines that matter, each found at a line start: a turn heading (exactly as the renderer writes them), a
# fence line, a tool call, a tool result, a subagent line. Matching from the "\n" lets the regex engine skip
# ahead to each line start in C.
_EVENTS = re.compile(
    rb"\n(?:"
    rb"(?P<turn>## (?:User|Assistant|Compaction summary)(?: \xc2\xb7 [0-9: -]{8,19})?\n|## Summaries\n)"
    rb"|(?P<fence>[ \t]*(?:`{3,}|~{3,}))"
    rb"|(?P<tool>\*\*Tool: )"
    rb"|(?P<result>\*\*Result)"
    rb"|(?P<sub>\xe2\x86\x92 subagent `)"
    rb")"
)
_RUN = re.compile(rb"[ \t]*(`+|~+)")
_TASK = re.compile(rb"\*\*Tool: (?:Task|Agent)\*\*\n")
_SUBAGENT = re.compile(rb"\xe2\x86\x92 subagent `([^`\n]+)`")
_PREVIEW_CHARS = 120
_CACHED = 8


@dataclass(frozen=True, slots=True)
class Turn:
    n: int  # 0 is the header (title and facts); 1… the turns, in order: a turn's permalink
    start: int  # byte offset of its heading line
    end: int  # where the next turn starts, or the transcript's length
    label: str  # its heading without "## " ("User · 10:00:00")
    preview: str  # its first line of text, for the outline
    tools: int  # tool calls in it
    parts: tuple[int, ...]  # where a long turn's later pages start, at a tool call or a paragraph when it can


@dataclass(frozen=True, slots=True)
class TaskCall:
    at: int  # byte offset of its "**Tool: Task**" line
    description: str


@dataclass(frozen=True, slots=True)
class TurnIndex:
    total: int  # bytes
    turns: tuple[Turn, ...]  # turns[n].n == n
    tasks: tuple[TaskCall, ...]  # Task (subagent) calls the renderer did not replace by a subagent line
    subagents: tuple[str, ...]  # session ids the transcript's "→ subagent" lines name, in order

    def turn_at(self, offset: int) -> Turn:
        """The turn holding byte ``offset`` (the last one past the end)."""
        starts = [t.start for t in self.turns]  # a list of ints: ~1 ms for 10,000 turns
        return self.turns[max(0, bisect.bisect_right(starts, offset) - 1)]


@dataclass(frozen=True, slots=True)
class TurnText:
    index: TurnIndex
    start: int
    end: int
    text: str  # bytes start…end, decoded


def _fence_close(line: bytes, marker: bytes) -> bool:
    """service/web/markdown.py's rule: a fence ends at a line that starts (after its indent) with the marker."""
    return line.lstrip().startswith(marker)


def _description(data: bytes, at: int) -> str:
    """The ``description:`` of the Task call whose input fence follows ``at`` (keys are sorted: it comes early)."""
    lines = data[at : at + 4096].split(b"\n")
    fence = b""
    for i, line in enumerate(lines):
        if not fence:
            if line.strip():
                fence = line.strip()
                if not fence.startswith(b"```"):
                    return ""
            continue
        if line.startswith(fence):
            return ""
        if line.startswith(b"description: "):
            value = line[13:].decode("utf-8", "replace")
            if value == "|":  # a multi-line description: its indented lines, joined
                rest = [x[2:].decode("utf-8", "replace") for x in lines[i + 1 :] if x.startswith(b"  ")]
                return " ".join(x.strip() for x in rest).strip()
            if value.startswith('"'):
                try:
                    return str(json.loads(value))
                except ValueError:
                    return value
            return value
        if i > 40:
            return ""
    return ""


def _preview(data: bytes, start: int, end: int) -> str:
    """The first line of text after the heading at ``start``, without markdown's marks."""
    at = data.find(b"\n", start, end)
    while 0 <= at < end:
        nxt = data.find(b"\n", at + 1, end)
        line = data[at + 1 : nxt if nxt >= 0 else min(end, at + 1 + 4 * _PREVIEW_CHARS)]
        text = line[: 4 * _PREVIEW_CHARS].decode("utf-8", "replace").strip().lstrip(">").strip().strip("*_`").strip()
        if text and not text.startswith("```"):
            return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1].rstrip() + "…"
        at = nxt
    return ""


def _utf8_start(data: bytes, at: int) -> int:
    while 0 < at < len(data) and data[at] & 0xC0 == 0x80:  # not inside a character
        at -= 1
    return at


def _parts(data: bytes, start: int, end: int, cuts: list[int], size: int) -> tuple[int, ...]:
    """Where pages of a turn longer than ``size`` start: the last block (tool call, result) that starts in the
    second half of each page's bytes, else the last paragraph, else the last line, else a character boundary."""
    out: list[int] = []
    at = start
    while end - at > size:
        low, high = at + size // 2, at + size
        i = bisect.bisect_right(cuts, high) - 1
        if i >= 0 and cuts[i] > low:
            cut = cuts[i]
        else:
            para = data.rfind(b"\n\n", low, high)
            line = data.rfind(b"\n", low, high)
            cut = para + 2 if para >= 0 else line + 1 if line >= 0 else _utf8_start(data, high)
        out.append(cut)
        at = cut
    return tuple(out)


def turn_index(data: bytes, part_bytes: int = PART_BYTES) -> TurnIndex:
    """The turns of one rendered transcript (``data``, its UTF-8 bytes)."""
    total = len(data)
    padded = b"\n" + data  # a match's start in ``padded`` is the offset of its line in ``data``
    heads: list[tuple[int, str]] = [(0, "Start")]
    cuts: list[int] = []  # tool calls and results, outside fences: where a long turn may be split
    tools: list[int] = []
    tasks: list[TaskCall] = []
    subagents: list[str] = []
    marker = b""  # the open fence's run of backticks or tildes, "" outside a fence
    for m in _EVENTS.finditer(padded):
        at = m.start()  # == the line's offset in data
        if marker:
            if m.group("fence") is not None:
                line_end = data.find(b"\n", at)
                if _fence_close(data[at : line_end if line_end >= 0 else total], marker):
                    marker = b""
            continue
        if m.group("turn") is not None:
            heads.append((at, m.group("turn")[3:-1].decode("utf-8")))
        elif m.group("fence") is not None:
            run = _RUN.match(data, at)
            if run and at + 3 >= run.start(1):  # at most three spaces before an opening fence
                marker = run.group(1)
        elif m.group("tool") is not None:
            cuts.append(at)
            tools.append(at)
            if task := _TASK.match(data, at):
                tasks.append(TaskCall(at, _description(data, task.end())))
        elif m.group("result") is not None:
            cuts.append(at)
        elif (sub := _SUBAGENT.match(data, at)) is not None:
            subagents.append(sub.group(1).decode("utf-8", "replace"))
    turns: list[Turn] = []
    for n, (start, label) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else total
        if n == 0 and end == 0:
            end = 0  # no header before the first turn: an empty turn 0
        count = bisect.bisect_left(tools, end) - bisect.bisect_left(tools, start)
        parts = _parts(data, start, end, cuts, part_bytes) if end - start > part_bytes else ()
        turns.append(Turn(n, start, end, label, _preview(data, start, end) if n else "", count, parts))
    return TurnIndex(total=total, turns=tuple(turns), tasks=tuple(tasks), subagents=tuple(dict.fromkeys(subagents)))


_cache: OrderedDict[tuple[str, int], TurnIndex] = OrderedDict()
_cache_lock = threading.Lock()  # reads run on any thread that calls Database.read


def transcript_turns(
    conn: sqlite3.Connection,
    session_id: str,
    pick: Callable[[TurnIndex], tuple[int, int]],
    part_bytes: int = PART_BYTES,
) -> TurnText | None:
    """The session's turn index and the bytes ``pick(index)`` chooses (start, end), in one snapshot."""
    row = conn.execute("SELECT rowid, content_sha FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    key = (str(row[1]), part_bytes)
    with conn.blobopen("sessions", "markdown", int(row[0]), readonly=True) as blob:
        with _cache_lock:
            index = _cache.get(key)
            if index is not None:
                _cache.move_to_end(key)
        if index is None or index.total != len(blob):
            index = turn_index(blob.read(), part_bytes)
            with _cache_lock:
                _cache[key] = index
                while len(_cache) > _CACHED:
                    _cache.popitem(last=False)
        start, end = pick(index)
        start = max(0, min(start, index.total))
        end = max(start, min(end, index.total))
        blob.seek(start)
        text = blob.read(end - start).decode("utf-8", errors="replace")
    return TurnText(index=index, start=start, end=end, text=text)
