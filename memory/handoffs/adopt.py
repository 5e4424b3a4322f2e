"""`memory import`: adopt a tree of handoff files in batches, each file bounded and judged on its own.

Reading (memory.handoffs.files): the tree is walked without following links, each file bounded, regular and
UTF-8, and it must be a handoff that :func:`memory.handoffs.format.from_markdown` reads with its strict YAML
loader. A file that fails any of this is reported with the reason and skipped; what one file holds never stops
the import.

Writing. Files are adopted :data:`BATCH_FILES` at a time: one write transaction a batch, run on a plain
sqlite3 connection in a worker thread (``Database.write_sync``), so a batch is one thread hop instead of
twenty hops a handoff; mirror files are written without an fsync each and the batch is made durable at
once (:func:`memory.storage.mirror.sync_folders`: one ``syncfs``) before the commit. A batch of one file is the
way import worked before: a transaction a file, the file and its folder fsynced. Both run the same
statements (:mod:`memory.storage.sqlsteps`), so they store the same rows. Reading can run in a worker process,
a batch ahead of writing (``workers``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path

from memory.errors import DestinationError, HandoffFormatError, SourceUnreadableError
from memory.grounding import strip_frontmatter
from memory.handoffs.files import read_handoff_file, walk_tree
from memory.handoffs.format import from_markdown, normalized
from memory.index import postings as index
from memory.models import Handoff, SessionKind
from memory.redact.redactor import Redactor
from memory.storage import rows as store
from memory.storage.database import Database
from memory.storage.mirror import sync_folders, write_handoff
from memory.storage.sqlsteps import Op, Steps, run_sync

__all__ = [
    "BATCH_FILES",
    "WORKERS",
    "ImportReport",
    "import_tree",
]

# A batch of 256 is a fraction of a second of one write transaction: long enough to amortise the commit
# and the mirror's sync, short enough that a hook or the bot waiting for the write lock hardly notices.
BATCH_FILES = 256
# When writing falls behind, up to this many batches the worker has already read share one transaction.
# Each commit writes every index page its transaction dirtied, and postings_session (keyed by random
# session ids) is dirtied nearly a page a posting: at 100,000 handoffs 1,024 files a commit wrote 11.5 GB
# for a 580 MB database, 4,096 files 5.3 GB (docs/benchmarks.md). 4,096 files hold the write lock for
# 1-2 s there, far inside the 30 s other writers wait.
MERGE_BATCHES = 16
# Worker processes `macupos memory import` starts to read and render batches while it writes: one keeps
# two cores busy, and writing (one SQLite connection) is the half that cannot be split.
WORKERS = 1 if (os.cpu_count() or 1) > 1 else 0
# Sources a handoff file keeps; any other becomes "import".
_KEPT_SOURCES = frozenset({"llm", "fallback", "correction"})
logger = logging.getLogger(__name__)
_PARENT_POLL_S = 0.5


@dataclass(slots=True)
class ImportReport:
    imported: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Ready:
    seq: int  # the file's place in the walk: reports keep file order
    path: Path
    handoff: Handoff
    markdown: str
    terms: frozenset[tuple[int, str]]  # what the handoff is posted under, worked out by the reader


def _prepare(seq: int, path: Path, redactor: Redactor) -> _Ready:
    h = from_markdown(read_handoff_file(path), path=path)
    if h.source not in _KEPT_SOURCES:
        h = replace(h, source="import")
    h, markdown = normalized(h, redactor, path=path)
    return _Ready(seq, path, h, markdown, frozenset(index.handoff_terms(h.projects, h.keywords)))


@dataclass(slots=True)
class _Batch:
    ready: list[_Ready] = field(default_factory=list)
    rejected: list[tuple[int, str, str]] = field(default_factory=list)  # (seq, path, why)

    def take(self, later: _Batch) -> None:
        """Append the next batch (in walk order): both are written in one transaction."""
        self.ready.extend(later.ready)
        self.rejected.extend(later.rejected)


def _read_already(done: asyncio.Future[_Batch]) -> bool:
    return done.done() and not done.cancelled() and done.exception() is None


_FORGOTTEN = object()


def _store_steps(item: _Ready) -> Steps[object]:
    """One handoff's row and postings; returns (its previous date or None, whether it needs its text
    indexed), or _FORGOTTEN."""
    h = item.handoff
    # Whether it was forgotten, its stored date, whether a transcript holds it: one statement, not three.
    forgotten, old_date, has_transcript = yield Op.row(
        "SELECT EXISTS(SELECT 1 FROM forgotten WHERE session_id = ?1),"
        " (SELECT date FROM handoffs WHERE session_id = ?1),"
        " EXISTS(SELECT 1 FROM sessions WHERE session_id = ?1)",
        (h.session_id,),
    )
    if forgotten:
        return _FORGOTTEN
    ts = yield from store.put_handoff_steps(h, markdown=item.markdown, review="kept")
    yield from index.index_handoff_steps(
        session_id=h.session_id,
        ts=ts,
        projects=h.projects,
        keywords=h.keywords,
        substance=h.substance,
        kind=h.kind.value,
        duration_min=h.duration_min,
        terms=item.terms,
    )
    # A handoff-only session: its own text is all there is to recall its details by.
    return (None if old_date is None else str(old_date)), not has_transcript


# Per distinct session of a batch: forgotten?, its stored date, whether a transcript holds it, whether
# anything of it is indexed. One statement for the batch instead of one a handoff.
_CLASSIFY = (
    "SELECT j.value,"
    " EXISTS(SELECT 1 FROM forgotten WHERE session_id = j.value),"
    " (SELECT date FROM handoffs WHERE session_id = j.value),"
    " EXISTS(SELECT 1 FROM sessions WHERE session_id = j.value),"
    " EXISTS(SELECT 1 FROM postings WHERE session_id = j.value)"
    " OR EXISTS(SELECT 1 FROM content_rows WHERE session_id = j.value)"
    " FROM json_each(?) AS j"
)


def _new_ids(conn: sqlite3.Connection, batch: list[_Ready]) -> set[str]:
    """The sessions of ``batch`` that are new: once in the batch, no row, postings, text or transcript
    anywhere, not forgotten. Their rows go in a statement a table (what a first import mostly is)."""
    counts: dict[str, int] = {}
    for item in batch:
        counts[item.handoff.session_id] = counts.get(item.handoff.session_id, 0) + 1
    once = [sid for sid, n in counts.items() if n == 1]
    rows = conn.execute(_CLASSIFY, (json.dumps(once),)).fetchall()
    return {str(row[0]) for row in rows if row[2] is None and not any((row[1], row[3], row[4]))}


def _adopt(
    conn: sqlite3.Connection, *, batch: list[_Ready], mirror: Path, sync_each: bool
) -> tuple[int, list[tuple[int, str, str]]]:
    """Inside one write transaction: each handoff's rows and mirror file, one sync of the mirror, then
    the texts of the handoff-only sessions.

    New sessions (:func:`_new_ids`) are stored a statement a table for the batch; the others one at a time
    (a file that replaces a stored handoff, one forgotten, one a transcript holds). Either way the rows are
    the same: each table's rows are keyed by session, sums and maxima do not depend on order, and the texts
    follow in file order.

    The texts go last. SQLite keeps FTS5's new entries in memory until the transaction ends, unless a
    statement that may change several rows (``UPDATE chunks``, ``INSERT OR REPLACE``) starts in between:
    that flushes them as a new segment on disk. Interleaved, each handoff's text was its own segment (half
    the batch's time); grouped, the batch's texts are one. The rows come out the same: content rowids and
    window ids follow the order of the text operations alone, and a window's date is its credited
    handoff's posting, which ``index_handoff`` keeps in step either way.
    """
    imported = 0
    rejected: list[tuple[int, str, str]] = []
    folders: set[Path] = set()
    texts: list[tuple[_Ready, bool]] = []  # (item, whether it is new: no text of it to take out first)
    new = _new_ids(conn, batch) if len(batch) > 1 else set()
    fresh_rows: list[tuple[object, ...]] = []
    fresh_posts: list[tuple[str, float, float, frozenset[tuple[int, str]]]] = []
    for item in batch:
        h = item.handoff
        is_new = h.session_id in new
        old_date: str | None = None
        if is_new:
            posted = h.kind.value in index.INDEXED_KINDS and h.substance >= 1
            row = store.handoff_row(h, markdown=item.markdown, review="kept", indexed=posted)
            fresh_rows.append(row)
            if posted:
                fresh_posts.append((h.session_id, float(row[3]), h.duration_min, item.terms))
            needs_text = True
        else:
            outcome = run_sync(conn, _store_steps(item))
            if not isinstance(outcome, tuple):
                why = f"{h.session_id} was forgotten (macupos memory forget)"
                rejected.append((item.seq, str(item.path), why))
                continue
            old_date, needs_text = outcome
        try:
            written = write_handoff(mirror, h.session_id, h.date, item.markdown, old_date=old_date, sync=sync_each)
        except OSError as exc:  # the mirror's disk, not this file: stop, the batch rolls back
            raise DestinationError(mirror, exc.strerror or str(exc)) from exc
        folders.update(written)
        if needs_text:
            texts.append((item, is_new))
        imported += 1
    if fresh_rows:
        conn.executemany(store.PUT_HANDOFF_SQL, fresh_rows)
        run_sync(conn, index.index_new_handoffs_steps(fresh_posts))
    if not sync_each:
        sync_folders(mirror, folders)
    posted_at = {sid: (ts, max(0.0, dur)) for sid, ts, dur, _ in fresh_posts}
    run: list[tuple[str, str, str, str, tuple[float, float] | None]] = []  # new texts in a row, credited to themselves
    for item, is_new in texts:
        h = item.handoff
        body = strip_frontmatter(item.markdown)
        if is_new and not (h.kind is SessionKind.SUBAGENT and h.parent_id):
            run.append((h.session_id, h.kind.value, h.parent_id, body, posted_at.get(h.session_id)))
            continue
        run_sync(conn, index.index_new_contents_steps(run))
        run = []
        steps = index.index_content_steps(
            session_id=h.session_id, kind=h.kind.value, parent_id=h.parent_id, body=body, new=is_new
        )
        run_sync(conn, steps)
    run_sync(conn, index.index_new_contents_steps(run))
    return imported, rejected


_Entry = tuple[int, Path, "str | None"]  # (place in the walk, path, why it is skipped or None)


def _prepare_batch(entries: list[_Entry], redactor: Redactor) -> _Batch:
    """Read, check, redact and render a batch of files (in a worker process when there is one)."""
    batch = _Batch()
    for seq, path, why in entries:
        if why is not None:
            batch.rejected.append((seq, str(path), str(SourceUnreadableError(path, why))))
            continue
        try:
            batch.ready.append(_prepare(seq, path, redactor))
        except (SourceUnreadableError, HandoffFormatError) as exc:
            batch.rejected.append((seq, str(path), str(exc)))
    return batch


def _exit_with_parent(parent: int) -> None:
    """A worker's initializer: exit once the import that started it is gone. A worker holds both ends of its
    own call queue's pipe, so after a SIGKILLed import it would wait forever (holding the import's stderr)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _chunks(root: Path, size: int) -> Iterator[list[_Entry]]:
    walk = ((seq, path, why) for seq, (path, why) in enumerate(walk_tree(root)))
    while chunk := list(islice(walk, size)):
        yield chunk


async def import_tree(
    db: Database,
    root: Path,
    *,
    mirror: Path,
    redactor: Redactor,
    batch_files: int = BATCH_FILES,
    workers: int = 0,
) -> ImportReport:
    """Adopt every handoff file under ``root`` (this format or eywa-mcp's); a file wins over the stored row.

    ``batch_files`` handoffs share a transaction; with 1, each is committed and fsynced on its own. With
    ``workers`` (and more than one batch), worker processes read and render the next batches while this
    one is written, so on two cores the two halves of the work overlap. They are started with "spawn",
    which imports the main module again: ``macupos memory import`` passes :data:`WORKERS`; a library
    caller (a script without an ``if __name__ == "__main__"`` guard) keeps the default, none.
    """
    if not root.is_dir():
        raise SourceUnreadableError(root, "not a folder")
    report = ImportReport()
    size = max(1, batch_files)
    chunks = _chunks(root, size)
    ahead: deque[tuple[list[_Entry], asyncio.Future[_Batch]]] = deque()
    pool: ProcessPoolExecutor | None = None

    def here(chunk: list[_Entry]) -> asyncio.Future[_Batch]:
        return asyncio.ensure_future(asyncio.to_thread(_prepare_batch, chunk, redactor))

    def queue(chunk: list[_Entry] | None) -> None:
        if chunk is not None:
            done = here(chunk) if pool is None else asyncio.wrap_future(pool.submit(_prepare_batch, chunk, redactor))
            ahead.append((chunk, done))

    try:
        queue(next(chunks, None))  # in a thread, while a worker process starts
        if ahead and workers > 0 and (second := next(chunks, None)) is not None:
            pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with_parent,
                initargs=(os.getpid(),),
            )
            queue(second)
        while ahead:
            chunk, done = ahead.popleft()
            try:
                batch = await done
            except BrokenProcessPool:  # the worker died (or could not start): carry on in this process
                logger.warning("import: the worker process stopped; reading the rest in this process")
                if pool is not None:
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = None
                batch = await here(chunk)
                ahead = deque((c, here(c)) for c, _ in ahead)
            if pool is not None and size > 1:  # writing is behind: what is read already shares the transaction
                while ahead and len(batch.ready) < size * MERGE_BATCHES and _read_already(ahead[0][1]):
                    batch.take(ahead.popleft()[1].result())
            # The worker reads up to MERGE_BATCHES ahead (the thread, one): it never waits for the writer.
            for _ in range((MERGE_BATCHES if pool is not None else 1) - len(ahead)):
                queue(next(chunks, None))
            if batch.ready:
                adopt = functools.partial(_adopt, batch=batch.ready, mirror=mirror, sync_each=size == 1)
                n, forgotten = await db.write_sync(adopt)
                report.imported += n
                batch.rejected.extend(forgotten)
            report.rejected.extend((path, why) for _, path, why in sorted(batch.rejected))
        if pool is not None:  # idle by now: let it exit, so no process outlives the import
            await asyncio.to_thread(pool.shutdown, wait=True)
            pool = None
    finally:
        for _, pending in ahead:
            pending.cancel()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return report
