"""The durable outbox of a memory-service client: redacted transcript snapshots waiting to be uploaded.

A transcript leaves the machine only through here. :meth:`Outbox.enqueue` redacts it line by line (each
JSON line's strings, with the same :class:`~memory.redact.redactor.Redactor` the local ingest uses) into
``$MACUPOS_HOME/outbox/<id>.jsonl``, fsynced, then writes ``<id>.json`` (its upload name, its source):
an entry exists once its ``.json`` does. :meth:`Outbox.flush` sends the entries oldest first and deletes
one only after the service answered 2xx. The service treats the same name sent again, or grown, as the
same file (docs/service.md, "Uploads"), so a flush cut short and repeated sends nothing twice into memory.

A later snapshot of the same name replaces the earlier one (it holds all of it). An entry the service
refuses for its content (400, 413, 415, 422) is set aside in ``outbox/rejected/`` with the reason, never
deleted; any other failure (no answer, a key refused, a server error) stops the flush and keeps every
entry for the next one. One flush runs at a time (``outbox/.flush.lock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from memory.redact.redactor import Redactor, hides_value, marker
from memory.remote.http import RemoteMemoryError
from memory.storage.files import fsync_dir, remove_quietly, write_atomic

__all__ = ["Entry", "FlushReport", "Outbox", "redact_transcript"]

REJECTED = "rejected"
_LOCK = ".flush.lock"
_REFUSED = {400, 413, 415, 422}  # the content is refused: sending it again would fail the same way
_ORPHAN_S = 3600.0  # a body without its .json this old is a crash's leftover, not an enqueue under way
# Fields that hold ids, times and kinds, not words: left as they are, so the service reads the same
# sessions, threads and order (a uuid can look like a token to a generic rule).
_KEEP = frozenset(
    {
        "sessionId",
        "session_id",
        "uuid",
        "parentUuid",
        "leafUuid",
        "logicalParentUuid",
        "requestId",
        "messageId",
        "tool_use_id",
        "id",
        "agentId",
        "call_id",
        "timestamp",
        "type",
        "role",
        "version",
        "model",
    }
)


@dataclass(frozen=True, slots=True)
class Entry:
    id: str  # sortable: the order of enqueueing
    name: str  # the upload name (`?name=`): stable for one transcript
    source: str  # the local file it was made from
    body: Path
    meta: Path
    note: dict[str, Any] = field(default_factory=dict)  # what the enqueuer kept beside it (memory.remote.upload)

    @property
    def size(self) -> int:
        try:
            return self.body.stat().st_size
        except OSError:
            return 0


@dataclass(slots=True)
class FlushReport:
    sent: list[tuple[Entry, dict[str, Any]]] = field(default_factory=list)  # entry, the service's answer
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (name, why) set aside
    waiting: int = 0  # entries left for a later flush
    error: RemoteMemoryError | None = None  # why the flush stopped early
    busy: bool = False  # another flush held the lock


def _scrub(value: Any, redactor: Redactor) -> Any:
    """``value`` with every string redacted, ids and kinds (``_KEEP``) aside; a secret-named key hides its
    whole string value (as the local ingest does)."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if isinstance(v, str) and k in _KEEP:
                out[k] = v
            elif isinstance(v, str) and hides_value(k, v):
                out[k] = marker("env-assignment")
            else:
                out[redactor(k)] = _scrub(v, redactor)
        return out
    if isinstance(value, list):
        return [_scrub(v, redactor) for v in value]
    return value


def _dump(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # half a surrogate pair: escaped, as the file had it
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _redact_line(raw: bytes, redactor: Redactor) -> bytes:
    """One line (its end kept) redacted; a line redaction leaves alone is kept byte for byte."""
    body = raw.rstrip(b"\r\n")
    end = raw[len(body) :]
    text = body.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        cleaned = redactor(text).encode("utf-8", "replace")
        return (body if cleaned == body else cleaned) + end
    scrubbed = _scrub(value, redactor)
    return (body if scrubbed == value else _dump(scrubbed)) + end


def redact_transcript(src: Path, out: IO[bytes], redactor: Redactor) -> int:
    """Write ``src`` redacted to ``out``: line by line (JSONL), or whole for a ``.json`` loglines export.
    Returns the bytes read. Deterministic: the same file gives the same bytes, a grown one a grown copy."""
    if src.name.endswith(".json"):
        raw = src.read_bytes()
        out.write(_redact_line(raw, redactor))
        return len(raw)
    read = 0
    with src.open("rb") as fh:
        for line in fh:
            read += len(line)
            out.write(_redact_line(line, redactor))
    return read


class Outbox:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    # -- entries ----------------------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """The complete entries, oldest first (an unreadable ``.json`` is skipped, its body kept)."""
        found: list[Entry] = []
        try:
            metas = sorted(self.folder.glob("*.json"))
        except OSError:
            return []
        for meta in metas:
            try:
                data = json.loads(meta.read_text(encoding="utf-8"))
                name, source = str(data["name"]), str(data.get("source", ""))
                note = dict(data.get("note") or {})
            except (OSError, ValueError, KeyError, TypeError):
                continue
            body = meta.with_suffix(".jsonl")
            if body.is_file():
                found.append(Entry(meta.stem, name, source, body, meta, note))
        return found

    def enqueue(self, src: Path, name: str, redactor: Redactor, note: Mapping[str, Any] | None = None) -> Entry:
        """Redact ``src`` into a new entry named ``name`` (fsynced), then drop older entries of that name."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        entry_id = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
        body = self.folder / f"{entry_id}.jsonl"
        fd, tmp = tempfile.mkstemp(prefix=f".{entry_id}.", suffix=".tmp", dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                redact_transcript(src, fh, redactor)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, body)
        except BaseException:
            remove_quietly(Path(tmp))
            raise
        meta = body.with_suffix(".json")
        queued = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            record = {"name": name, "source": str(src), "queued": queued, "note": dict(note or {})}
            write_atomic(meta, json.dumps(record) + "\n")
        except BaseException:
            remove_quietly(body)
            raise
        entry = Entry(entry_id, name, str(src), body, meta, dict(note or {}))
        for older in self.entries():
            if older.name == name and older.id < entry_id:
                self.remove(older)  # the new snapshot holds all of it
        return entry

    def remove(self, entry: Entry) -> None:
        remove_quietly(entry.meta)  # first: an entry without its .json is no entry
        remove_quietly(entry.body)
        fsync_dir(self.folder)

    def set_aside(self, entry: Entry, why: str) -> None:
        """Move a refused entry to ``rejected/`` with the reason beside it: kept, never sent again."""
        aside = self.folder / REJECTED
        aside.mkdir(mode=0o700, exist_ok=True)
        note = {"name": entry.name, "source": entry.source, "why": why}
        write_atomic(aside / f"{entry.id}.why.json", json.dumps(note) + "\n")
        with contextlib.suppress(FileNotFoundError):
            os.replace(entry.body, aside / entry.body.name)
        remove_quietly(entry.meta)
        fsync_dir(self.folder)

    def clean_orphans(self) -> None:
        """Bodies left without their ``.json`` (and temp files) by a crash long enough ago."""
        now = time.time()
        with contextlib.suppress(OSError):
            for path in self.folder.iterdir():
                stray = path.name.endswith(".tmp") or (
                    path.suffix == ".jsonl" and not path.with_suffix(".json").exists()
                )
                if stray and path.is_file() and now - path.stat().st_mtime > _ORPHAN_S:
                    remove_quietly(path)

    # -- flushing ---------------------------------------------------------------------------------------

    def _try_lock(self) -> int | None:
        """The flush lock's descriptor, held; None when another flush holds it."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.folder / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    @contextlib.asynccontextmanager
    async def _lock(self, wait_s: float) -> AsyncIterator[bool]:
        """Hold the flush lock (True), or not within ``wait_s`` (False). Polled, so a flush waiting in the
        bot's event loop never blocks it."""
        deadline = time.monotonic() + wait_s
        fd = self._try_lock()
        while fd is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            fd = self._try_lock()
        if fd is None:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    async def flush(self, send: Callable[[Entry], Awaitable[dict[str, Any]]], *, wait_s: float = 0.0) -> FlushReport:
        """Send every entry, oldest first, until one fails for a reason other than its content; entries
        enqueued meanwhile are sent too. ``wait_s``: how long to wait for another flush to finish."""
        report = FlushReport()
        if not self.folder.is_dir():
            return report
        async with self._lock(wait_s) as held:
            if not held:
                report.busy = True
                report.waiting = len(self.entries())
                return report
            await asyncio.to_thread(self.clean_orphans)
            tried: set[str] = set()
            while report.error is None:
                todo = [e for e in self.entries() if e.id not in tried]
                if not todo:
                    break
                for entry in todo:
                    tried.add(entry.id)
                    try:
                        answer = await send(entry)
                    except RemoteMemoryError as exc:
                        if exc.status in _REFUSED:
                            await asyncio.to_thread(self.set_aside, entry, str(exc))
                            report.rejected.append((entry.name, str(exc)))
                            continue
                        report.error = exc
                        break
                    except FileNotFoundError:
                        continue  # replaced by a newer snapshot of the same name meanwhile
                    await asyncio.to_thread(self.remove, entry)
                    report.sent.append((entry, answer))
            report.waiting = len(self.entries())
        return report
