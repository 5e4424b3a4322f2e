"""Rebuild a damaged memory database from what survives it: the handoffs/ mirror, the transcripts, the facts log.

The damaged file is never deleted: it (with its -wal and -shm) is renamed ``memory.db.damaged-<UTC stamp>``
beside the new one. What only the database held is salvaged from it when its pages still read: the
forgotten sessions (so a forgotten session stays forgotten), the cost ledger, the transcript paths that
were ingested and the subagent links. Then a fresh database is made, the transcripts are read again
(without extraction), the mirror's handoffs are imported (the owner's reviewed text wins over a fresh
extraction) and the structured facts are replayed from their event log.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.errors import ForeignDatabaseError, MemoryStoreError, SessionNotFoundError
from memory.facade import Eywa, ImportReport
from memory.ingest import IngestReport
from memory.settings import MemorySettings
from memory.storage.database import Database
from memory.storage.files import fsync_dir, stamped_sibling

__all__ = ["NothingToRecoverError", "RecoverReport", "check_health", "recover"]

logger = logging.getLogger(__name__)

_COMPANIONS = ("-wal", "-shm")  # moved first: a stale WAL must never be replayed onto the fresh file


class NothingToRecoverError(MemoryStoreError):
    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} passes SQLite's integrity check: nothing to recover (--force rebuilds it all the same; "
            "a full disk or a read-only file needs space or permissions, not a rebuild)"
        )
        self.path = path


@dataclass(slots=True)
class _Salvage:
    forgotten: list[tuple[Any, ...]] = field(default_factory=list)
    ledger_columns: list[str] = field(default_factory=list)
    ledger: list[tuple[Any, ...]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # "table: why"


@dataclass(slots=True)
class RecoverReport:
    moved_to: Path | None  # where the old file went (None: there was none)
    problem: str  # what the health check found ("" when --force rebuilt a healthy file)
    forgotten: int = 0
    ledger_rows: int = 0
    links: int = 0
    unreadable: list[str] = field(default_factory=list)
    ingest: IngestReport = field(default_factory=IngestReport)
    imported: ImportReport = field(default_factory=ImportReport)
    pending_extraction: int = 0
    facts: int = 0
    facts_error: str = ""


def check_health(path: Path) -> str:
    """What SQLite's quick check finds wrong with ``path`` ("" when nothing); read-only, the file is untouched.

    Raises ForeignDatabaseError for another program's SQLite file: that is not ours to rebuild."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise ForeignDatabaseError(path)
        found = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    return "" if found == ["ok"] else "; ".join(found[:3])


def _move_aside(path: Path) -> Path:
    Database.check_closed(path, "move it aside")  # a rename under a live connection loses its writes
    aside = stamped_sibling(path, "damaged")
    for suffix in _COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(aside.with_name(aside.name + suffix))
    path.rename(aside)
    fsync_dir(path.parent)
    return aside


def _drop_empty_companions(aside: Path) -> None:
    """An empty -wal holds no commit (reading the moved file may have made one, and its -shm): clutter."""
    Database.check_closed(aside, "tidy its -wal and -shm")
    wal = aside.with_name(aside.name + "-wal")
    if wal.exists() and wal.stat().st_size == 0:
        for suffix in _COMPANIONS:
            aside.with_name(aside.name + suffix).unlink(missing_ok=True)


def _salvage(aside: Path) -> _Salvage:
    """What only the database held, table by table: a damaged table is named, the others still come back."""
    out = _Salvage()
    try:
        conn = sqlite3.connect(f"{aside.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        out.unreadable.append(f"every table: {exc}")
        return out

    def take(table: str, read: Callable[[], None]) -> None:
        try:
            read()
        except sqlite3.Error as exc:
            out.unreadable.append(f"{table}: {exc}")

    def forgotten() -> None:
        cur = conn.execute("SELECT * FROM forgotten")  # a file from before schema 7 has no forgotten_by
        names = [d[0] for d in cur.description]
        by = names.index("forgotten_by") if "forgotten_by" in names else None
        out.forgotten = [(r[0], r[1], r[by] if by is not None else "") for r in cur]

    def ledger() -> None:
        cur = conn.execute("SELECT * FROM ledger ORDER BY id")
        out.ledger_columns = [d[0] for d in cur.description]
        out.ledger = [tuple(r) for r in cur]

    def sources() -> None:
        out.sources = [str(r[0]) for r in conn.execute("SELECT path FROM sources")]

    def links() -> None:
        rows = conn.execute("SELECT session_id, parent_id FROM sessions WHERE parent_id != ''")
        out.links = [(str(a), str(b)) for a, b in rows]

    try:
        for table, read in (("forgotten", forgotten), ("ledger", ledger), ("sources", sources), ("sessions", links)):
            take(table, read)
    finally:
        conn.close()
    return out


async def _restore(eywa: Eywa, salvage: _Salvage, report: RecoverReport) -> None:
    async with eywa.db.write() as conn:
        await conn.executemany(
            "INSERT OR IGNORE INTO forgotten(session_id, at, forgotten_by) VALUES (?, ?, ?)", salvage.forgotten
        )
        if salvage.ledger:
            async with conn.execute("SELECT * FROM ledger LIMIT 0") as cur:
                known = {d[0] for d in cur.description}
            columns = [c for c in salvage.ledger_columns if c in known]
            picks = [salvage.ledger_columns.index(c) for c in columns]
            sql = f"INSERT OR IGNORE INTO ledger({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            await conn.executemany(sql, [tuple(row[i] for i in picks) for row in salvage.ledger])
    report.forgotten, report.ledger_rows = len(salvage.forgotten), len(salvage.ledger)


async def recover(settings: MemorySettings, paths: Sequence[Path] = (), *, force: bool = False) -> RecoverReport:
    """Move a damaged ``memory.db`` aside and rebuild memory (see the module's docstring).

    ``paths``: transcript files or folders to read again besides Claude Code's and Codex's own folders and
    those the damaged file still names (they may be unreadable in it).

    Raises NothingToRecoverError when the file is healthy (unless ``force``) and ForeignDatabaseError
    when it is another program's; neither moves anything.
    """
    path = settings.db_path
    salvage = _Salvage()
    report = RecoverReport(None, "")
    if path.exists():
        report.problem = await asyncio.to_thread(check_health, path)
        if not report.problem and not force:
            raise NothingToRecoverError(path)
        report.moved_to = _move_aside(path)
        salvage = await asyncio.to_thread(_salvage, report.moved_to)
        _drop_empty_companions(report.moved_to)
        report.unreadable = salvage.unreadable
    async with await Eywa.open(settings) as eywa:
        await _restore(eywa, salvage, report)
        # The transcripts again, without extraction: the mirror's handoffs are imported below instead.
        wanted = [*paths, *(Path(p) for p in salvage.sources if Path(p).is_file())]
        if wanted:
            report.ingest = await eywa.ingest(wanted, extract=False)
        defaults = await eywa.ingest([], extract=False)
        report.ingest.sessions_new += defaults.sessions_new
        report.ingest.files_seen += defaults.files_seen
        report.ingest.missing += defaults.missing
        report.ingest.unreadable += defaults.unreadable
        if settings.handoffs_dir.is_dir():
            report.imported = await eywa.import_dir(settings.handoffs_dir)
        for session_id, parent_id in salvage.links:
            try:
                await eywa.link(session_id, parent_id=parent_id)
                report.links += 1
            except SessionNotFoundError:
                continue  # its transcript is gone and the mirror had no handoff for it
        async with eywa.db.write() as conn:
            # A session whose handoff came back from the mirror is extracted: a fresh extraction would
            # overwrite the text the owner reviewed (and cost an LLM call per session).
            await conn.execute(
                "UPDATE sessions SET extract_state = 'done' WHERE extract_state != 'done' "
                "AND session_id IN (SELECT session_id FROM handoffs)"
            )
            async with conn.execute("SELECT count(*) FROM sessions WHERE extract_state != 'done'") as cur:
                row = await cur.fetchone()
            report.pending_extraction = int(row[0]) if row else 0
    report.facts, report.facts_error = await _replay_facts(settings)
    return report


async def _replay_facts(settings: MemorySettings) -> tuple[int, str]:
    """The structured facts come back from their event log (opening the store replays what is not applied)."""
    from memory.facts.api import FactsApi

    try:
        facts = await FactsApi.from_settings(settings)
        try:
            return (await facts.world())["memories"], ""
        finally:
            await facts.close()
    except MemoryStoreError as exc:
        logger.warning("structured facts not replayed: %s", exc)
        return 0, str(exc)
