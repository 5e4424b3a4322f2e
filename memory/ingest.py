"""The ingest pipeline: discover → parse (redacted) → render → store + content index → extract → index.

Each transcript file is committed in one transaction together with its `sources` row, so a process
killed mid-ingest leaves either the file's old state or its new one; sessions whose handoff is not yet
extracted stay `pending` and are picked up by the next run. Extraction (memory.handoffs.extraction) runs after all
files are stored.

Sessions of private projects (memory.redact.privacy) are read to learn their folder and then left out: no row of
theirs is written. A session stored before its project became private is extracted without the model.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from memory.errors import SourceUnreadableError
from memory.handoffs.extraction import extract_pending
from memory.index import postings as index
from memory.models import LineProblem, Transcript
from memory.redact.privacy import Privacy, load_privacy
from memory.redact.redactor import Redactor
from memory.render.markdown import render_markdown
from memory.settings import MemorySettings
from memory.sources.discover import SourceFile, discover, parse_source
from memory.storage import rows as store
from memory.storage.database import Database
from memory.storage.mirror import sweep_stale_temp

__all__ = ["IngestReport", "ProgressFn", "ingest", "session_duration_min"]

logger = logging.getLogger(__name__)

# (bytes done, bytes total, current path): after each file, and every few megabytes inside a long one, from
# the thread that parses it.
ProgressFn = Callable[[int, int, str], None]
_MAX_PROBLEMS_KEPT = 200
_NO_PRIVACY = Privacy()
_SHA_PIECE = 1 << 20  # characters encoded at a time for a markdown's UTF-8 copy and digest


@dataclass(slots=True)
class IngestReport:
    files_seen: int = 0
    files_unchanged: int = 0
    sessions_new: int = 0
    sessions_updated: int = 0
    sessions_unchanged: int = 0
    handoffs_extracted: int = 0
    handoffs_llm: int = 0
    extract_failed: int = 0
    bytes_read: int = 0
    lines_skipped: Counter[str] = field(default_factory=Counter)  # reason -> count
    types_skipped: Counter[str] = field(default_factory=Counter)  # unknown line type -> count
    problems: list[LineProblem] = field(default_factory=list)  # the first few, for the report
    missing: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    session_ids: list[str] = field(default_factory=list)  # sessions new or updated by this run
    # (session id, the file whose content it now has, the other file that also holds it); the copy that goes
    # further is kept (memory.ingest._goes_further)
    clashes: list[tuple[str, str, str]] = field(default_factory=list)
    counted: dict[str, str] = field(default_factory=dict)  # session id -> how this run counted it
    sessions_private: int = 0  # sessions of private projects, left out
    budget_capped: list[str] = field(default_factory=list)  # deterministic because the day's budget was spent

    def count_session(self, session_id: str, how: str) -> None:
        """Count a session once per run ("new", "updated" or "unchanged"), though two files may hold it:
        new or updated in one file wins over unchanged in another."""
        before = self.counted.get(session_id)
        if before is not None and (before != "unchanged" or how == "unchanged"):
            return
        if before == "unchanged":
            self.sessions_unchanged -= 1
        self.counted[session_id] = how
        if how == "new":
            self.sessions_new += 1
        elif how == "updated":
            self.sessions_updated += 1
        else:
            self.sessions_unchanged += 1

    def add_problems(self, problems: Sequence[LineProblem]) -> None:
        for p in problems:
            self.lines_skipped[p.reason] += 1
            if len(self.problems) < _MAX_PROBLEMS_KEPT:
                self.problems.append(p)


def session_duration_min(t: Transcript) -> float:
    start, end = store.handoff_ts(t.started_at), store.handoff_ts(t.ended_at)
    if not t.started_at or not t.ended_at or end < start:
        return 0.0
    return round((end - start) / 60.0, 2)


def _file_digest(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return st.st_size, st.st_mtime_ns, h.hexdigest()


def _utf8_and_sha(text: str) -> tuple[bytearray, str]:
    """``text`` as UTF-8 in a buffer of its exact size, and that encoding's sha256.

    Encoded a piece at a time, twice (to size the buffer, then to fill it): handing SQLite the ``str``
    itself makes Python encode it whole, into a buffer of three bytes a character that is then cut down
    and kept on the string (a 33 MB markdown cost 130 MB more at its peak; docs/benchmarks.md)."""
    h = hashlib.sha256()
    size = 0
    for at in range(0, len(text), _SHA_PIECE):
        piece = text[at : at + _SHA_PIECE].encode()
        h.update(piece)
        size += len(piece)
    out = bytearray(size)
    done = 0
    for at in range(0, len(text), _SHA_PIECE):
        piece = text[at : at + _SHA_PIECE].encode()
        out[done : done + len(piece)] = piece
        done += len(piece)
    return out, h.hexdigest()


def _parse_and_render(
    src: SourceFile, redactor: Redactor, settings: MemorySettings, on_bytes: Callable[[int], None] | None
) -> tuple[list[Transcript], list[tuple[Transcript, str]]]:
    """The file's transcripts, and the markdown of those with content: all that depends on the file alone."""
    transcripts = parse_source(src, redactor, settings.tool_output_limit, on_bytes)
    rendered = [
        (t, render_markdown(t, timezone=settings.timezone, tool_output_limit=settings.tool_output_limit))
        for t in transcripts
        if t.entries or t.summaries
    ]
    for t in transcripts:  # only the markdown is stored and indexed from here on: the parsed text can go
        t.shed()
    return transcripts, rendered


async def ingest(
    db: Database,
    settings: MemorySettings,
    paths: Sequence[Path] = (),
    *,
    force: bool = False,
    extract: bool = True,
    use_llm: bool | None = None,
    progress: ProgressFn | None = None,
) -> IngestReport:
    """Ingest transcripts from `paths` (files or folders; none = Claude Code's and Codex's folders)."""
    report = IngestReport()
    found = discover(
        list(paths),
        claude_projects_dir=settings.claude_projects_dir,
        codex_sessions_dir=settings.codex_sessions_dir,
    )
    report.missing = [str(p) for p in found.missing]
    report.unreadable = [(str(p), why) for p, why in found.unreadable]
    redactor = Redactor(settings.own_secrets)
    privacy = load_privacy(settings)
    sweep_stale_temp(settings.handoffs_dir)
    sizes = {}
    for src in found.files:
        try:
            sizes[src.path] = src.path.stat().st_size
        except OSError as exc:
            report.unreadable.append((str(src.path), exc.strerror or str(exc)))
    total = sum(sizes.values())
    done = 0
    for src in found.files:
        if src.path not in sizes:
            continue
        report.files_seen += 1
        on_bytes = None
        if progress:
            on_bytes = functools.partial(_tell, progress, done, total, str(src.path))
        try:
            await _ingest_file(db, settings, src, redactor, report, force=force, on_bytes=on_bytes, privacy=privacy)
        except SourceUnreadableError as exc:
            report.unreadable.append((str(exc.path), exc.reason))
        except UnicodeError as exc:  # text UTF-8 cannot hold (a file name of undecodable bytes): this file only
            logger.warning("skipped %r: %s", str(src.path), exc)
            report.unreadable.append((repr(str(src.path))[1:-1], "text that is not valid Unicode"))
        done += sizes[src.path]
        if progress:
            progress(done, total, str(src.path))
    if extract:
        await extract_pending(db, settings, report, use_llm=use_llm, redactor=redactor)
    return report


def _tell(progress: ProgressFn, before: int, total: int, path: str, read: int) -> None:
    progress(before + read, total, path)


async def _ingest_file(
    db: Database,
    settings: MemorySettings,
    src: SourceFile,
    redactor: Redactor,
    report: IngestReport,
    *,
    force: bool,
    on_bytes: Callable[[int], None] | None = None,
    privacy: Privacy = _NO_PRIVACY,
) -> None:
    key = str(src.path.resolve())
    try:
        size, mtime_ns, sha = await asyncio.to_thread(_file_digest, src.path)
    except OSError as exc:
        raise SourceUnreadableError(src.path, exc.strerror or str(exc)) from exc
    old = await store.get_source(db.conn, key)
    if old is not None and not force and old.sha256 == sha:
        report.files_unchanged += 1
        for sid in old.session_ids:
            report.count_session(sid, "unchanged")
        return
    try:
        transcripts, rendered = await asyncio.to_thread(_parse_and_render, src, redactor, settings, on_bytes)
    except OSError as exc:
        raise SourceUnreadableError(src.path, exc.strerror or str(exc)) from exc
    except Exception as exc:  # a parser bug one file triggers: that file is reported and skipped, the run goes on
        logger.exception("could not parse %s", src.path)
        raise SourceUnreadableError(src.path, f"the parser failed on it ({type(exc).__name__})") from exc
    report.bytes_read += size
    private = {t.session_id for t in transcripts if privacy.covers(t.cwd)}
    if private:
        report.sessions_private += len(private)
        logger.info("left out %d session(s) of a private project in %s", len(private), src.path)
        rendered = [(t, markdown) for t, markdown in rendered if t.session_id not in private]
        transcripts = [t for t in transcripts if t.session_id not in private]
        if not transcripts:
            return  # not even a sources row: nothing of a private project's is kept
    problems: list[LineProblem] = []
    for t in transcripts:
        problems.extend(t.problems)
        report.types_skipped.update(t.skipped_types)
    transcripts.clear()  # those stored are in ``rendered``, each let go once written (below)
    n_rendered = len(rendered)
    rendered.reverse()  # popped from the end, in the file's order
    # A grown file is read again from its start: its old bad lines were reported when they were new.
    seen = await store.problem_lines(db.conn, key) if old is not None and not force else set()
    report.add_problems([p for p in problems if (p.line_no, p.reason) not in seen])
    kept: list[str] = []  # the file's sessions, forgotten ones left out
    async with db.write() as conn:
        while rendered:
            # A transcript is let go once its row is written: a big one is tens of MB, not held while indexing.
            t, markdown = rendered.pop()
            if await store.is_forgotten(conn, t.session_id):
                continue
            kept.append(t.session_id)
            utf8, content_sha = _utf8_and_sha(markdown)
            # Its header only: the stored markdown (as big as this one) is not needed to compare or replace it.
            existing = await store.get_session(conn, t.session_id, markdown=False)
            if existing is not None and existing.content_sha == content_sha and not force:
                report.count_session(t.session_id, "unchanged")
                continue
            if existing is None:
                report.count_session(t.session_id, "new")
            else:
                rival = await _rival(conn, existing, t, src.path)
                if rival is not None and _goes_further(existing, rival, t, key):
                    # The copy that goes further keeps the session, whichever file a run reads last: a run
                    # stopped between the two, or one that re-reads only this file, then changes nothing.
                    report.count_session(t.session_id, "unchanged")
                    report.clashes.append((t.session_id, existing.source_path, t.source_path))
                    continue
                report.count_session(t.session_id, "updated")
                if rival is not None:
                    logger.info("session %s is in %s and in %s; keeping the latter", t.session_id, rival, key)
                    report.clashes.append((t.session_id, t.source_path, existing.source_path))
            # From here the text goes as UTF-8 (one byte a character where Python holds two once one character
            # is past Latin-1): the str is let go before SQLite and the full-text index take their copies.
            layout = index.content_layout(markdown)
            del markdown
            await store.put_session(
                conn, t, markdown=utf8, content_sha=content_sha, duration_min=session_duration_min(t)
            )
            session_id, kind, parent_id = t.session_id, t.kind.value, t.parent_id
            del t
            await index.index_content_utf8(
                conn, session_id=session_id, kind=kind, parent_id=parent_id, utf8=utf8, layout=layout
            )
            del utf8
            report.session_ids.append(session_id)
        await store.put_problems(conn, key, problems)
        await store.put_source(
            conn,
            store.SourceRow(key, size, mtime_ns, sha, tuple(kept), len(problems)),
        )
    logger.info("stored %s (%d sessions)", src.path, n_rendered)


def _another_file(other: Path, this: Path) -> str | None:
    """``other``'s resolved path (its key in `sources`), if it still exists and is not ``this`` file under
    another name."""
    try:
        return str(other.resolve()) if other.is_file() and not other.samefile(this) else None
    except OSError:
        return None


async def _rival(conn: aiosqlite.Connection, existing: store.SessionRow, t: Transcript, this: Path) -> str | None:
    """The other file whose copy of ``t``'s session is the stored one, if it still exists and still holds the
    session (as of its last read); its key in `sources`."""
    if existing.source_path == t.source_path:
        return None
    held = await asyncio.to_thread(_another_file, Path(existing.source_path), this)
    if held is None:
        return None
    row = await store.get_source(conn, held)
    return held if row is not None and t.session_id in row.session_ids else None


def _goes_further(stored: store.SessionRow, stored_key: str, t: Transcript, key: str) -> bool:
    """Whether the stored copy of a session goes further than ``t``, this file's: its last entry later, then
    more entries, then its path sorting last.

    The copy that goes further is kept. A live transcript beside a stale copy of it (a backup) keeps growing
    past it; the order makes the outcome the same whichever file a run reads last."""

    def reach(ended_at: str, entries: int, path: str) -> tuple[float, int, str]:
        return (store.handoff_ts(ended_at), entries, path)  # undated: 0

    return reach(stored.ended_at, stored.n_entries, stored_key) > reach(t.ended_at, t.entry_count, key)
