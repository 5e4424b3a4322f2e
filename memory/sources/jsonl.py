"""Reading JSON-lines transcripts defensively, and clipping plus redacting the text they carry.

Shared by the Claude Code and Codex parsers: a bad line becomes a reported problem, never an
exception, and no line can make memory grow without bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from memory.models import LineProblem
from memory.redact.redactor import Redactor, hides_value, marker

__all__ = [
    "DEEP",
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "PROSE_FACTOR",
    "JsonLine",
    "ReadStats",
    "TextClipper",
    "identity",
    "iter_json_lines",
    "type_name",
    "without_lone_surrogates",
]

MAX_LINE_BYTES = 64 * 1024 * 1024  # a longer line is skipped whole, so one runaway line cannot exhaust memory
PROGRESS_STEP = 4 * 1024 * 1024  # how often a long read tells its progress
MAX_DEPTH = 100  # a tool input nested deeper is cut there: renderers and encoders below recurse per level
DEEP = "[nested too deeply]"
_TYPE_NAME_CHARS = 80
_REDACT_MARGIN = 256  # redact a little past the cut so a secret straddling it is still recognised
_DECODER = json.JSONDecoder()
# Undecodable text on a line is skipped to the next "{" at most this many times: each try may read the rest of
# the line, so the bound keeps a hostile line linear.
_RESYNC_TRIES = 16
# JSON may escape half of a surrogate pair ("\ud83d" alone: a broken emoji, as JavaScript writes it). Decoded,
# it is a string UTF-8 cannot encode; such lines are rare, so only lines with the escape are walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    return value


def identity(text: str) -> str:
    return text


def type_name(value: Any) -> str:
    """A line's ``type`` as a short name for the skipped-types count (ingest prints it: no megabyte names)."""
    if not value:
        return "(no type)"
    if not isinstance(value, str):
        return f"(a {type(value).__name__}, not a name)"
    return value if len(value) <= _TYPE_NAME_CHARS else value[: _TYPE_NAME_CHARS - 1] + "…"


@dataclass(slots=True)
class JsonLine:
    line_no: int
    obj: dict[str, Any]


@dataclass(slots=True)
class ReadStats:
    """Counters shared between the line iterator and the parser."""

    path: str
    problems: list[LineProblem] = field(default_factory=list)
    lines_read: int = 0
    bytes_read: int = 0
    on_bytes: Callable[[int], None] | None = None  # told bytes_read every PROGRESS_STEP bytes (a progress bar)
    next_report: int = PROGRESS_STEP

    def problem(self, line_no: int, reason: str) -> None:
        """Record a bad line, once: its first problem names it (NULs, then undecodable rest, is one line)."""
        if self.problems and self.problems[-1].line_no == line_no:
            return
        self.problems.append(LineProblem(self.path, line_no, reason))


def iter_json_lines(fh: IO[bytes], reader: ReadStats) -> Iterator[JsonLine]:
    """Yield each JSON object of a binary JSONL stream; malformed lines become problems, never exceptions."""
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        reader.lines_read += 1
        reader.bytes_read += len(raw)
        line_no = reader.lines_read
        if reader.on_bytes is not None and reader.bytes_read >= reader.next_report:
            reader.on_bytes(reader.bytes_read)
            reader.next_report = reader.bytes_read + PROGRESS_STEP
        ends_nl = raw.endswith(b"\n")
        if len(raw) > MAX_LINE_BYTES and not ends_nl:
            while (more := fh.readline(1 << 20)) and not more.endswith(b"\n"):
                reader.bytes_read += len(more)
            reader.bytes_read += len(more)
            reader.problem(line_no, "line too long")
            continue
        data = raw.strip()
        if b"\x00" in data:
            # A crash can leave NUL runs; report them, then salvage any JSON around them.
            reader.problem(line_no, "nul bytes")
            data = data.replace(b"\x00", b"").strip()
            if not data:
                continue
        if not data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            reader.problem(line_no, "invalid utf-8")
            continue
        yield from _decode_line(text, line_no, ends_nl, reader)


def _whole_line(value: Any) -> bool:
    """Whether a value found after junk is a transcript line, not an object nested in a cut one.

    Every Claude Code message line and every Codex rollout line carries both keys; a content block or a
    tool input found inside a truncated line does not carry a timestamp.
    """
    return isinstance(value, dict) and "type" in value and "timestamp" in value


def _decode_line(text: str, line_no: int, ends_nl: bool, reader: ReadStats) -> Iterator[JsonLine]:
    values: list[Any] = []
    junk_at: int | None = None  # how many values were read when the first undecodable text was met
    pos = 0
    tries = 0
    try:
        while pos < len(text):
            try:
                value, pos = _DECODER.raw_decode(text, pos)
            except json.JSONDecodeError:
                # A write cut by a crash, then the next append on the same line: skip to the next object.
                junk_at = len(values) if junk_at is None else junk_at
                tries += 1
                pos = text.find("{", pos + 1)
                if pos < 0 or tries > _RESYNC_TRIES:
                    break
                continue
            if junk_at is None or _whole_line(value):
                values.append(value)
            while pos < len(text) and text[pos] in " \t\r":
                pos += 1
    except RecursionError:  # the decoder recurses per level: a nest of thousands is junk, not a transcript line
        reader.problem(line_no, "json nested too deeply")
        return
    if junk_at is not None:
        if not values:
            reader.problem(line_no, "invalid json" if ends_nl else "truncated last line")
            return
        reader.problem(line_no, "invalid json before a value" if junk_at == 0 else "invalid json after the first value")
    if len(values) > 1:
        # Two appends without a newline between them: keep both objects.
        reader.problem(line_no, "several json values on one line")
    if _SURROGATE_ESCAPE.search(text):
        try:
            values = [without_lone_surrogates(v) for v in values]
        except RecursionError:
            reader.problem(line_no, "json nested too deeply")
            return
    for value in values:
        if isinstance(value, dict):
            yield JsonLine(line_no, value)
        else:
            reader.problem(line_no, "not an object")


PROSE_FACTOR = 10


class TextClipper:
    """Clip to the limit (keeping the head) and redact; counts what was dropped."""

    def __init__(self, redact: Callable[[str], str], limit: int) -> None:
        self.redact = redact
        self.limit = max(limit, 0)
        # What people and the model wrote is the memory itself: keep far more of it than of tool output.
        self.prose_limit = self.limit * PROSE_FACTOR

    def text(self, value: str, limit: int | None = None) -> tuple[str, int]:
        limit = self.limit if limit is None else limit
        if len(value) <= limit:
            return self.redact(value), 0
        head = self.redact(value[: limit + _REDACT_MARGIN])[:limit]
        return head, len(value) - limit

    def prose(self, value: str) -> tuple[str, int]:
        return self.text(value, self.prose_limit)

    def value(self, value: Any, depth: int = 0) -> tuple[Any, int]:
        """Clip and redact every string inside a JSON value (tool inputs); below MAX_DEPTH levels, a marker."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                return DEEP, 0
            pairs = value.items() if isinstance(value, dict) else enumerate(value)
            clipped = {k: self.value(v, depth + 1) for k, v in pairs}
            dropped = sum(n for _, n in clipped.values())
            if isinstance(value, dict):
                # Keys are redacted too: a tool's input can name a secret as a key ({"sk-…": "v"}); two keys
                # redacted alike keep both values ("[REDACTED:x]", "[REDACTED:x] 2").
                out: dict[str, Any] = {}
                for k, (v, _) in clipped.items():
                    if (
                        isinstance(self.redact, Redactor)
                        and isinstance(value[k], str)
                        and hides_value(str(k), value[k])
                    ):
                        v = marker("env-assignment")  # {"password": "two words"}: the key is the only tell
                    key = base = self.redact(str(k))
                    n = 1
                    while key in out:
                        n += 1
                        key = f"{base} {n}"
                    out[key] = v
                return out, dropped
            return [v for v, _ in clipped.values()], dropped
        return value, 0
