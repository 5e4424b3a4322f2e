"""One :class:`~memory.storage.database.Database` per file per process, usable from any thread's event loop.

Why: on Linux, closing *any* descriptor of a file drops *every* POSIX lock the process holds on it
(SQLite's "How To Corrupt An SQLite Database File", §2.2). SQLite's own connections know this and share
one lock table per file inside the process; anything else that opens and closes the file (a second
library, Python's ``open()`` to peek at the header, a copy) silently drops SQLite's shared lock, and the
next process that closes its last connection checkpoints and deletes the live ``-wal``/``-shm``: writes
that were acknowledged are gone. So every opener in the process (the memory core, the facts store, an
upload's ingest on its worker thread) gets the same ``Database`` through :class:`Registry`, and only
SQLite ever opens the file.

A shared ``Database`` is used from more than one event loop (an upload is ingested on a worker thread with
a loop of its own, so its CPU work never stalls the server's), so its write lock is :class:`LoopLock`, an
asyncio-style lock whose waiters may sit on different loops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

from memory.errors import MemoryStoreError

__all__ = ["DatabaseInUseError", "LoopLock", "Registry", "file_key"]

_D = TypeVar("_D")


class DatabaseInUseError(MemoryStoreError):
    """A file operation (move aside, replace, delete) on a database this process still has open."""

    def __init__(self, path: Path, doing: str) -> None:
        super().__init__(f"{path} is open in this process: close it before you {doing}")
        self.path = path
        self.doing = doing


def file_key(path: Path) -> str:
    """The name a database is shared under: its real path (symlinks resolved; the file need not exist)."""
    return os.path.realpath(path)


class LoopLock:
    """A mutual-exclusion lock for coroutines on any number of event loops (threads).

    ``asyncio.Lock`` binds itself to one loop; this one keeps its state under a thread lock and wakes a
    waiter on the waiter's own loop. Ownership passes straight to the next waiter on release, so no
    newcomer can overtake it (first come, first served, as asyncio's lock). The owner is recorded under the
    thread lock: a waiter handed the lock but cancelled before it woke passes it on itself, so a hand-over
    whose wake-up never runs (its loop closed meanwhile) cannot keep the lock forever.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locked = False
        self._owner: asyncio.Future[None] | None = None  # the waiter handed the lock, until it wakes
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._locked

    async def acquire(self) -> None:
        with self._mutex:
            if not self._locked:
                self._locked = True
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            with self._mutex:
                if waiter in self._waiters:  # never handed the lock: just leave the queue
                    self._waiters.remove(waiter)
                    raise
                handed = self._owner is waiter
            if handed:  # it was this waiter's (woken or not): to the next one
                self._pass_on(waiter)
            raise
        with self._mutex:
            if self._owner is waiter:
                self._owner = None

    def release(self) -> None:
        self._pass_on(None)

    def _pass_on(self, holder: asyncio.Future[None] | None) -> None:
        """Hand the lock to the next waiter whose loop still runs, or free it. ``holder``: a waiter giving up
        a lock it was handed (nothing happens when it no longer has it)."""
        with self._mutex:
            if holder is not None and self._owner is not holder:
                return
            if not self._locked:
                raise RuntimeError("LoopLock released while not held")
            while self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.get_loop().call_soon_threadsafe(self._hand_over, waiter)
                except RuntimeError:  # its loop is closed: it will never wake
                    continue
                self._owner = waiter  # stays locked: it now belongs to this waiter
                return
            self._locked = False
            self._owner = None

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        with self._mutex:
            mine = self._owner is waiter
        if not mine:
            return  # cancelled meanwhile, and it passed the lock on itself
        if waiter.cancelled():
            self._pass_on(waiter)
        else:
            waiter.set_result(None)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class Registry(Generic[_D]):
    """The databases open in this process, by :func:`file_key`, each with how many holders it has.

    :meth:`acquire` opens a file once and hands every later caller the same object until the last holder
    :meth:`release`\\ s it; a caller that comes while the file is being opened (on any loop) waits for that
    open, and one that comes while it is being closed waits for the close, so two never coexist.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[_D, int]] = {}
        self._busy: dict[str, concurrent.futures.Future[None]] = {}  # being opened or closed

    def is_open(self, path: Path) -> bool:
        key = file_key(path)
        with self._lock:
            return key in self._open or key in self._busy

    def check_closed(self, path: Path, doing: str) -> None:
        """Raise :class:`DatabaseInUseError` when ``path`` is open here (before moving or deleting it)."""
        if self.is_open(path):
            raise DatabaseInUseError(path, doing)

    async def acquire(self, path: Path, opener: Callable[[], Awaitable[_D]], same: Callable[[_D], None]) -> _D:
        """The open database of ``path`` (``same`` checks it suits this caller), opened by ``opener`` if none."""
        key = file_key(path)
        while True:
            with self._lock:
                held = self._open.get(key)
                if held is not None:
                    same(held[0])
                    self._open[key] = (held[0], held[1] + 1)
                    return held[0]
                busy = self._busy.get(key)
                if busy is None:
                    mine: concurrent.futures.Future[None] = concurrent.futures.Future()
                    self._busy[key] = mine
                    break
            # Shielded: wrap_future passes a cancel on to the shared future, which every other waiter shares.
            await asyncio.shield(asyncio.wrap_future(busy))
        try:
            db = await opener()
        except BaseException:
            self._settle(key, mine)
            raise
        with self._lock:
            self._open[key] = (db, 1)
        self._settle(key, mine)
        return db

    async def release(self, path: Path, db: _D, closer: Callable[[], Awaitable[None]]) -> None:
        """Drop one hold on ``db``; the last one runs ``closer``."""
        key = file_key(path)
        with self._lock:
            held = self._open.get(key)
            if held is None or held[0] is not db:
                return  # every holder closed it already: nothing left to drop
            if held[1] > 1:
                self._open[key] = (db, held[1] - 1)
                return
            del self._open[key]
            mine: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._busy[key] = mine
        closing = asyncio.ensure_future(closer())
        try:
            await asyncio.shield(closing)  # a cancelled caller must not leave the file half closed
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await closing
            raise
        finally:
            self._settle(key, mine)

    def _settle(self, key: str, mine: concurrent.futures.Future[None]) -> None:
        with self._lock:
            if self._busy.get(key) is mine:
                del self._busy[key]
        if not mine.done():
            mine.set_result(None)
