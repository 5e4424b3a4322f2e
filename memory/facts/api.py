"""``FactsApi``: the async facade over the synchronous facts engine.

The engine (its sqlite3 connection and the sandbox helper it drives) lives on ONE worker thread, a
single-thread executor owned here, so the event loop never blocks and the connection is only ever
used from the thread that opened it. Open once (``await FactsApi.open(home, db_path)``), close once
(``await api.close()`` writes the snapshot).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from memory.errors import MemoryStoreError
from memory.facts import inject
from memory.facts.commands import COMMANDS, Session, recall_targets
from memory.facts.decay import DEFAULT_HALF_LIFE_DAYS
from memory.facts.engine import FactsEngine, link_id
from memory.facts.model import FactsError, Memory
from memory.facts.snapshot import parse_snapshot, render_snapshot, same_content
from memory.facts.tcl import Sandbox, SandboxCrash, ScriptLimits, ScriptResult
from memory.redact.redactor import Redactor
from memory.settings import MemorySettings
from memory.storage.database import Database
from memory.storage.faults import os_fault, sqlite_fault
from memory.storage.files import write_atomic

__all__ = ["FactsApi", "LoadReport", "ScriptLimits", "ScriptResult"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
SNAPSHOT_NAME = "snapshot.tcl"


@dataclass(slots=True)
class LoadReport:
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (line, why)


class _ScriptFailed(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _ms(when: datetime | None) -> int:
    return round(when.timestamp() * 1000) if when is not None else int(time.time() * 1000)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} characters truncated]"


class FactsApi:
    def __init__(
        self,
        engine: FactsEngine,
        executor: ThreadPoolExecutor,
        limits: ScriptLimits,
        snapshot_every: int,
        db: Database,
    ) -> None:
        self.engine = engine
        self.db = db
        self._executor = executor
        self.limits = limits
        self.snapshot_every = snapshot_every
        self.sandbox = Sandbox(limits)
        self.folder = engine.facts_dir
        self.events_dir = engine.log.folder
        self.origin = engine.origin
        self._closed = False
        self._closing = False

    @classmethod
    async def from_settings(cls, settings: MemorySettings) -> FactsApi:
        """Open with the configured data home, database, half-life and lock timeout."""
        return await cls.open(
            settings.home,
            settings.db_path,
            half_life_days=settings.facts_half_life_days,
            busy_timeout_ms=settings.busy_timeout_ms,
            redact=Redactor(settings.own_secrets),
        )

    @classmethod
    async def open(
        cls,
        home: Path,
        db_path: Path,
        *,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        busy_timeout_ms: int = 30_000,
        limits: ScriptLimits | None = None,
        snapshot_every: int = 50,
        redact: Callable[[str], str] | None = None,
    ) -> FactsApi:
        """Open the facts under ``home / "facts"`` and the shared database; applies events not yet applied.

        The database is memory's own :class:`~memory.storage.database.Database` of that file (the one already open in
        this process, if any): the facts engine runs on a connection it owns, never on one of its own."""
        db = await Database.open(db_path, busy_timeout_ms=busy_timeout_ms)  # runs the schema migrations
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="facts")
        loop = asyncio.get_running_loop()

        def make() -> FactsEngine:
            conn = db.side_connection()
            try:
                return FactsEngine(
                    home / "facts",
                    db_path,
                    conn,
                    half_life_days=half_life_days,
                    busy_timeout_ms=busy_timeout_ms,
                    redact=redact,
                )
            except BaseException:
                db.release_side_connection(conn)
                raise

        try:
            engine = await loop.run_in_executor(executor, make)
        except BaseException as exc:
            executor.shutdown(wait=False)
            await db.close()
            if isinstance(exc, sqlite3.Error):
                raise sqlite_fault(db_path, exc) or MemoryStoreError(f"cannot open the facts store: {exc}") from exc
            if isinstance(exc, OSError):
                raise os_fault(exc) or MemoryStoreError(f"cannot open the facts store: {exc}") from exc
            raise
        api = cls(engine, executor, limits or ScriptLimits(), snapshot_every, db)
        try:
            await api.replay_new()
        except BaseException:
            await api.close(snapshot=False)
            raise
        return api

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise MemoryStoreError("the facts store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))
        except sqlite3.Error as exc:  # a storage fault is typed like the memory core's own (one way out)
            raise sqlite_fault(self.engine.db_path, exc) or MemoryStoreError(f"facts database error: {exc}") from exc
        except OSError as exc:
            raise os_fault(exc) or MemoryStoreError(f"facts storage error: {exc.strerror or exc}") from exc

    # -- worker-thread bodies ---------------------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self.engine.events_since_snapshot >= self.snapshot_every:
            self._write_snapshot()

    def _write_snapshot(self) -> Path:
        path = self.folder / SNAPSHOT_NAME
        write_atomic(path, render_snapshot(self.engine.all_memories()))
        self.engine.events_since_snapshot = 0
        return path

    def _run_script(self, text: str, now_ms: int, provenance: str) -> ScriptResult:
        if len(text) > self.limits.max_script_chars:
            return ScriptResult(None, "", f"the script is longer than {self.limits.max_script_chars} characters", 0)
        session = Session(self.engine, now_ms, provenance)
        try:
            with self.engine.transaction():  # a script is all or nothing
                ok, out, line = self.sandbox.run(text, list(COMMANDS), session.call)
                if not ok:
                    raise _ScriptFailed(out, line)
        except _ScriptFailed as failed:
            return ScriptResult(None, "", failed.message, failed.line)
        except SandboxCrash as exc:
            return ScriptResult(None, "", str(exc), 0)
        self._maybe_snapshot()
        limit = self.limits.max_output_chars
        response = _cap(session.response, limit) if session.response is not None else None
        return ScriptResult(response, _cap(out, limit), None, 0)

    def _remember(
        self, mid: str, subject: str, ctype: str, fields: Mapping[str, str], now_ms: int, provenance: str
    ) -> str:
        with self.engine.transaction():
            self.engine.remember(mid, subject, ctype, fields, now_ms=now_ms, provenance=provenance)
        self._maybe_snapshot()
        return mid

    def _recall(self, target: str, limit: int, now_ms: int) -> list[Memory]:
        with self.engine.transaction():
            found = recall_targets(self.engine, target, now_ms, limit)
            self.engine.touch([m.id for m in found], now_ms=now_ms)
        self._maybe_snapshot()
        return found

    def _load(self, text: str, now_ms: int, provenance: str) -> LoadReport:
        report = LoadReport()
        entries = parse_snapshot(text)
        # Original creation order keeps "a memory is the subject of another" valid; new lines go last.
        entries.sort(key=lambda e: (e.meta.get("created_ms", float("inf")), e.line_no))
        e = self.engine
        with e.transaction():
            for entry in entries:
                w = entry.words
                mid = link_id(w[0], w[2], w[1]) if entry.op == "link" else w[0]
                existing = e.get(mid)
                if existing is not None and same_content(existing, entry):
                    report.unchanged += 1
                    continue
                prov = entry.provenance or ("" if entry.meta else provenance)  # exported lines keep theirs
                try:
                    with e.savepoint():  # a refused line leaves what it would have replaced as it was
                        if existing is not None:
                            e.forget(mid, now_ms=now_ms)
                        if entry.op == "link":
                            strength = float(w[3]) if len(w) == 4 else 1.0
                            e.link(w[0], w[1], w[2], strength, now_ms=now_ms, provenance=prov, meta=entry.meta)
                        else:
                            pairs = w[3:]
                            fields = dict(zip(pairs[::2], pairs[1::2], strict=True))
                            e.remember(w[0], w[1], w[2], fields, now_ms=now_ms, provenance=prov, meta=entry.meta)
                except (FactsError, ValueError, OverflowError) as exc:
                    report.rejected.append((entry.line_no, str(exc)))
                    continue
                if existing is not None:
                    report.replaced += 1
                else:
                    report.added += 1
        self._maybe_snapshot()
        return report

    # -- public API -------------------------------------------------------------------------------

    async def run_script(self, text: str, *, as_of: datetime | None = None, provenance: str = "") -> ScriptResult:
        """Run a Tcl script in the sandbox; all its changes commit together, or none on an error."""
        return await self._call(self._run_script, text, _ms(as_of), provenance)

    async def remember(
        self,
        mid: str,
        subject: str,
        ctype: str,
        fields: Mapping[str, str],
        *,
        provenance: str = "",
        now: datetime | None = None,
    ) -> str:
        """Store one memory (add_once: an existing id raises FactsError)."""
        return await self._call(self._remember, mid, subject, ctype, dict(fields), _ms(now), provenance)

    async def recall(self, target: str, *, limit: int = 100, now: datetime | None = None) -> list[Memory]:
        """Like the `recall` command (bumps access counts); returns the memories as they were read."""
        return await self._call(self._recall, target, limit, _ms(now))

    async def get(self, mid: str) -> Memory | None:
        return await self._call(self.engine.get, mid)

    async def all_memories(self) -> list[Memory]:
        return await self._call(self.engine.all_memories)

    async def world(self) -> dict[str, int]:
        return await self._call(self.engine.counts)

    async def tiered_injection(self, now: datetime | None = None) -> list[str]:
        """At most 12 lines for a session's start: identity, the top 8 by decay, a hint line."""
        return await self._call(inject.tiered_injection, self.engine, _ms(now))

    async def replay_new(self) -> int:
        """Apply events from all origin files not applied yet (e.g. after a git pull); returns how many."""
        return await self._call(self.engine.replay_new)

    async def rebuild(self) -> int:
        """Drop the facts tables' rows and replay every event file; returns the number of events applied."""
        n = await self._call(self.engine.rebuild)
        await self._call(self._write_snapshot)
        return n

    async def export_snapshot(self) -> str:
        return await self._call(lambda: render_snapshot(self.engine.all_memories()))

    async def write_snapshot(self) -> Path:
        return await self._call(self._write_snapshot)

    async def load_snapshot(
        self, text: str, *, provenance: str = "snapshot load", now: datetime | None = None
    ) -> LoadReport:
        """Re-apply a (hand-edited) snapshot: new lines are added, changed ones replaced, equal ones kept."""
        return await self._call(self._load, text, _ms(now), provenance)

    async def close(self, *, snapshot: bool = True) -> None:
        if self._closed or self._closing:  # once: a second close would drop another holder's database share
            return
        self._closing = True

        def shutdown() -> None:
            try:
                if snapshot:
                    self._write_snapshot()
            finally:
                self.sandbox.close()
                self.db.release_side_connection(self.engine.conn)

        try:
            await self._call(shutdown)
        finally:
            self._closed = True
            self._executor.shutdown(wait=False)
            await self.db.close()
