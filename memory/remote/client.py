"""`RemoteEywa`: the :class:`~memory.facade.Eywa` facade over the memory service (`macupos serve`).

Same methods, same dataclasses, so the CLI, the hooks, the MCP server, the relay and the bot do not know
which memory they hold (memory.factory picks). Transcripts leave the machine redacted, through the durable
outbox (memory.remote.outbox); everything else is one bounded HTTP request (memory.remote.http). What works on
the local files only (recover, re-extracting a stored session, linking a rollout) says so in one line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from memory.errors import (
    DestinationError,
    HandoffFormatError,
    SessionNotFoundError,
    SourceUnreadableError,
    StorageError,
)
from memory.facade import Grounding, SessionView
from memory.grounding import MAX_GROUNDING, grounding_text
from memory.handoffs.adopt import BATCH_FILES, ImportReport
from memory.handoffs.files import read_handoff_file, walk_tree
from memory.index.retrieval import ContentHit
from memory.ingest import IngestReport, ProgressFn
from memory.models import SessionKind
from memory.redact.privacy import load_privacy
from memory.redact.redactor import Redactor
from memory.remote.http import RemoteMemoryError, RemoteUnsupportedError, ServiceClient, Timeouts
from memory.remote.outbox import Entry, FlushReport, Outbox
from memory.remote.rows import content_hit, handoff_row, listed_row, scored
from memory.remote.transfer import check_file, count, size, unpack_handoffs
from memory.remote.upload import SentIndex, Stamp, is_private, upload_name
from memory.settings import MemorySettings
from memory.sources.discover import discover
from memory.spend import MEMORY_ENGINE, day_start
from memory.storage import ledger
from memory.storage.database import Database
from memory.storage.ledger import CostEntry, CostTotal, GroupBy
from memory.storage.rows import HandoffRow, SessionRow

__all__ = ["RemoteEywa"]

logger = logging.getLogger(__name__)

_PAGE = 500  # the service's largest handoff page
_FLUSH_WAIT_S = 60.0


class RemoteEywa:
    """Open with ``await RemoteEywa.open(settings)``; close with :meth:`close` (or ``async with``).

    With ``local_db=True`` (the relay and the bot) it also opens the local memory database, which keeps what
    stays on this machine: the cost ledger. Without it the ledger's reads are empty and writes refused.
    """

    def __init__(self, settings: MemorySettings, client: ServiceClient, db: Database | None = None) -> None:
        self.settings = settings
        self.client = client
        self._local = db
        self.redactor = Redactor(settings.own_secrets)
        self.outbox = Outbox(settings.outbox_dir)
        self.last_flush: FlushReport | None = None

    @classmethod
    async def open(
        cls, settings: MemorySettings, *, timeouts: Timeouts | None = None, local_db: bool = False
    ) -> RemoteEywa:
        db = await Database.open(settings.db_path, busy_timeout_ms=settings.busy_timeout_ms) if local_db else None
        return cls(settings, ServiceClient(settings.memory_url, settings.api_key, timeouts or Timeouts()), db)

    async def close(self) -> None:
        try:
            await self.client.aclose()
        finally:
            if self._local is not None:
                await self._local.close()

    async def __aenter__(self) -> RemoteEywa:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def last_fault(self) -> StorageError | None:
        """The local database's last storage fault (None without one: the service's are its own)."""
        return self._local.last_fault if self._local is not None else None

    # -- transcripts: redacted into the outbox, then sent ---------------------------------------------

    async def ingest(
        self,
        paths: Sequence[Path] = (),
        *,
        force: bool = False,
        extract: bool = True,
        use_llm: bool | None = None,
        progress: ProgressFn | None = None,
    ) -> IngestReport:
        """Queue each transcript file under ``paths`` (redacted), then flush the outbox. The service
        extracts the handoffs itself (``extract`` and ``use_llm`` are its business); ``force`` sends files
        whose source did not change since the last send too."""
        del extract, use_llm
        s = self.settings
        found = await asyncio.to_thread(
            discover, paths, claude_projects_dir=s.claude_projects_dir, codex_sessions_dir=s.codex_sessions_dir
        )
        report = IngestReport()
        report.missing = [str(p) for p in found.missing]
        report.unreadable = [(str(p), why) for p, why in found.unreadable]
        privacy = load_privacy(s)
        sent = SentIndex(self.outbox.folder).load()
        pending = {e.name for e in self.outbox.entries()}
        total = sum(size(f.path) for f in found.files)
        done = 0
        for src in found.files:
            name = upload_name(src, s)
            try:
                stamp = Stamp.of(src.path)
                if not force and name not in pending and sent.get(name) == stamp:
                    report.files_seen += 1
                    report.files_unchanged += 1
                    continue
                if await asyncio.to_thread(is_private, src.path, privacy):
                    report.sessions_private += 1
                    continue
                note = {"size": stamp.size, "mtime_ns": stamp.mtime_ns}
                await asyncio.to_thread(self.outbox.enqueue, src.path, name, self.redactor, note)
            except OSError as exc:
                report.unreadable.append((str(src.path), exc.strerror or str(exc)))
                continue
            report.files_seen += 1
            done += stamp.size
            if progress is not None:
                progress(done, total, str(src.path))
        # Another flush (a hook's, another session's end) may hold the outbox: wait for it, then send ours.
        flushed = await self.sync(wait_s=_FLUSH_WAIT_S)
        for entry, answer in flushed.sent:
            count(report, entry, answer)
        report.unreadable += [(name, why) for name, why in flushed.rejected]
        return report

    async def sync(self, *, wait_s: float = 0.0) -> FlushReport:
        """Send what waits in the outbox (memory.remote.outbox); ``last_flush`` keeps the report."""
        flushed = await self.outbox.flush(self._send, wait_s=wait_s)
        stamps = {
            e.name: Stamp(int(e.note["size"]), int(e.note["mtime_ns"]))
            for e, _ in flushed.sent
            if "size" in e.note and "mtime_ns" in e.note
        }
        await asyncio.to_thread(SentIndex(self.outbox.folder).record, stamps)
        self.last_flush = flushed
        return flushed

    async def _send(self, entry: Entry) -> dict[str, Any]:
        body = await asyncio.to_thread(entry.body.read_bytes)
        # gzip on the wire, under the upload timeout: the SDK's transcript upload
        answer = await self.client.call(self.client.sdk.upload_transcript(entry.name, body))
        return answer.raw

    # -- reading ---------------------------------------------------------------------------------------

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
        """The service's grounding; handoffs naming a private project (but ``viewer``'s) are left out here."""
        k = min(MAX_GROUNDING, max_handoffs or self.settings.max_handoffs)
        answer = self.client.sdk.get(
            query, project=project, days_back=days_back, max_results=k, as_of=as_of, branch=branch, explain=True
        )
        items = await self.client.call(answer)
        hidden = load_privacy(self.settings).without(viewer).names
        results = [r for r in (scored(item.raw) for item in items) if not hidden.intersection(r.projects)]
        texts = await asyncio.gather(*(self.handoff_markdown(r.session_id) for r in results))
        markdowns = {r.session_id: t for r, t in zip(results, texts, strict=True) if t is not None}
        return Grounding(results, grounding_text(results, markdowns), markdowns)

    async def search(self, query: str, limit: int = 10, *, viewer: Path | None = None) -> list[ContentHit]:
        del viewer  # this machine's private sessions are never sent; the service knows no folders
        hits = await self.client.call(self.client.sdk.search(query, limit=limit))
        return [content_hit(hit.raw) for hit in hits]

    async def hidden_from(self, viewer: Path | None, session_ids: Sequence[str]) -> set[str]:
        """None: the service holds no session of this machine's private projects (they are never sent)."""
        del viewer, session_ids
        return set()

    async def _text(self, session_id: str, form: Literal["markdown", "handoff"]) -> str | None:
        """One session's markdown or handoff, or None for a 404."""
        try:
            return await self.client.call(self.client.sdk.session(session_id, format=form))
        except RemoteMemoryError as exc:
            if exc.status == 404:
                return None
            raise

    async def handoff_markdown(self, session_id: str) -> str | None:
        """One session's handoff file, or None when it has none (or there is no such session)."""
        return await self._text(session_id, "handoff")

    async def show(self, session_id: str) -> SessionView:
        handoff_md, session_md = await asyncio.gather(
            self.handoff_markdown(session_id), self._text(session_id, "markdown")
        )
        if handoff_md is None and session_md is None:
            raise SessionNotFoundError(session_id)
        handoff = None
        if handoff_md is not None:
            try:
                handoff = handoff_row(handoff_md)
            except HandoffFormatError as exc:
                raise RemoteMemoryError(f"memory service: the handoff of {session_id} does not read: {exc}") from exc
        session = None
        if session_md is not None:
            kind = handoff.kind if handoff is not None else SessionKind.MAIN
            parent = handoff.parent_id if handoff is not None else ""
            session = SessionRow(session_id, kind, parent, "", "", "", "", "", "", "", 0.0, 0, session_md, "", "")
        return SessionView(session, handoff, [])

    async def list_handoffs(
        self,
        *,
        limit: int = 20,
        project: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[HandoffRow]:
        rows: list[HandoffRow] = []
        cursor = base64.urlsafe_b64encode(json.dumps(list(after)).encode()).decode().rstrip("=") if after else None
        while len(rows) < limit:
            answer = self.client.sdk.list_handoffs(
                limit=min(_PAGE, limit - len(rows)), project=project, since=since, until=until, cursor=cursor
            )
            page = await self.client.call(answer)
            rows += [listed_row(item.raw) for item in page.handoffs]
            cursor = page.next_cursor
            if not cursor:
                break
        return rows[:limit]

    async def stats(self) -> dict[str, Any]:
        stats = (await self.client.call(self.client.sdk.stats())).raw
        waiting = self.outbox.entries()
        return {"service": self.settings.memory_url, **stats, "outbox": len(waiting)}

    # -- changing --------------------------------------------------------------------------------------

    async def forget(self, session_id: str) -> list[str]:
        try:
            return await self.client.call(self.client.sdk.forget(session_id))
        except RemoteMemoryError as exc:
            if exc.status == 404:
                raise SessionNotFoundError(session_id) from None
            raise

    async def extract(
        self, session_id: str | None = None, *, transcript_path: Path | None = None, use_llm: bool | None = None
    ) -> list[HandoffRow]:
        """Send one transcript file (redacted) and return the handoffs the service made of its sessions."""
        del use_llm
        if transcript_path is None:
            if session_id is None:
                raise ValueError("extract needs a session id or a transcript path")
            raise RemoteUnsupportedError(
                "re-extracting a stored session", "send its transcript again (memory extract --transcript FILE)"
            )
        check_file(transcript_path)
        report = await self.ingest([transcript_path], force=True)
        if report.unreadable:
            raise SourceUnreadableError(transcript_path, report.unreadable[0][1])
        flushed = self.last_flush
        if flushed is not None and flushed.error is not None:
            raise flushed.error  # queued in the outbox; said, so the caller does not wait for handoffs
        rows = [await self.handoff_markdown(sid) for sid in report.session_ids]
        return [handoff_row(md) for md in rows if md is not None]

    async def link(self, session_id: str, *, parent_id: str) -> None:
        del session_id, parent_id
        raise RemoteUnsupportedError("linking a Codex rollout to its session", "the rollout stays a session of its own")

    async def import_dir(self, root: Path, *, batch_files: int = BATCH_FILES, workers: int = 0) -> ImportReport:
        """Send each handoff file under ``root`` (``POST /v1/handoffs``); a refused one is reported, the
        rest go on. Stops at the first failure that is not the file's (no answer, a refused key)."""
        del batch_files, workers
        report = ImportReport()
        for path, why in await asyncio.to_thread(lambda: list(walk_tree(root))):
            if why is not None:
                report.rejected.append((str(path), why))
                continue
            try:
                text = await asyncio.to_thread(read_handoff_file, path)
            except SourceUnreadableError as exc:
                report.rejected.append((str(path), exc.reason))
                continue
            name = path.relative_to(root).as_posix()
            try:
                await self.client.call(self.client.sdk.upload_handoff(self.redactor(text), name=name))
            except RemoteMemoryError as exc:
                if exc.status not in (400, 409):  # not the file's fault: stop
                    raise
                report.rejected.append((str(path), exc.detail))
            else:
                report.imported += 1
        return report

    async def export_dir(self, root: Path) -> int:
        """Every handoff of the service's export as ``root/YYYY/MM/DD/<session>.md``; the archive's other
        parts (facts) and anything that is not a plain handoff file are left out."""
        if root.exists() and not root.is_dir():
            raise DestinationError(root, "not a folder")
        with tempfile.TemporaryFile() as fh:
            await self.download("/v1/export", fh)
            fh.seek(0)
            return await asyncio.to_thread(unpack_handoffs, fh, root)

    async def download(self, path: str, out: Any) -> None:
        response = await self.client.request("GET", path, read_timeout=self.client.timeouts.upload)
        await asyncio.to_thread(out.write, response.content)

    # -- the cost ledger: in the local database ----------------------------------------------------------

    async def keeps_costs(self) -> bool:
        return self._local is not None and await ledger.has_ledger(self._local.conn)

    async def record_cost(self, entry: CostEntry) -> int:
        ledger.check_session_engine(entry)
        if self._local is None:
            raise RemoteUnsupportedError("the cost ledger", "open the memory with its local database (local_db=True)")
        async with self._local.write() as conn:
            return await ledger.append(conn, entry)

    async def cost_totals(self, by: GroupBy = "session", *, engines: tuple[str, ...] = ()) -> list[CostTotal]:
        return await ledger.totals(self._local.conn, by, engines) if self._local is not None else []

    async def memory_spent_today(self, timezone: str | None = None) -> float:
        """Nothing without a local database: the service's extractions are not this machine's spend."""
        if self._local is None:
            return 0.0
        since = day_start(timezone or self.settings.timezone)
        return await ledger.spent_since(self._local.conn, MEMORY_ENGINE, since)

    async def linked_rollouts(self, session_id: str) -> list[Path]:
        return await ledger.linked_rollouts(self._local.conn, session_id) if self._local is not None else []
