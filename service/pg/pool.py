"""A small pool of psycopg 3 async connections, without a background task.

psycopg_pool reconnects in the background with a growing back-off, so after a database restart requests
kept failing for many seconds. This one connects in the caller's own time: while the database is down a
request fails at once, and the first one after it is back connects and succeeds. At most ``max_size``
connections are lent at once; an idle one is kept for reuse, checked (one empty statement) before it is
lent again after a second of idleness, and a broken one, or one returned mid-transaction, is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg

from service.errors import ServiceError

__all__ = ["AConn", "Pool", "PoolBusy"]

AConn = psycopg.AsyncConnection[Any]
_CHECK_AFTER_S = 1.0  # a connection idle longer is checked before it is lent again


class PoolBusy(ServiceError):
    """Every connection stayed lent for as long as the caller could wait.

    Never reaches a client: :meth:`service.pg.link.PgLink.connection` answers it as DatabaseUnavailable."""


class Pool:
    """At most ``max_size`` connections, idle ones kept for reuse; a broken one is dropped, not lent again."""

    def __init__(self, conninfo: str, kwargs: dict[str, Any], max_size: int, wait_s: float) -> None:
        self.conninfo = conninfo
        self.kwargs = kwargs
        self.max_size = max_size
        self.wait_s = wait_s
        self._slots = asyncio.Semaphore(max_size)
        self._idle: list[tuple[AConn, float]] = []
        self.opened = 0  # connections made, for the benchmarks

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AConn]:
        try:
            async with asyncio.timeout(self.wait_s):
                await self._slots.acquire()
        except TimeoutError:
            raise PoolBusy(f"no free connection in {self.wait_s:g} s") from None
        conn: AConn | None = None
        try:
            conn = await self._get()
            yield conn
        finally:
            if conn is not None:
                await self._put(conn)
            self._slots.release()

    async def _get(self) -> AConn:
        while self._idle:
            conn, since = self._idle.pop()
            if conn.closed or conn.broken:
                continue
            if time.monotonic() - since > _CHECK_AFTER_S:
                try:
                    async with asyncio.timeout(5):
                        await conn.execute("")
                except (TimeoutError, psycopg.Error):
                    await self._drop(conn)
                    continue
            return conn
        conn = await psycopg.AsyncConnection.connect(self.conninfo, **self.kwargs)
        self.opened += 1
        return conn

    async def _put(self, conn: AConn) -> None:
        if conn.closed or conn.broken or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await self._drop(conn)  # mid-statement (a cancelled request), in a transaction, or dead
        else:
            self._idle.append((conn, time.monotonic()))

    @staticmethod
    async def _drop(conn: AConn) -> None:
        with contextlib.suppress(psycopg.Error, TimeoutError):
            async with asyncio.timeout(5):
                await conn.close()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await self._drop(conn)
