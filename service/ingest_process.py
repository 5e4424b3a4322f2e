"""A big upload's ingest runs in a process of its own, so it never stalls the server or stays in its memory.

Parsing, rendering, indexing and extracting a 45 MB transcript is tens of seconds of CPU and a few hundred
MB. On a thread of the server, every other tenant's request waited for the GIL behind it (a neighbour's
`/v1/get` stalled up to 2.7 s) and what it allocated stayed in the server's heap after it ended. In a child
process it competes only for a core, and all its memory goes back when it exits.

The child gets its job (the tenant's memory settings, the spooled file, whether to use the LLM) pickled on
stdin and answers the ingest's report, or the error it met, pickled on stdout; both are this program's own
objects, between a parent and the child it started. One child is kept started and idle (its imports done,
a quarter of a second), so an upload does not wait for Python to start; each child does one ingest and
exits. The tenant's database is opened by the child like any other process's: SQLite shares it. A small
upload (under ``Limits.ingest_in_process_bytes``, 4 MB) is ingested on a thread of the server instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import pickle
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory import DatabaseLockedError, IngestReport, MemorySettings, MemoryStoreError, SourceUnreadableError

__all__ = ["IngestProcesses", "main"]

logger = logging.getLogger(__name__)

_CHILD = (sys.executable, "-m", "service.ingest_process")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_LOG_FORMAT = "%(levelno)d\t%(name)s\t%(message)s"  # a child's log line, logged again by the server
_LOG_LINE = re.compile(r"(\d+)\t([\w.]+)\t(.*)")


class IngestProcesses:
    """Starts the ingest children, one kept ready. Made in the app's lifespan, closed at its end."""

    def __init__(self, in_process_bytes: int) -> None:
        self.in_process_bytes = in_process_bytes
        self._spare: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Have the first spare started (on the running loop)."""
        self._refill()

    async def ingest(self, settings: MemorySettings, path: Path, use_llm: bool) -> IngestReport:
        """Ingest ``path`` into the memory of ``settings``; its report, or its error raised here. A file under
        ``in_process_bytes`` (``Limits.ingest_in_process_bytes``) is ingested on a thread of the server (its
        share of the GIL is as short as the file; the thread shares the server's database of the tenant), a
        larger one in a child.

        A cancelled caller does not stop the ingest: it ends (or fails) on its own, as a killed server's
        would be taken up again by the next upload of the same file."""
        try:
            small = path.stat().st_size < self.in_process_bytes
        except OSError:
            small = True  # the ingest says what is wrong with the file
        if small:
            return await asyncio.to_thread(asyncio.run, _ingest(settings, path, use_llm, trim=False))
        proc = await self._take()
        job = pickle.dumps((settings, path, use_llm, logging.getLogger().getEffectiveLevel()))
        try:
            out, err = await asyncio.shield(proc.communicate(job))
        finally:
            self._refill()  # after the ingest: its peak and a new spare's start never add up
        _relog(err)
        try:
            kind, value = pickle.loads(out) if out else ("crashed", "")
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError):
            kind, value = "crashed", ""
        if kind == "ok" and isinstance(value, IngestReport):
            return value
        if kind == "error":
            raise _error(value)
        logger.error("the ingest of %s ended with status %s", path, proc.returncode)
        raise MemoryStoreError(f"the ingest process ended with status {proc.returncode}")

    async def _take(self) -> asyncio.subprocess.Process:
        proc, self._spare = self._spare, None
        if proc is None or proc.returncode is not None:
            proc = await _start()
        return proc

    def _refill(self) -> None:
        if not self._closed and self._spare is None and (self._starting is None or self._starting.done()):
            self._starting = asyncio.ensure_future(self._make_spare())

    async def _make_spare(self) -> None:
        try:
            proc = await _start()
        except OSError as exc:  # the next upload starts its own (and says why, if it cannot either)
            logger.warning("could not start a spare ingest process: %s", exc)
            return
        if self._closed:
            await _stop(proc)
        else:
            self._spare = proc

    async def close(self) -> None:
        self._closed = True
        if self._starting is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._starting
        if self._spare is not None:
            await _stop(self._spare)
            self._spare = None


async def _start() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *_CHILD,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """An idle spare: closing its stdin ends it (it reads no job); killed if it does not go within 10 s."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()


def _relog(err: bytes) -> None:
    """The child's log lines, through the server's own logging (its level, its key mask); a line that is
    not one (a traceback's) goes with the line before it."""
    level, name = logging.WARNING, __name__
    for line in err.decode(errors="replace").splitlines():
        found = _LOG_LINE.fullmatch(line)
        if found:
            level, name, line = int(found.group(1)), found.group(2), found.group(3)
        logging.getLogger(name).log(level, "%s", line)


def _error(value: Any) -> MemoryStoreError:
    """The child's error, as the routes know it (the kinds they answer apart), or a plain memory error."""
    kind, fields = value if isinstance(value, tuple) and len(value) == 2 else ("", {"message": str(value)})
    if kind == "unreadable":
        return SourceUnreadableError(Path(fields["path"]), fields["reason"])
    if kind == "locked":
        return DatabaseLockedError(Path(fields["path"]), float(fields["waited_s"]))
    return MemoryStoreError(str(fields.get("message", "the ingest failed")))


def _as_fields(exc: MemoryStoreError) -> tuple[str, dict[str, Any]]:
    if isinstance(exc, SourceUnreadableError):
        return "unreadable", {"path": str(exc.path), "reason": exc.reason}
    if isinstance(exc, DatabaseLockedError):
        return "locked", {"path": str(exc.path), "waited_s": exc.waited_s}
    return type(exc).__name__, {"message": str(exc)}


def main() -> int:
    """The child: read one job, ingest it, write the answer. Nothing else reaches stdout."""
    answer_fd = os.dup(1)  # the answer's own descriptor: a stray print (fd 1) goes to stderr, not into it
    os.dup2(2, 1)
    job = sys.stdin.buffer.read()
    if not job:
        return 0  # a spare let go
    settings, path, use_llm, level = pickle.loads(job)  # the parent's own objects, from the pipe it opened
    logging.basicConfig(level=level, stream=sys.stderr, format=_LOG_FORMAT)
    answer: tuple[str, Any]
    try:
        answer = ("ok", asyncio.run(_ingest(settings, path, use_llm)))
    except MemoryStoreError as exc:
        answer = ("error", _as_fields(exc))
    with os.fdopen(answer_fd, "wb") as out:
        out.write(pickle.dumps(answer))
    return 0


async def _ingest(settings: MemorySettings, path: Path, use_llm: bool, *, trim: bool = True) -> IngestReport:
    from memory import Eywa

    eywa = await Eywa.open(settings)
    try:
        report = await eywa.ingest([path], use_llm=use_llm, extract=False)
        if trim:  # what storing and indexing freed goes back before extraction parses the file again
            _give_back_freed_memory()
        await eywa.extract_pending(report, use_llm=use_llm)
        return report
    finally:
        await eywa.close()


def _glibc(symbol: str) -> Callable[..., int] | None:
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    fn: Callable[..., int] | None = getattr(ctypes.CDLL(name), symbol, None) if name else None
    return fn


def _tune_malloc() -> None:
    """In the child, glibc maps (and unmaps) every block from 128 KiB up on its own and trims the heap's free
    top past 128 KiB, so what one stage of an ingest frees is not held through the next."""
    mallopt = _glibc("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 128 << 10)
        mallopt(_M_TRIM_THRESHOLD, 128 << 10)


def _give_back_freed_memory() -> None:
    """glibc keeps the heap a big ingest freed; hand it back (elsewhere, nothing to do)."""
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)


if __name__ == "__main__":
    _tune_malloc()
    from memory import Eywa as _warm  # noqa: F401 - imported while the child waits for its job

    sys.exit(main())
