"""`Transcript` → deterministic markdown: the same transcript gives the same bytes on every machine.

Nothing here depends on dict order (tool inputs are sorted), the locale (numbers and times are
formatted by hand), the clock, or the machine's timezone (an explicit IANA zone is a parameter).
Lines end in ``"\\n"``, trailing whitespace is stripped, and the document ends with one newline.

Layout::

    # <title, or "Session <id>">

    - session: `<id>`
    - kind: main | subagent | codex
    - parent: `<parent id>`                  (when set)
    - project: `<cwd>`  /  branch: `<git branch>`  /  model: <model>   (each when set)
    - started: 2025-06-14 10:00:00 +00:00    (in the chosen timezone, with its offset)
    - ended: …  /  duration: 1h 02m 03s
    - timezone: UTC
    - entries: 11

    ## Summaries                               (when the transcript has summary lines)

    - <one summary per bullet>

    ## User · 10:00:00                         (date too when it differs from the previous heading)

    <text as-is>

    ## Assistant · 10:00:30                    (consecutive assistant lines share one heading)

    <text>

    > **thinking**
    >
    > <thinking text>

    **Tool: Bash**

    ```
    command: ls -la                          (a small YAML-like view: keys sorted, multi-line strings
    ```                                       as `key: |` blocks, lists as `- item`, other scalars JSON)

    **Result** / **Result (error)**          (tool results stay under the assistant's heading, even
                                              when the source put them on a user line)

    ```
    <output, at most tool_output_limit characters>
    ```

    … [truncated 12,345 chars]

    _api error_  /  _compact boundary_  /  _turn 1.2 s_      (system lines: one italic line)

    ## Compaction summary · 10:30:00          (a compaction summary gets its own heading)

    > _meta:_ <a CLI-injected line, collapsed to one line>

    → subagent `<session id>`: <title>       (a subagent run is this one line, whatever it did)

Fences are longer than any backtick run they contain.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory.models import Block, BlockKind, Entry, Transcript
from memory.timeutil import parse_iso

__all__ = ["render_markdown", "zone"]

_META_MAX = 300
_BACKTICKS = re.compile(r"`+")
_TRAILING_WS = re.compile(r"[ \t\f\v]+$", re.MULTILINE)
_WS = re.compile(r"\s+")


def render_markdown(t: Transcript, *, timezone: str = "UTC", tool_output_limit: int = 2000) -> str:
    """Renders ``t`` as markdown; ``timezone`` is an IANA name, ``tool_output_limit`` ≤ 0 disables truncation."""
    return _Renderer(t, zone(timezone), timezone, tool_output_limit).render()


def zone(name: str) -> tzinfo:
    """The timezone named ``name`` (IANA, or UTC without needing tzdata); ValueError when there is none."""
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return UTC  # no tzdata needed for the default
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r}") from exc


def _parse_ts(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        return None


def _offset(d: datetime) -> str:
    off = d.utcoffset() or timedelta()
    minutes = int(off.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _date(d: datetime) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def _clock(d: datetime) -> str:
    return f"{d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def _duration(seconds: float) -> str:
    total = max(0, int(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h {m:02d}m {s:02d}s"
    return f"{m}m {s:02d}s" if m else f"{s}s"


def _fence(content: str, info: str = "") -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(content)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{content}\n{ticks}"


def _code(text: str) -> str:
    """Inline code that survives backticks in the value."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _one_line(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _truncated(n: int) -> str:
    return f"… [truncated {n:,} chars]"  # the "," format spec ignores the locale


def _json(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=indent, default=str)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value if value and value == value.strip() else _json(value)  # "" and edge spaces stay visible
    return _json(value)


def _emit(value: Any, pad: str) -> list[str]:
    """A small YAML-like view: sorted keys, `|` blocks for multi-line strings, `-` items for lists."""
    items: list[tuple[str, Any]]
    if isinstance(value, dict):
        items = [(f"{key}:", value[key]) for key in sorted(value, key=str)]
    else:
        items = [("-", item) for item in value]
    lines: list[str] = []
    for label, item in items:
        if isinstance(item, str) and "\n" in item:
            lines.append(f"{pad}{label} |")
            lines.extend(f"{pad}  {line}" for line in item.split("\n"))
        elif isinstance(item, dict | list) and item:
            nested = _emit(item, pad + "  ")
            if label == "-":  # "- key: value" on the item's first line, as YAML writes it
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines.extend(nested[1:])
            else:
                lines.append(f"{pad}{label}")
                lines.extend(nested)
        else:
            lines.append(f"{pad}{label} {_scalar(item)}")
    return lines


def _tool_input(tool_input: dict[str, Any]) -> str:
    return "\n".join(_emit(tool_input, ""))


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def _tidy(chunk: str, joined: bool) -> str:
    r"""One paragraph as tidying the joined text leaves it: line ends made \n, no blanks ending a line.
    ``joined``: a blank line follows; its first \n makes a final \r a \r\n, one line end, not two."""
    if joined and chunk.endswith("\r"):
        chunk = chunk[:-1]
    return _TRAILING_WS.sub("", chunk.replace("\r\n", "\n").replace("\r", "\n"))


def _joined(chunks: list[str]) -> str:
    """The paragraphs joined by blank lines and tidied, no blank line first or last, a newline at the end.

    Tidied a paragraph at a time, in place: the text tidying the joined whole gives, with one copy of a big
    transcript in memory instead of four, and no regex pass over tens of megabytes holding the GIL for half
    a second (the server ingests on a thread beside its event loop)."""
    last = len(chunks) - 1
    for i, chunk in enumerate(chunks):
        chunks[i] = _tidy(chunk, i < last)
    first = next((i for i, c in enumerate(chunks) if c.strip("\n")), -1)
    if first < 0:
        return "\n"
    end = next(i for i in range(last, first - 1, -1) if chunks[i].strip("\n"))
    body = chunks[first : end + 1]
    body[0] = body[0].lstrip("\n")
    body[-1] = body[-1].rstrip("\n") + "\n"
    return "\n\n".join(body)


class _Renderer:
    def __init__(self, t: Transcript, zone: tzinfo, zone_name: str, tool_output_limit: int) -> None:
        self.t = t
        self.zone = zone
        self.zone_name = zone_name
        self.limit = tool_output_limit
        self.chunks: list[str] = []  # paragraphs, joined by blank lines
        self.section = ""  # role of the current heading: "user", "assistant", "compaction"
        self.day = ""  # date of the last heading that showed one
        self.subagent_titles = {s.session_id: s.title for s in t.subagents}
        self.subagents_shown: set[str] = set()
        # The Task call and its result both stand for the run: the call's id leads to the same line.
        self.subagent_calls = {
            b.tool_id: e.subagent_ref
            for e in t.entries
            if e.subagent_ref
            for b in e.blocks
            if b.kind is BlockKind.TOOL_RESULT and b.tool_id
        }

    def render(self) -> str:
        self._header()
        for entry in self.t.entries:
            self._entry(entry)
        return _joined(self.chunks)

    def _local(self, value: str) -> datetime | None:
        parsed = _parse_ts(value)
        try:
            return parsed.astimezone(self.zone) if parsed else None
        except OverflowError:  # year 1 or 9999 pushed past the calendar by the zone's offset: shown as written
            return None

    def _stamp(self, value: str) -> str:
        d = self._local(value)
        return f"{_date(d)} {_clock(d)} {_offset(d)}" if d else value

    def _header(self) -> None:
        t = self.t
        title = _one_line(t.title) or f"Session {t.session_id}"
        self.chunks.append(f"# {title}")
        meta = [f"- session: {_code(t.session_id)}", f"- kind: {t.kind.value}"]
        known = (  # each line only when the transcript says it
            ("parent", t.parent_id and _code(t.parent_id)),
            ("project", t.cwd and _code(t.cwd)),
            ("branch", t.git_branch and _code(t.git_branch)),
            ("model", t.model),
            ("version", t.version),
            ("started", t.started_at and self._stamp(t.started_at)),
            ("ended", t.ended_at and self._stamp(t.ended_at)),
        )
        meta.extend(f"- {name}: {value}" for name, value in known if value)
        start, end = _parse_ts(t.started_at), _parse_ts(t.ended_at)
        if start and end:
            meta.append(f"- duration: {_duration((end - start).total_seconds())}")
        meta.append(f"- timezone: {self.zone_name}")
        meta.append(f"- entries: {len(t.entries)}")
        self.chunks.append("\n".join(meta))
        start_local = self._local(t.started_at)
        self.day = _date(start_local) if start_local else ""
        if t.summaries:
            self.chunks.append("## Summaries")
            self.chunks.append("\n".join(f"- {_one_line(s)}" for s in t.summaries if s.strip()))

    def _heading(self, label: str, timestamp: str) -> None:
        d = self._local(timestamp)
        if d is None:
            self.chunks.append(f"## {label}")
            return
        day = _date(d)
        when = _clock(d) if day == self.day else f"{day} {_clock(d)}"
        self.day = day
        self.chunks.append(f"## {label} · {when}")

    def _entry(self, e: Entry) -> None:
        if e.role == "system":
            self._system(e)
        elif e.is_compact_summary:
            self._heading("Compaction summary", e.timestamp)
            self.section = "compaction"
            self._blocks(e, e.blocks)
        elif e.is_meta:
            text = _one_line(" ".join(b.text for b in e.blocks if b.text))
            if len(text) > _META_MAX:
                text = text[:_META_MAX] + "…"
            if text:
                self.chunks.append(f"> _meta:_ {text}")
        elif not e.blocks:
            return
        elif e.role == "assistant":
            if self.section != "assistant":
                self._heading("Assistant", e.timestamp)
                self.section = "assistant"
            self._blocks(e, e.blocks)
        else:
            # Leading tool results belong to the assistant's turn that asked for them.
            n = 0
            while n < len(e.blocks) and e.blocks[n].kind is BlockKind.TOOL_RESULT:
                n += 1
            self._blocks(e, e.blocks[:n])
            if n < len(e.blocks):
                self._heading("User", e.timestamp)
                self.section = "user"
                self._blocks(e, e.blocks[n:])

    def _system(self, e: Entry) -> None:
        text = _one_line(" ".join(b.text for b in e.blocks if b.text))
        subtype = e.subtype or "system"
        if subtype == "turn_duration":
            line = f"turn {_ms(text)}" if text else "turn duration"
        else:
            label = subtype.replace("_", " ")
            line = f"{label}: {text}" if text and e.subtype else (text or label)
        self.chunks.append(f"_{_escape_italic(line)}_")

    def _blocks(self, e: Entry, blocks: tuple[Block, ...]) -> None:
        for b in blocks:
            ref = self.subagent_calls.get(b.tool_id, "") if b.kind is BlockKind.TOOL_USE and b.tool_id else ""
            ref = ref or (e.subagent_ref if b.kind in (BlockKind.TOOL_USE, BlockKind.TOOL_RESULT) else "")
            if ref:
                self._subagent(ref, b)
            else:
                self._block(b)

    def _subagent(self, ref: str, b: Block) -> None:
        if ref in self.subagents_shown:
            return
        self.subagents_shown.add(ref)
        title = self.subagent_titles.get(ref) or str(b.tool_input.get("description") or "")
        title = _one_line(title)
        self.chunks.append(f"→ subagent {_code(ref)}: {title}" if title else f"→ subagent {_code(ref)}")

    def _block(self, b: Block) -> None:
        if b.kind is BlockKind.TEXT:
            if b.text.strip():
                self.chunks.append(b.text.strip("\n"))
            if b.truncated_chars:
                self.chunks.append(_truncated(b.truncated_chars))
        elif b.kind is BlockKind.THINKING:
            if b.text.strip():
                self.chunks.append(_quote("**thinking**\n\n" + b.text.strip("\n")))
        elif b.kind is BlockKind.TOOL_USE:
            self.chunks.append(f"**Tool: {_one_line(b.tool_name) or '?'}**")
            if b.tool_input:
                self.chunks.append(_fence(_tool_input(b.tool_input)))
            if b.truncated_chars:
                self.chunks.append(_truncated(b.truncated_chars))
        elif b.kind is BlockKind.TOOL_RESULT:
            self._result(b)
        elif b.kind is BlockKind.IMAGE:
            self.chunks.append(f"_[image: {b.text}]_" if b.text else "_[image]_")

    def _result(self, b: Block) -> None:
        label = "**Result (error)**" if b.is_error else "**Result**"
        text = b.text.strip("\n")
        dropped = b.truncated_chars
        if self.limit > 0 and len(text) > self.limit:
            dropped += len(text) - self.limit
            text = text[: self.limit]
        if not text.strip():
            self.chunks.append(f"{label} _(empty)_")
        else:
            self.chunks.append(label)
            self.chunks.append(_fence(text))
        if dropped:
            self.chunks.append(_truncated(dropped))


def _ms(text: str) -> str:
    """``turn_duration`` carries milliseconds; shows seconds with one decimal."""
    try:
        return f"{float(text) / 1000:.1f} s"
    except ValueError:
        return text


def _escape_italic(text: str) -> str:
    return text.replace("_", "\\_")
