"""A page of a rendered transcript (memory/render/markdown.py's layout) as parts the session page lays out:
turn headings with permalinks, tool calls (Edit and MultiEdit as diffs, Task linked to its subagent), tool
results to fold away, and the prose between them as markdown.

The stored markdown is the only record of a tool call's input the memory keeps, so the call is read back from
the renderer's own layout: ``**Tool: Name**`` and a fence of ``key: value`` lines (keys sorted, ``key: |``
blocks for multi-line strings, ``- `` list items). Anything that does not read as that layout is shown as
the text it is. Nothing here makes HTML: the template does, escaping every value (prose goes through
``render_markdown``, which escapes everything too).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from service.web.markdown import render_markdown

if TYPE_CHECKING:
    from memory.storage import Child, TurnIndex

__all__ = ["DiffLine", "Page", "Piece", "page_bounds", "parse_page", "subagent_links", "tool_input"]

PAGE_BYTES = 128 * 1024  # a page: a phone's worth of scrolling, rendered in a few ms

_TOOL = re.compile(r"^\*\*Tool: (.+)\*\*$")
_RESULT = re.compile(r"^\*\*Result( \(error\))?\*\*( _\(empty\)_)?$")
_SUBAGENT = re.compile(r"^→ subagent `([^`]+)`(?:: (.*))?$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")  # service/web/markdown.py's, so both agree on what a fence is
_SUMMARY_KEYS = ("command", "file_path", "path", "pattern", "description", "url", "query", "notebook_path")
_LONG_INPUT = 12  # lines: a longer tool input is folded too


@dataclass(frozen=True, slots=True)
class DiffLine:
    sign: str  # "-" removed (old), "+" added (new), " " unchanged
    text: str


@dataclass(slots=True)
class Piece:
    kind: str  # "turn" | "more" | "md" | "tool" | "result" | "subagent"
    html: Markup = field(default_factory=Markup)  # "md": rendered markdown
    n: int = 0  # "turn" / "more": the turn
    label: str = ""  # "turn": its heading; "tool": the tool's name; "result": Result or Result (error)
    summary: str = ""  # "tool": its main argument in one line; "subagent": the run's title
    text: str = ""  # "tool": its input as written; "result": the output
    lines: int = 0  # "tool" / "result": how many lines ``text`` has
    diffs: list[tuple[str, list[DiffLine]]] = field(default_factory=list)  # "tool" Edit / MultiEdit: (file, diff)
    link: str = ""  # "tool" Task / "subagent": the subagent session's id
    error: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    first: int  # the first turn shown (whole or in part)
    part: int  # which part of it the page starts at (0: its start)
    start: int  # bytes
    end: int
    prev: tuple[int, int] | None  # (turn, part) of the page before, or None at the start
    next: tuple[int, int] | None


def _units(index: TurnIndex, turn: int) -> list[tuple[int, int, int, int]]:
    """A turn's pages-worth: (turn, part, start, end), one per part of a long turn."""
    t = index.turns[turn]
    bounds = [t.start, *t.parts, t.end]
    return [(turn, k, bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]


def page_bounds(index: TurnIndex, turn: int, part: int, size: int = PAGE_BYTES) -> Page:
    """The page that starts at part ``part`` of turn ``turn``, and whole turns (or parts) after it while the
    page stays under ``size`` bytes: a page always begins at a turn or a part, so its address is one."""
    last = len(index.turns) - 1
    turn = max(0, min(turn, last))
    units = _units(index, turn)
    part = max(0, min(part, len(units) - 1))
    start = units[part][2]
    end, at, k = units[part][3], turn, part
    while True:  # forward: the next part, else the next turn's first part, while the page has room
        if k + 1 < len(units):
            nxt = units[k + 1]
        elif at < last:
            units = _units(index, at + 1)
            nxt = units[0]
        else:
            nxt = None
        if nxt is None or nxt[3] - start > size:
            break
        at, k, end = nxt[0], nxt[1], nxt[3]
    following: tuple[int, int] | None = None
    if end < index.total:
        held = index.turn_at(end)
        following = (held.n, sum(1 for p in held.parts if p <= end))
    before: tuple[int, int] | None = None
    if start > 0:  # backward: the earliest unit a page ending here would start at
        held = index.turn_at(start - 1)
        back = _units(index, held.n)
        i = next(j for j, u in enumerate(back) if u[2] <= start - 1 < u[3])
        before = (back[i][0], back[i][1])
        while True:
            if i > 0:
                prev = back[i - 1]
            elif back[0][0] > 0:
                back = _units(index, back[0][0] - 1)
                i = len(back)
                prev = back[-1]
            else:
                break
            if start - prev[2] > size:
                break
            i -= 1
            before = (prev[0], prev[1])
    return Page(first=turn, part=part, start=start, end=end, prev=before, next=following)


def subagent_links(index: TurnIndex, children: list[Child]) -> dict[int, str]:
    """Which subagent session each Task call (by its byte offset) launched.

    The rule, in the order the data allows: a subagent the transcript names itself (a "→ subagent `id`" line:
    the parser found the id in the Task result, and the renderer replaced the call by that line) is linked
    there and no Task call claims it. Each remaining Task call goes to a remaining subagent child whose title
    is the call's description (a subagent file or sidechain takes its title from that description), the
    earliest such; the calls still unmatched then go, in transcript order, to the children still unclaimed in
    order of their start (calls start their subagents in that order)."""
    named = set(index.subagents)
    free = [c for c in children if c.kind == "subagent" and c.session_id not in named]
    links: dict[int, str] = {}
    left = []
    for call in index.tasks:
        want = " ".join(call.description.split())
        found = next((c for c in free if c.title and _same_title(c.title, want)), None)
        if found is None:
            left.append(call.at)
            continue
        links[call.at] = found.session_id
        free.remove(found)
    for at, child in zip(left, free, strict=False):
        links[at] = child.session_id
    return links


def _same_title(title: str, description: str) -> bool:
    title = " ".join(title.split())
    if title.endswith("…"):  # titles are cut to a length with an ellipsis
        return description.startswith(title[:-1].rstrip())
    return title == description


# -- a tool call's input, read back ----------------------------------------------------------------------


def _scalar(text: str) -> Any:
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _block(lines: list[str], i: int, pad: str) -> tuple[str, int]:
    """The lines of a ``key: |`` block (indented by ``pad``; blank lines lost their indent), joined."""
    out: list[str] = []
    while i < len(lines) and (lines[i].startswith(pad) or not lines[i]):
        out.append(lines[i][len(pad) :])
        i += 1
    while out and not out[-1] and i <= len(lines):  # blank lines after the block belong to what follows
        out.pop()
        i -= 1
    return "\n".join(out), i


def _value(lines: list[str], i: int, pad: str) -> tuple[Any, int]:
    """A map at indent ``pad`` (``key: value`` lines) or a list (``- `` lines) starting at line ``i``."""
    if i < len(lines) and lines[i].startswith(pad + "- "):
        items: list[Any] = []
        while i < len(lines) and lines[i].startswith(pad + "- "):
            rest = lines[i][len(pad) + 2 :]
            if re.match(r"^[^\s:]+:( |$)", rest):  # "- key: value": the item is a map, its first key here
                lines[i] = pad + "  " + rest
                item, i = _value(lines, i, pad + "  ")
            else:
                item, i = _scalar(rest), i + 1
            items.append(item)
        return items, i
    found: dict[str, Any] = {}
    while i < len(lines) and lines[i].startswith(pad) and not lines[i][len(pad) :].startswith((" ", "- ")):
        key, sep, rest = lines[i][len(pad) :].partition(": ")
        if not sep:  # "key:" and its value below, or "key: |" cut to "key:|"? neither: stop reading
            if not key.endswith(":"):
                break
            found[key[:-1]], i = _value(lines, i + 1, pad + "  ")
        elif rest == "|":
            found[key], i = _block(lines, i + 1, pad + "  ")
        else:
            found[key], i = _scalar(rest), i + 1
    return found, i


def tool_input(text: str) -> dict[str, Any]:
    """A tool call's input as memory rendered it, read back into values (strings, lists, maps)."""
    value, _ = _value(text.split("\n"), 0, "")
    return value if isinstance(value, dict) else {}


def _diff(old: str, new: str) -> list[DiffLine]:
    """Old first: each change shows the removed lines, then the added ones, between unchanged lines."""
    a, b = old.split("\n"), new.split("\n")
    out: list[DiffLine] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [DiffLine(" ", x) for x in a[i1:i2]]
            continue
        out += [DiffLine("-", x) for x in a[i1:i2]]
        out += [DiffLine("+", x) for x in b[j1:j2]]
    return out


def _edits(name: str, args: dict[str, Any]) -> list[tuple[str, list[DiffLine]]]:
    path = str(args.get("file_path") or "")
    if name == "Edit" and "old_string" in args and "new_string" in args:
        return [(path, _diff(str(args["old_string"]), str(args["new_string"])))]
    edits = args.get("edits")
    if name == "MultiEdit" and isinstance(edits, list):
        pairs = [e for e in edits if isinstance(e, dict) and "old_string" in e and "new_string" in e]
        return [(path, _diff(str(e["old_string"]), str(e["new_string"]))) for e in pairs]
    return []


def _tool(name: str, body: str, at: int, links: dict[int, str]) -> Piece:
    args = tool_input(body) if body else {}
    summary = next((str(args[k]) for k in _SUMMARY_KEYS if isinstance(args.get(k), str) and args[k]), "")
    summary = " ".join(summary.split())
    return Piece(
        "tool",
        label=name,
        summary=summary if len(summary) <= 160 else summary[:159] + "…",
        text=body,
        lines=body.count("\n") + 1 if body else 0,
        diffs=_edits(name, args),
        link=links.get(at, ""),
    )


def _fenced(lines: list[str], i: int) -> tuple[str | None, int]:
    """The body of the fence that opens at the first non-blank line from ``i``, and the line after it."""
    j = i
    while j < len(lines) and not lines[j].strip():
        j += 1
    opened = _FENCE.match(lines[j]) if j < len(lines) else None
    if opened is None:
        return None, i
    marker = opened.group(1)
    k = j + 1
    while k < len(lines) and not lines[k].lstrip().startswith(marker):
        k += 1
    return "\n".join(lines[j + 1 : k]), min(k + 1, len(lines))


def parse_page(text: str, start: int, index: TurnIndex, links: dict[int, str], part: int = 0) -> list[Piece]:
    """The pieces of the page ``text`` (bytes ``start``… of the transcript). A turn heading is one the index
    found at that offset; a Task call is linked by the offset of its line (``subagent_links``)."""
    lines = text.split("\n")
    offsets: list[int] = []
    at = start
    for line in lines:
        offsets.append(at)
        at += len(line.encode("utf-8")) + 1
    stop = at - 1  # the last line has no newline of its own
    heads = {t.start: t for t in index.turns if t.n and start <= t.start < stop}
    pieces: list[Piece] = []
    if part:  # a later part of a long turn: say whose
        held = index.turn_at(start)
        pieces.append(Piece("more", n=held.n, label=held.label, lines=part + 1))
    prose: list[str] = []

    def flush() -> None:
        if any(x.strip() for x in prose):
            pieces.append(Piece("md", html=render_markdown("\n".join(prose))))
        prose.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        here = offsets[i]
        turn = heads.get(here)
        if turn is not None and line.startswith("## "):
            flush()
            pieces.append(Piece("turn", n=turn.n, label=turn.label))
            i += 1
        elif tool := _TOOL.match(line):
            flush()
            body, i = _fenced(lines, i + 1)
            pieces.append(_tool(tool.group(1), body or "", here, links))
        elif result := _RESULT.match(line):
            flush()
            body, i = (None, i + 1) if result.group(2) else _fenced(lines, i + 1)
            label = "Result (error)" if result.group(1) else "Result"
            out = body or ""
            pieces.append(Piece("result", label=label, text=out, lines=out.count("\n") + 1 if out else 0))
            pieces[-1].error = bool(result.group(1))
        elif sub := _SUBAGENT.match(line):
            flush()
            pieces.append(Piece("subagent", link=sub.group(1), summary=sub.group(2) or ""))
            i += 1
        elif opened := _FENCE.match(line):  # a fence in prose: all of it is prose, whatever its lines say
            marker = opened.group(1)
            prose.append(line)
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(marker):
                prose.append(lines[i])
                i += 1
            if i < len(lines):
                prose.append(lines[i])
                i += 1
        else:
            prose.append(line)
            i += 1
    flush()
    return pieces
