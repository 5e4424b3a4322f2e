"""The readable snapshot: a replayable script of ``remember …`` / ``link …`` lines, one per memory.

Lines are sorted by memory id (``link`` lines after the ``remember`` lines), so a diff shows exactly
what changed. Each line ends with a ``;#`` comment holding the lifecycle metadata (created, access
count, state…) so loading an exported snapshot into a fresh home gives the same state; a hand-written
line without the comment is loaded as a new memory. Parsing needs no Tcl interpreter: a snapshot is
data, and substitutions (``$``, ``[``) are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory.facts.model import RELATIONSHIP, FactsError, Memory, State, component
from memory.facts.tclwords import TclSyntaxError, format_list, split_command
from memory.timeutil import parse_iso

__all__ = [
    "HEADER",
    "LoadEntry",
    "iso_ms",
    "parse_iso_ms",
    "parse_snapshot",
    "render_line",
    "render_snapshot",
    "same_content",
]

HEADER = (
    "# Macupos structured facts: a replayable snapshot (one memory per line, sorted by id).\n"
    "# Edit freely, then: macupos memory facts load <this file>. The event log is the source of truth.\n"
)


def iso_ms(ms: int) -> str:
    d = datetime.fromtimestamp(ms / 1000, UTC)
    # Four-digit years always (strftime writes year 1 as "1", which ISO-8601 readers refuse).
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}.{ms % 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    try:
        parsed = parse_iso(text)
    except ValueError:
        raise FactsError(f"not an ISO-8601 time: {text!r}") from None
    return round(parsed.timestamp() * 1000)


def _meta_words(m: Memory) -> list[str]:
    words = ["created", iso_ms(m.created_ms)]
    if m.ts_ms != m.created_ms:
        words += ["clock", iso_ms(m.ts_ms)]
    if m.last_access_ms != m.created_ms:
        words += ["seen", iso_ms(m.last_access_ms)]
    if m.access_count:
        words += ["access", str(m.access_count)]
    if m.state != State.ACTIVE:
        words += ["state", m.state.value]
    if m.sweep_marked_ms is not None:
        words += ["marked", iso_ms(m.sweep_marked_ms)]
    if m.provenance:
        words += ["from", m.provenance]
    return words


def render_line(m: Memory) -> str:
    if m.via_link:
        words = ["link", m.subject, m.field_text("target"), m.field_text("kind"), m.field_text("strength")]
    else:
        words = ["remember", m.id, m.subject, m.ctype]
        for name in m.fields:
            words += [name, m.field_text(name)]
    return f"{format_list(words)} ;# {format_list(_meta_words(m))}"


def render_snapshot(memories: list[Memory]) -> str:
    ordered = sorted(memories, key=lambda m: (m.via_link, m.id))
    return HEADER + "".join(render_line(m) + "\n" for m in ordered)


@dataclass(slots=True)
class LoadEntry:
    line_no: int
    op: str  # remember | link
    words: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    provenance: str = ""


_SURROGATE = re.compile("[\ud800-\udfff]")
_TIME_META = {"created": "created_ms", "clock": "ts_ms", "seen": "last_access_ms", "marked": "sweep_marked_ms"}


def _parse_meta(comment: str, line_no: int) -> tuple[dict[str, Any], str]:
    if not comment:
        return {}, ""
    try:
        words, _ = split_command(comment)
    except TclSyntaxError as exc:
        raise FactsError(f"line {line_no}: the ;# metadata: {exc}") from None
    if len(words) % 2:
        raise FactsError(f"line {line_no}: the ;# metadata needs key value pairs")
    meta: dict[str, Any] = {}
    provenance = ""
    for key, value in zip(words[::2], words[1::2], strict=True):
        if key in _TIME_META:
            try:
                meta[_TIME_META[key]] = parse_iso_ms(value)
            except FactsError as exc:
                raise FactsError(f"line {line_no}: {exc}") from None
        elif key == "access":
            if not (value.isascii() and value.isdigit()):  # "²" is a digit int() refuses
                raise FactsError(f"line {line_no}: access must be a count, got {value!r}")
            meta["access_count"] = int(value)
        elif key == "state":
            try:
                meta["state"] = State(value).value
            except ValueError:
                raise FactsError(f"line {line_no}: unknown state {value!r}") from None
        elif key == "from":
            provenance = value
    return meta, provenance


def parse_snapshot(text: str) -> list[LoadEntry]:
    """Entries of a snapshot file; raises FactsError naming the first bad line."""
    entries: list[LoadEntry] = []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            words, comment = split_command(stripped)
        except TclSyntaxError as exc:
            raise FactsError(f"line {n}: {exc}") from None
        if not words:
            continue
        op, args = words[0], words[1:]
        if op == "remember":
            if len(args) < 3 or len(args) % 2 == 0:
                raise FactsError(f"line {n}: remember needs id subject Type and field value pairs")
        elif op == "link":
            if len(args) not in (3, 4):
                raise FactsError(f"line {n}: link needs from to kind ?strength?")
        else:
            raise FactsError(f"line {n}: only remember and link lines can be loaded, not {op!r}")
        meta, provenance = _parse_meta(comment, n)
        if any(_SURROGATE.search(w) for w in (*args, provenance)):
            # A \ud800-style escape names half of a pair: no character, and nothing SQLite can store.
            raise FactsError(f"line {n}: a \\u escape names half of a surrogate pair, not a character")
        entries.append(LoadEntry(n, op, args, meta, provenance))
    return entries


def same_content(m: Memory, entry: LoadEntry) -> bool:
    """Whether a stored memory already says what a snapshot line says (then loading it is a no-op)."""
    if entry.op == "link":
        source, target, kind = entry.words[:3]
        raw = {"target": target, "kind": kind, "strength": entry.words[3] if len(entry.words) == 4 else "1"}
        subject, ctype = source, RELATIONSHIP.name
    else:
        _, subject, ctype, *pairs = entry.words
        raw = dict(zip(pairs[::2], pairs[1::2], strict=True))
    try:
        fields = component(ctype).normalize(raw)
    except FactsError:
        return False
    return m.subject == subject and m.ctype == ctype and m.fields == fields
