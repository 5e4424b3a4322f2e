"""An uploaded transcript is redacted on its way to the spool: no byte of it reaches the disk unredacted.

The body comes in pieces (gunzipped, of any size); :class:`LineRedactor` cuts it into lines, since a JSONL
transcript is line-oriented and a secret never spans two of its lines, and redacts each whole line, so a
secret split across two pieces is seen whole. Only the line being read is held, and no more than the
parser would read of one (``MAX_LINE_BYTES``): a longer line is dropped as it comes, as the parser would skip
it.

A line that is JSON is redacted as the parser reads it: every string in it (keys too, and the value of a
secret-named key), decoded, so an escaped secret (``\\u0041…``, ``https:\\/\\/``) is found as well. Any other
line is redacted as text. A line with nothing to redact is written as it came, byte for byte; the others
are written compactly. The result depends on the line alone, so the same file uploaded again is the same
spooled file (the ingest finds it unchanged) and a grown one is the old file plus redacted new lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memory.redact import Redactor
from memory.sources import MAX_LINE_BYTES

__all__ = ["TOO_LONG", "LineRedactor", "redact_line"]

# What stands for a dropped line: not JSON, so the parser reports the line (as "invalid json") and its
# neighbours keep their numbers.
TOO_LONG = b"[a line longer than the parser reads: not kept]"
_NOT_JSON = object()
Buffer = bytes | bytearray


class LineRedactor:
    """Bytes in as they arrive (:meth:`feed`), each whole line redacted and handed to ``write`` as soon as it
    ends; :meth:`finish` hands on the last, unterminated one. Not thread-safe: one upload, one instance, one
    thread at a time."""

    def __init__(self, redactor: Redactor, write: Callable[[Buffer], object], cap: int = MAX_LINE_BYTES) -> None:
        self._redactor = redactor
        self._write = write
        self._cap = cap
        self._line = bytearray()
        self._dropping = False  # the current line passed the cap: its rest is skipped up to its newline

    def feed(self, chunk: bytes) -> None:
        start = 0
        while start < len(chunk):
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl + 1
            if not self._dropping:
                self._line += chunk[start:end]
                if len(self._line) - (nl >= 0) > self._cap:
                    self._line = bytearray()  # freed now, not when the line ends
                    self._dropping = True
            if nl < 0:
                return
            self._end_line(b"\n")
            start = end

    def finish(self) -> None:
        """The last line, when the body did not end with a newline (a transcript still being written)."""
        if self._line or self._dropping:
            self._end_line(b"")

    def _end_line(self, ending: bytes) -> None:
        if self._dropping:
            self._dropping = False
            self._write(TOO_LONG + ending)
            return
        raw, self._line = self._line, bytearray()  # handed on, not copied: a line may be tens of megabytes
        self._write(redact_line(self._redactor, raw))


def redact_line(redactor: Redactor, raw: Buffer) -> Buffer:
    """One line (its newline, if any, kept as it is) with every secret the redactor knows replaced; ``raw``
    itself when there is none."""
    cut = len(raw) - raw.endswith(b"\n") - raw.endswith(b"\r\n")
    ending = bytes(raw[cut:])
    with memoryview(raw) as whole, whole[:cut] as body:  # decoded in place, not copied first
        try:
            text = str(body, "utf-8")
        except UnicodeDecodeError:
            # The parser skips such a line; its text is still redacted, its undecodable bytes kept as they are.
            return _as_text(redactor, str(body, "utf-8", "surrogateescape"), raw, ending)
    if not text.strip():
        return raw
    if text.lstrip()[:1] in ("{", "["):
        value = _json(text)
        if value is not _NOT_JSON:
            try:
                redacted = redactor.redact_obj(value)
                if redacted == value:
                    return raw
                return _dumps(redacted) + ending
            except RecursionError:  # nested deeper than the redactor walks: redacted as text below
                pass
    return _as_text(redactor, text, raw, ending)


class _DuplicateKey(ValueError):
    """An object names a key twice: decoded, only the last value would be seen (and redacted)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKey
    return out


def _json(text: str) -> Any:
    """The line's value, or _NOT_JSON (then it is redacted as text): also when an object repeats a key,
    since the value the decoder drops may hold a secret the raw line would keep."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _dumps(value: Any) -> bytes:
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return out.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud83d" escaped in the upload): kept escaped
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _as_text(redactor: Redactor, text: str, raw: Buffer, ending: bytes) -> Buffer:
    redacted = redactor(text)
    if redacted == text:
        return raw
    return redacted.encode("utf-8", "surrogateescape") + ending
