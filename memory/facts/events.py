"""The append-only event log: ``events/<origin>.jsonl``, one file per installation.

Each installation (``origin``, a random id kept in the gitignored ``.origin``) only ever appends to
its own file, so two clones syncing through git never edit the same file. A line is
``{"id", "at_ms", "origin", "op", "args"}``; appends are flushed and fsynced before they return.
A half-written last line (a crash mid-append, a partial line from a merge) is skipped on read and
repaired before this installation's next append.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.storage.files import write_atomic

__all__ = ["Event", "EventLog", "load_origin", "new_event", "parse_event", "read_events"]

logger = logging.getLogger(__name__)

OPS = frozenset({"remember", "forget", "link", "touch", "consolidate", "sweep", "revive"})
_GITIGNORE = ".origin\n*.lock\n*.tmp\nbackups/\n"


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    at_ms: int
    origin: str
    op: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_line(self) -> str:
        record = {"id": self.id, "at_ms": self.at_ms, "origin": self.origin, "op": self.op, "args": self.args}
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"

    @property
    def order(self) -> tuple[int, str]:
        return (self.at_ms, self.id)


def new_event(origin: str, op: str, args: dict[str, Any], at_ms: int) -> Event:
    return Event(uuid.uuid4().hex, at_ms, origin, op, args)


def parse_event(line: str | bytes) -> Event | None:
    """The event on one log line, or None when it is not a whole, well-formed one."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    eid, at_ms, origin, op, args = (raw.get(k) for k in ("id", "at_ms", "origin", "op", "args"))
    if not (isinstance(eid, str) and eid and isinstance(at_ms, int) and isinstance(origin, str)):
        return None
    if not (isinstance(op, str) and isinstance(args, dict)):
        return None
    return Event(eid, at_ms, origin, op, args)


def read_events(folder: Path) -> Iterator[Event]:
    """Every well-formed event in ``folder/*.jsonl`` (file by file); bad or half-written lines are skipped."""
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.jsonl")):
        try:
            data = path.read_bytes()
        except OSError as exc:
            logger.warning("cannot read event file %s: %s", path, exc)
            continue
        for n, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            event = parse_event(raw.decode("utf-8", errors="replace"))
            if event is None:
                logger.warning("%s:%d: skipped a malformed event line", path, n)
                continue
            yield event


def load_origin(facts_dir: Path) -> str:
    """This installation's stable origin id, created on first use; also writes a default .gitignore."""
    facts_dir.mkdir(parents=True, exist_ok=True)
    ignore = facts_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text(_GITIGNORE, encoding="utf-8")
    path = facts_dir / ".origin"
    try:
        origin = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        origin = ""
    if not origin:
        origin = uuid.uuid4().hex[:12]
        write_atomic(path, origin + "\n")
    return origin


class EventLog:
    """Appender for this origin's file. Not thread-safe: the engine calls it from its one thread."""

    def __init__(self, folder: Path, origin: str) -> None:
        self.folder = folder
        self.origin = origin
        self.path = folder / f"{origin}.jsonl"
        self._repaired = False
        self._last_at_ms = 0

    def next_at_ms(self) -> int:
        """Wall-clock ms, strictly increasing within this origin so (at_ms, id) order is append order."""
        now = int(time.time() * 1000)
        self._last_at_ms = max(now, self._last_at_ms + 1)
        return self._last_at_ms

    def observe(self, at_ms: int) -> None:
        """Keep at_ms increasing past what this origin already wrote (a clock set back, a restart)."""
        self._last_at_ms = max(self._last_at_ms, at_ms)

    def repair(self) -> bool:
        """End the file on a newline: drop a half-written last line (keep it if it is a whole event)."""
        self._repaired = True
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return False
        if size == 0:
            return False
        with self.path.open("rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return False
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            if parse_event(tail.decode("utf-8", errors="replace")) is not None:
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
            else:
                fh.truncate(cut)
            fh.flush()
            os.fsync(fh.fileno())
        logger.warning("repaired a half-written last line in %s", self.path)
        return True

    def append(self, events: Sequence[Event]) -> None:
        if not events:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self._repaired:
            self.repair()
        blob = "".join(e.to_line() for e in events).encode("utf-8")
        # One write of whole lines with O_APPEND: a concurrent appender never interleaves inside a line.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(blob)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._last_at_ms = max(self._last_at_ms, max(e.at_ms for e in events))
