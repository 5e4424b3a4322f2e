"""`Eywa`: the one facade over the memory core that the CLI, the MCP server, the hooks and the relay use."""

from __future__ import annotations

import contextlib
import functools
import logging
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from memory.errors import DestinationError, SessionNotFoundError, SourceUnreadableError, StorageError
from memory.grounding import MAX_GROUNDING, grounding_text
from memory.handoffs.adopt import BATCH_FILES, ImportReport, import_tree
from memory.handoffs.extraction import extract_pending
from memory.index import postings as index
from memory.index.retrieval import ContentHit, ScoredHandoff, retrieve, search_content
from memory.ingest import IngestReport
from memory.ingest import ingest as ingest_into
from memory.redact.privacy import hidden_sessions, load_privacy
from memory.redact.redactor import Redactor
from memory.settings import MemorySettings
from memory.spend import MEMORY_ENGINE, day_start
from memory.storage import ledger, turns, views
from memory.storage import rows as store
from memory.storage.database import SCHEMA_VERSION, Database
from memory.storage.files import write_atomic
from memory.storage.ledger import CostEntry, CostTotal, CostView, GroupBy
from memory.storage.mirror import handoff_relpath, remove_handoff, sync_folders
from memory.storage.turns import TurnIndex, TurnText
from memory.storage.views import Child, SessionItem

__all__ = ["Eywa", "Grounding", "ImportReport", "SessionView", "writes"]

logger = logging.getLogger(__name__)

_E = TypeVar("_E", bound="Eywa")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def writes(
    method: Callable[Concatenate[_E, _P], Awaitable[_R]],
) -> Callable[Concatenate[_E, _P], Coroutine[Any, Any, _R]]:
    """Mark a public method of :class:`Eywa` that writes: it runs inside :meth:`Eywa.write_section`
    (tests/memory/storage/test_write_section.py finds any writing method that does not)."""

    @functools.wraps(method)
    async def in_section(self: _E, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        async with self.write_section():
            return await method(self, *args, **kwargs)

    return in_section


@dataclass(frozen=True, slots=True)
class Grounding:
    results: list[ScoredHandoff]
    text: str
    markdowns: dict[str, str] = field(default_factory=dict)  # session id -> handoff file, for own quoting


@dataclass(frozen=True, slots=True)
class SessionView:
    session: store.SessionRow | None
    handoff: store.HandoffRow | None
    subagents: list[str] = field(default_factory=list)


def _on_store(
    fn: Callable[Concatenate[Database, MemorySettings, _P], Awaitable[_R]],
) -> Callable[Concatenate[Eywa, _P], Awaitable[_R]]:
    """A memory-core function of (database, settings, …) as an :class:`Eywa` method taking the rest."""

    @functools.wraps(fn)
    async def method(self: Eywa, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await fn(self.db, self.settings, *args, **kwargs)

    return method


def _check_regular_file(path: Path) -> None:
    """SourceUnreadableError naming why ``path`` is no transcript file to read (missing, a folder, a device,
    a name too long)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise SourceUnreadableError(path, "no such file") from None
    except OSError as exc:
        raise SourceUnreadableError(path, exc.strerror or str(exc)) from exc
    if stat.S_ISDIR(mode):
        raise SourceUnreadableError(path, "a folder, not a transcript file")
    if not stat.S_ISREG(mode):
        raise SourceUnreadableError(path, "not a regular file")


class Eywa:
    """Open with ``async with await Eywa.open(settings) as eywa`` or call :meth:`close`."""

    def __init__(self, settings: MemorySettings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.redactor = Redactor(settings.own_secrets)
        self._closed = False

    @classmethod
    async def open(cls, settings: MemorySettings) -> Eywa:
        db = await Database.open(settings.db_path, busy_timeout_ms=settings.busy_timeout_ms)
        return cls(settings, db)

    async def close(self) -> None:
        # Once: the database is shared in the process (memory/storage/share.py), a second close would drop
        # another holder's share.
        if self._closed:
            return
        self._closed = True
        await self.db.close()

    async def __aenter__(self) -> Eywa:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def write_section(self) -> AbstractAsyncContextManager[None]:
        """The one hook around every public writing method (:func:`writes`; re-entered when one calls
        another). None here: a store whose writes must hold a lock of its own overrides it (the PostgreSQL
        store's fleet-wide write section of a tenant, service/pg/store.py)."""
        return contextlib.nullcontext()

    @property
    def last_fault(self) -> StorageError | None:
        """The last storage fault the database met (damaged pages, a full disk…), or None."""
        return self.db.last_fault

    ingest = writes(_on_store(ingest_into))

    async def get(
        self,
        query: str = "",
        *,
        project: str | None = None,
        days_back: float | None = None,
        max_handoffs: int | None = None,
        as_of: datetime | None = None,
        viewer: Path | None = None,
        branch: str | None = None,
    ) -> Grounding:
        """Startup grounding: the best handoffs for a query, as scored results and as quoted text.

        Private projects' handoffs (memory.redact.privacy) are left out, but for the project in folder ``viewer``.
        ``branch``: the handoffs of that git branch's sessions come first (memory.index.branch_pref).
        """
        k = min(MAX_GROUNDING, max_handoffs or self.settings.max_handoffs)
        results = await retrieve(
            self.db,
            query,
            project=project,
            days_back=days_back,
            max_k=k,
            as_of=as_of,
            window_days=self.settings.window_days,
            hidden=load_privacy(self.settings).without(viewer),
            branch=branch,
        )
        # One read for all of them, on the read connection (each aiosqlite statement would be a thread hop).
        sql = f"SELECT session_id, markdown FROM handoffs WHERE session_id IN ({','.join('?' * len(results))})"
        wanted = [r.session_id for r in results]
        rows = await self.db.read(lambda conn: conn.execute(sql, wanted).fetchall()) if results else []
        markdowns: dict[str, str] = {str(sid): str(md) for sid, md in rows}
        return Grounding(results, grounding_text(results, markdowns), markdowns)

    async def search(self, query: str, limit: int = 10, *, viewer: Path | None = None) -> list[ContentHit]:
        """Detail recall; private projects' sessions are left out, but for the project in folder ``viewer``."""
        want = limit
        while True:
            hits = await search_content(self.db.conn, query, want)
            hide = await self.hidden_from(viewer, [h.session_id for h in hits])
            kept = [h for h in hits if h.session_id not in hide]
            if len(kept) >= limit or len(hits) < want:
                return kept[:limit]
            want *= 4

    async def hidden_from(self, viewer: Path | None, session_ids: Sequence[str]) -> set[str]:
        """Which of ``session_ids`` belong to a private project other than the one in folder ``viewer``."""
        hidden = load_privacy(self.settings).without(viewer)
        if not hidden or not session_ids:
            return set()
        return await self.db.read(functools.partial(hidden_sessions, privacy=hidden, session_ids=list(session_ids)))

    async def show(self, session_id: str, *, transcript: bool = True) -> SessionView:
        """The session, its handoff and subagents; ``transcript=False`` leaves the session's rendered markdown
        out (``""``) for callers that need only the rest (it can be megabytes)."""
        session = await store.get_session(self.db.conn, session_id, markdown=transcript)
        handoff = await store.get_handoff(self.db.conn, session_id)
        if session is None and handoff is None:
            raise SessionNotFoundError(session_id)
        async with self.db.conn.execute(
            "SELECT session_id FROM sessions WHERE parent_id = ? ORDER BY session_id", (session_id,)
        ) as cur:
            subagents = [str(r[0]) for r in await cur.fetchall()]
        return SessionView(session, handoff, subagents)

    @writes
    async def extract(
        self, session_id: str | None = None, *, transcript_path: Path | None = None, use_llm: bool | None = None
    ) -> list[store.HandoffRow]:
        """(Re-)extract handoffs for one session, or for every session of one transcript file."""
        ids: list[str]
        if transcript_path is not None:
            _check_regular_file(transcript_path)
            report = await self.ingest([transcript_path], extract=False)
            if report.unreadable:
                raise SourceUnreadableError(transcript_path, report.unreadable[0][1])
            source = await store.get_source(self.db.conn, str(transcript_path.resolve()))
            ids = list(source.session_ids) if source else []
            if not ids and report.problems:  # junk, not an empty transcript: say so
                first = report.problems[0]
                bad = sum(report.lines_skipped.values())
                why = f"not a transcript ({bad} unreadable line(s); line {first.line_no}: {first.reason})"
                raise SourceUnreadableError(transcript_path, why)
        elif session_id is not None:
            if await store.get_session(self.db.conn, session_id, markdown=False) is None:
                raise SessionNotFoundError(session_id)
            ids = [session_id]
        else:
            raise ValueError("extract needs a session id or a transcript path")
        await extract_pending(self.db, self.settings, IngestReport(), use_llm=use_llm, session_ids=ids)
        rows = [await store.get_handoff(self.db.conn, sid) for sid in ids]
        return [r for r in rows if r is not None]

    @writes
    async def extract_pending(self, report: IngestReport, *, use_llm: bool | None = None) -> None:
        """Extract the handoffs of every session whose extraction is pending (after an ``ingest`` with
        ``extract=False``), counted in ``report``."""
        await extract_pending(self.db, self.settings, report, use_llm=use_llm, redactor=self.redactor)

    @writes
    async def link(self, session_id: str, *, parent_id: str) -> None:
        """Link a session (e.g. a Codex rollout a Claude session caused) to its parent as a subagent session.

        It leaves the grounding index (a linked session never grounds alone) and stays reachable through
        detail recall and `show(parent).subagents`.
        """
        async with self.db.write() as conn:
            if not await store.link_parent(conn, session_id, parent_id):
                raise SessionNotFoundError(session_id)
            await index.unindex(conn, session_id)
            await conn.execute("UPDATE content SET parent_id = ? WHERE session_id = ?", (parent_id, session_id))

    async def list_handoffs(
        self,
        *,
        limit: int = 20,
        project: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[store.HandoffRow]:
        """Newest first; ``since`` inclusive, ``until`` exclusive; ``after`` = (ts, session id) of the last row
        of a previous page."""
        return await store.list_handoffs(
            self.db.conn,
            limit=limit,
            project=project,
            since_ts=since.timestamp() if since is not None else None,
            until_ts=until.timestamp() if until is not None else None,
            after=after,
        )

    @writes
    async def forget(self, session_id: str, *, by: str = "") -> list[str]:
        """Remove a session, its handoff, its subagents, their index entries and mirror files. It stays
        forgotten (``by`` whom, when known): a later ingest or import of it leaves it out."""
        await self.show(session_id, transcript=False)  # SessionNotFoundError when there is nothing to forget
        async with self.db.write() as conn:
            removed = await store.delete_session(conn, session_id, by=by)
            for sid, _ in removed:
                await index.unindex(conn, sid)
                await index.unindex_content(conn, sid)
        for sid, date in removed:
            if date is not None:  # an undated handoff's file is under unknown/
                remove_handoff(self.settings.handoffs_dir, sid, date)
        return [sid for sid, _ in removed]

    @writes
    async def import_dir(self, root: Path, *, batch_files: int = BATCH_FILES, workers: int = 0) -> ImportReport:
        """Adopt handoff files (this format or eywa-mcp's) from a folder tree; a file wins over the stored row.

        A file that cannot be adopted (too big, a link, not a handoff, hostile YAML) is reported in
        ``rejected`` and the rest go on. ``batch_files`` and ``workers``: see :mod:`memory.handoffs.adopt`
        (``batch_files=1, workers=0`` is the one-at-a-time path imports took before).
        """
        return await import_tree(
            self.db,
            root,
            mirror=self.settings.handoffs_dir,
            redactor=self.redactor,
            batch_files=batch_files,
            workers=workers,
        )

    async def export_dir(self, root: Path) -> int:
        """Write every handoff as `root/YYYY/MM/DD/<session>.md` (the format `import_dir` reads)."""
        if root.exists() and not root.is_dir():
            raise DestinationError(root, "not a folder")
        n = 0
        folders: set[Path] = set()
        async for relpath, markdown in self.handoff_files():
            path = root / relpath
            try:
                # One fsync per folder at the end, not two per file: an export is written in one go.
                write_atomic(path, markdown, sync=False)
            except OSError as exc:
                raise DestinationError(path, exc.strerror or str(exc)) from exc
            folders.add(path.parent)
            n += 1
        sync_folders(root, folders)
        return n

    async def handoff_files(self) -> AsyncIterator[tuple[Path, str]]:
        """Every handoff as (its path in a handoff tree, `YYYY/MM/DD/<session>.md`, and its markdown), oldest
        first: what `export_dir` writes, for writers of other containers (a tar stream)."""
        async with self.db.conn.execute(
            "SELECT session_id, date, markdown FROM handoffs ORDER BY ts, session_id"
        ) as cur:
            async for sid, date, markdown in cur:
                yield handoff_relpath(str(sid), str(date)), str(markdown)

    async def stats(self) -> dict[str, Any]:
        return {"database": str(self.db.path), "schema_version": SCHEMA_VERSION, **await views.counts(self.db.conn)}

    # -- read models of the pages (service/web) and the service's routes -------------------------------

    async def handoff(self, session_id: str) -> store.HandoffRow | None:
        return await store.get_handoff(self.db.conn, session_id)

    async def session_row(self, session_id: str, *, transcript: bool = False) -> store.SessionRow | None:
        """The session's row; without ``transcript`` its rendered markdown is left out (``""``)."""
        return await store.get_session(self.db.conn, session_id, markdown=transcript)

    async def is_forgotten(self, session_id: str) -> bool:
        return await store.is_forgotten(self.db.conn, session_id)

    async def source(self, path: Path | str) -> store.SourceRow | None:
        """The source file read at ``path`` (as stored: a resolved path), or None."""
        return await store.get_source(self.db.conn, str(path))

    async def sources_holding(self, session_ids: Iterable[str], *, under: Path | None = None) -> set[Path]:
        """Every source file (under folder ``under``) whose last read found one of ``session_ids``."""
        return await views.sources_holding(self.db.conn, session_ids, under=under)

    async def list_sessions(
        self, *, project: str = "", kind: str = "", since: str = "", until: str = "", limit: int, offset: int = 0
    ) -> list[SessionItem]:
        """Newest first. ``kind`` "" lists families (sessions with no parent); a kind lists that kind alone.
        ``since`` / ``until`` are inclusive days (YYYY-MM-DD)."""
        return await self.db.read(
            functools.partial(
                views.list_sessions, project=project, kind=kind, since=since, until=until, limit=limit, offset=offset
            )
        )

    async def children(self, session_id: str) -> list[Child]:
        """A session's subagents and the Codex rollouts linked to it."""
        return await self.db.read(functools.partial(views.children, session_id=session_id))

    async def transcript_turns(self, session_id: str, pick: Callable[[TurnIndex], tuple[int, int]]) -> TurnText | None:
        """A session's turn index and the bytes of its transcript that ``pick(index)`` chooses, in one snapshot."""
        return await self.db.read(functools.partial(turns.transcript_turns, session_id=session_id, pick=pick))

    # -- the cost ledger ---------------------------------------------------------------------------------

    async def keeps_costs(self) -> bool:
        """Whether the database has the cost ledger (its migration has run)."""
        return await ledger.has_ledger(self.db.conn)

    @writes
    async def record_cost(self, entry: CostEntry) -> int:
        """Append one Claude or Codex run to the cost ledger; the row's id."""
        ledger.check_session_engine(entry)
        async with self.db.write() as conn:
            return await ledger.append(conn, entry)

    async def cost_totals(self, by: GroupBy = "session", *, engines: tuple[str, ...] = ()) -> list[CostTotal]:
        """Sums per session, run or engine, largest cost first (rows without a key are left out); ``engines``
        keeps only those engines' rows."""
        return await ledger.totals(self.db.conn, by, engines)

    async def memory_spent_today(self, timezone: str | None = None) -> float:
        """USD memory's extractions spent since the owner's midnight (what its daily budget caps)."""
        since = day_start(timezone or self.settings.timezone)
        return await ledger.spent_since(self.db.conn, MEMORY_ENGINE, since)

    async def linked_rollouts(self, session_id: str) -> list[Path]:
        """The Codex rollout files a session caused, in the order they were recorded."""
        return await ledger.linked_rollouts(self.db.conn, session_id)

    async def cost_view(self, recent: int = 50) -> CostView:
        """The cost page: totals per engine, the 20 costliest sessions, the ``recent`` latest rows."""
        return await self.db.read(functools.partial(ledger.cost_view, recent=recent))
