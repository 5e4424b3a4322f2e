"""SQL written once, run on either connection: aiosqlite (one thread hop a statement) or plain sqlite3.

Index and store maintenance is a sequence of statements whose later ones depend on earlier results. It is
written as a generator of :class:`Op` that receives each result (``rows = yield Op.rows(sql, args)``);
:func:`run_async` runs it on an ``aiosqlite.Connection`` inside ``Database.write()`` (ingest, one
session at a time), :func:`run_sync` on a ``sqlite3.Connection`` inside ``Database.write_sync()`` (bulk
import: a whole batch of handoffs is one thread hop instead of twenty hops a handoff). Both issue the
same statements in the same order, so both leave the same rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import aiosqlite

__all__ = ["Op", "Steps", "on_async", "run_async", "run_sync"]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_Kind = Literal["run", "many", "row", "rows", "rowid"]


@dataclass(frozen=True, slots=True)
class Op:
    """One statement and what the generator wants back: nothing, a row, all rows, or the new rowid."""

    kind: _Kind
    sql: str
    args: Any = ()

    @classmethod
    def run(cls, sql: str, args: Iterable[Any] = ()) -> Op:
        return cls("run", sql, tuple(args))

    @classmethod
    def many(cls, sql: str, rows: Iterable[Iterable[Any]]) -> Op:
        return cls("many", sql, [tuple(r) for r in rows])

    @classmethod
    def row(cls, sql: str, args: Iterable[Any] = ()) -> Op:
        return cls("row", sql, tuple(args))

    @classmethod
    def rows(cls, sql: str, args: Iterable[Any] = ()) -> Op:
        return cls("rows", sql, tuple(args))

    @classmethod
    def rowid(cls, sql: str, args: Iterable[Any] = ()) -> Op:
        return cls("rowid", sql, tuple(args))


# What a step generator yields, is sent, and returns. Sent: None, a row (or None), a list of rows, a rowid.
Steps = Generator[Op, Any, _T]


def run_sync(conn: sqlite3.Connection, steps: Steps[_T]) -> _T:
    """Run ``steps`` on a plain sqlite3 connection, in the caller's transaction."""
    result: Any = None
    while True:
        try:
            op = steps.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if op.kind == "many":
            conn.executemany(op.sql, op.args)
            result = None
            continue
        cur = conn.execute(op.sql, op.args)
        if op.kind == "row":
            result = cur.fetchone()
        elif op.kind == "rows":
            result = cur.fetchall()
        elif op.kind == "rowid":
            result = cur.lastrowid
        else:
            result = None
        cur.close()


async def run_async(conn: aiosqlite.Connection, steps: Steps[_T]) -> _T:
    """Run ``steps`` on an aiosqlite connection, in the caller's transaction."""
    result: Any = None
    while True:
        try:
            op = steps.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if op.kind == "many":
            await conn.executemany(op.sql, op.args)
            result = None
        elif op.kind == "run":
            await conn.execute(op.sql, op.args)
            result = None
        elif op.kind == "rowid":
            cur = await conn.execute(op.sql, op.args)
            result = cur.lastrowid
            await cur.close()
        else:
            async with conn.execute(op.sql, op.args) as cur:
                result = await (cur.fetchone() if op.kind == "row" else cur.fetchall())


def on_async(
    steps: Callable[_P, Steps[_T]], doc: str
) -> Callable[Concatenate[aiosqlite.Connection, _P], Coroutine[Any, Any, _T]]:
    """A step function as one call on an aiosqlite connection (:func:`run_async`), taking the same arguments
    after the connection: the ``x_steps`` function is then written once, not again as ``x``."""

    async def run(conn: aiosqlite.Connection, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await run_async(conn, steps(*args, **kwargs))

    run.__name__ = run.__qualname__ = steps.__name__.removesuffix("_steps")
    run.__doc__ = doc
    return run
