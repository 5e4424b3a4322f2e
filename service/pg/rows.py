"""Rows between a tenant's local copy and PostgreSQL: decoded and encoded (typed column arrays, text
PostgreSQL cannot hold made storable), the SQL that selects, clears and inserts groups of a mirror
(memory/replica/rows.py): what a copy reads to catch up and what a write section sends; and a whole copy built
from one snapshot of the database."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import sql

from memory import replica as replicate
from memory.replica import MIRRORS, Key, Mirror, Row
from memory.storage import SCHEMA_VERSION, Database
from service.pg import events
from service.pg.link import PgLink, Query, TenantTx, from_pg_text, to_pg_text

__all__ = [
    "BATCH_BYTES",
    "Built",
    "build_copy",
    "decode_rows",
    "encode_columns",
    "group_filter",
    "insert_statements",
    "push_rows",
    "read_queries",
    "remove_db",
    "run_batched",
    "select",
    "write_statements",
]

BATCH_BYTES = 8 << 20  # rows sent in one INSERT (and one pipeline), about
_PG_TYPE = {"text": "text", "int": "bigint", "real": "float8"}


def _texts(m: Mirror) -> list[int]:
    return [i for i, c in enumerate(m.columns) if c.kind == "text"]


def decode_rows(m: Mirror, rows: Iterable[tuple[Any, ...]]) -> list[Row]:
    """Rows as PostgreSQL returned them, as the replica stores them."""
    texts = _texts(m)
    out = []
    for r in rows:
        row = list(r)
        for i in texts:
            v = row[i]
            if v is not None and v[:1] == "\x01":
                row[i] = from_pg_text(v)
        out.append(tuple(row))
    return out


def _column(m: Mirror, i: int, values: tuple[Any, ...]) -> list[Any]:
    c = m.columns[i]
    kinds = {type(v) for v in values}
    if None.__class__ in kinds and not c.null:
        raise replicate.ReplicaStateError(f"{m.name}.{c.name} is NULL in the local copy")
    kinds.discard(None.__class__)
    if c.kind == "text":
        if kinds - {str}:
            raise replicate.ReplicaStateError(f"{m.name}.{c.name} holds a {kinds - {str}}, not text")
        return [v if v is None or ("\x00" not in v and not v.startswith("\x01")) else to_pg_text(v) for v in values]
    if c.kind == "int":
        if kinds - {int}:
            if kinds - {int, float} or any(type(v) is float and not v.is_integer() for v in values):
                raise replicate.ReplicaStateError(f"{m.name}.{c.name} holds a non-integer value")
            return [v if v is None else int(v) for v in values]
        return list(values)
    if kinds - {float}:
        if kinds - {int, float}:
            raise replicate.ReplicaStateError(f"{m.name}.{c.name} holds a non-number value")
        return [v if v is None else float(v) for v in values]
    return list(values)


def encode_columns(m: Mirror, rows: list[Row]) -> list[list[Any]]:
    """Rows of the replica as one list per column, typed for PostgreSQL arrays (a value of the wrong type is
    a ReplicaStateError naming the column)."""
    if not rows:
        return [[] for _ in m.columns]
    return [_column(m, i, values) for i, values in enumerate(zip(*rows, strict=True))]


def _insert_sql(m: Mirror) -> sql.Composed:
    # %b: the arrays go in binary, with no quoting of each value to work out
    casts = sql.SQL(", ").join(sql.SQL("%b::{}[]").format(sql.SQL(_PG_TYPE[c.kind])) for c in m.columns)
    names = sql.SQL(", ").join(sql.Identifier(n) for n in ("tenant_id", *m.names, "seq"))
    return sql.SQL("INSERT INTO macupos.{} ({}) SELECT %s, u.*, %s FROM unnest({}) AS u").format(
        sql.Identifier(m.name), names, casts
    )


def group_filter(m: Mirror, keys: list[Key]) -> tuple[sql.Composable, list[Any]]:
    """``(g1, g2) IN (…)`` of some groups, as SQL and its parameters."""
    if m.width == 1:
        c = next(c for c in m.columns if c.name == m.group[0])
        values = [to_pg_text(k[0]) if c.kind == "text" else k[0] for k in keys]
        return sql.SQL("{} = ANY(%b::{}[])").format(sql.Identifier(c.name), sql.SQL(_PG_TYPE[c.kind])), [values]
    cols = [c for c in m.columns if c.name in m.group]
    params: list[Any] = []
    for i, c in enumerate(cols):
        params.append([to_pg_text(k[i]) if c.kind == "text" else k[i] for k in keys])
    lhs = sql.SQL(", ").join(sql.Identifier(c.name) for c in cols)
    casts = sql.SQL(", ").join(sql.SQL("%b::{}[]").format(sql.SQL(_PG_TYPE[c.kind])) for c in cols)
    return sql.SQL("({}) IN (SELECT * FROM unnest({}))").format(lhs, casts), params


def select(m: Mirror, where: sql.Composable) -> sql.Composed:
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in m.names)
    return sql.SQL("SELECT {} FROM macupos.{} WHERE tenant_id = %s AND {}").format(cols, sql.Identifier(m.name), where)


_HEAVY = {"sessions", "handoffs", "content"}  # mirrors with whole texts in their rows


def insert_statements(tenant: str, m: Mirror, rows: list[Row], seq: int) -> list[tuple[Query, list[Any], int]]:
    """INSERTs of rows (their groups already cleared) stamped with ``seq``, a few megabytes each; with the
    size of each, about."""
    query = _insert_sql(m)
    out: list[tuple[Query, list[Any], int]] = []
    if m.name not in _HEAVY:
        per = 20_000
        for i in range(0, len(rows), per):
            part = rows[i : i + per]
            out.append((query, [tenant, seq, *encode_columns(m, part)], len(part) * 40))
        return out
    start, size = 0, 0
    for i, row in enumerate(rows):
        size += sum(len(v) if type(v) is str else 8 for v in row)
        if size >= BATCH_BYTES or i + 1 == len(rows):
            out.append((query, [tenant, seq, *encode_columns(m, rows[start : i + 1])], size))
            start, size = i + 1, 0
    return out


def read_queries(
    tenant: str, upto: int, cursor: int, events_cursor: int, pending: Mapping[str, set[Key]]
) -> tuple[list[tuple[Query, list[Any]]], list[tuple[Mirror, list[Key]]]]:
    """What a copy at ``cursor`` (its events at ``events_cursor``) reads to reach ``upto``, in this order: each
    mirror's rows written since, the groups deleted since, the facts events since; then the rows of the groups
    in ``pending`` (a failed write's, to put back), with those groups, query by query."""
    queries: list[tuple[Query, list[Any]]] = []
    if cursor < upto:
        queries += [(select(m, sql.SQL("seq > %s")), [tenant, cursor]) for m in MIRRORS]
        deleted = "SELECT mirror, key FROM macupos.deletions WHERE tenant_id = %s AND seq > %s"
        queries.append((deleted, [tenant, cursor]))
    if events_cursor < upto:
        queries.append(
            (
                "SELECT origin, line FROM macupos.facts_events WHERE tenant_id = %s AND seq > %s AND seq <= %s"
                " ORDER BY seq, at_ms, id",
                [tenant, events_cursor, upto],
            )
        )
    back: list[tuple[Mirror, list[Key]]] = []
    for m in MIRRORS:
        keys = sorted(pending.get(m.name, set()), key=repr)
        for i in range(0, len(keys), 500):
            where, params = group_filter(m, keys[i : i + 500])
            queries.append((select(m, where), [tenant, *params]))
            back.append((m, keys[i : i + 500]))
    return queries, back


def write_statements(
    tenant: str, seq: int, changes: Mapping[str, tuple[set[Key], list[Row]]], event_lines: Sequence[events.EventLine]
) -> list[tuple[Query, list[Any], int]]:
    """What makes the database's groups the copy's, stamped with ``seq``: each changed group cleared and its rows
    inserted, a group that went recorded in ``deletions``, and the copy's new facts events; with the size of
    each, about."""
    statements: list[tuple[Query, list[Any], int]] = []
    for name, (keys, rows) in changes.items():
        m = replicate.mirror(name)
        ordered = sorted(keys, key=repr)
        for i in range(0, len(ordered), 500):
            where, params = group_filter(m, ordered[i : i + 500])
            delete = sql.SQL("DELETE FROM macupos.{} WHERE tenant_id = %s AND {}").format(sql.Identifier(name), where)
            statements.append((delete, [tenant, *params], 500 * 40))
        statements += insert_statements(tenant, m, rows, seq)
        gone = keys - {replicate.group_of(m, r) for r in rows}
        if gone:
            statements.append(
                (
                    "INSERT INTO macupos.deletions(tenant_id, mirror, key, seq)"
                    " SELECT %s, %s, unnest(%b::text[]), %s"
                    " ON CONFLICT (tenant_id, mirror, key) DO UPDATE SET seq = excluded.seq",
                    [tenant, name, [to_pg_text(json.dumps(list(k))) for k in sorted(gone, key=repr)], seq],
                    len(gone) * 40,
                )
            )
    if event_lines:
        ids, at, origins, lines = (list(x) for x in zip(*event_lines, strict=True))
        statements.append(
            (
                "INSERT INTO macupos.facts_events(tenant_id, id, at_ms, origin, line, seq)"
                " SELECT %s, u.*, %s FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[]) AS u"
                " ON CONFLICT (tenant_id, id) DO NOTHING",
                [tenant, seq, ids, at, origins, [to_pg_text(x) for x in lines]],
                sum(len(x) for x in lines),
            )
        )
    return statements


async def run_batched(tx: TenantTx, statements: Iterable[tuple[Query, list[Any], int]]) -> None:
    """``statements`` in pipelines of about :data:`BATCH_BYTES` each: a pipeline holds its parameters in memory."""
    size = 0
    batch: list[tuple[Query, list[Any]]] = []
    for query, params, weight in statements:
        batch.append((query, params))
        size += weight
        if size >= BATCH_BYTES:
            await tx.many(batch)
            batch, size = [], 0
    await tx.many(batch)


async def push_rows(tx: TenantTx, m: Mirror, rows: list[Row], seq: int) -> None:
    """Insert rows (their groups already cleared) stamped with ``seq``."""
    for query, params, _ in insert_statements(tx.tenant, m, rows, seq):
        await tx.run(query, params)


# --- one copy, built whole --------------------------------------------------------------------------------


@dataclass(slots=True)
class Built:
    seq: int
    generation: str
    rows: dict[str, int] = field(default_factory=dict)


def remove_db(path: Path) -> None:
    Database.check_closed(path, "delete it")
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)


async def build_copy(link: PgLink, tenant: str, db_path: Path, events_dir: Path) -> Built:
    """Write the tenant's whole memory, as one snapshot, into a new memory database at ``db_path`` (with the
    capture triggers) and its facts events into ``events_dir``."""
    remove_db(db_path)
    db = await Database.open(db_path)  # the memory schema, migrated
    await db.close()
    conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous = OFF")  # a copy being built is thrown away if anything stops it
        conn.execute("BEGIN IMMEDIATE")
        async with link.tenant_read(tenant) as tx:
            built = Built(tx.seq, tx.generation)
            for m in MIRRORS:
                n = 0
                order = sql.SQL(" ORDER BY row, id") if m.name == "chunks" else sql.SQL("")
                query = select(m, sql.SQL("true")) + order
                async for batch in tx.stream(query, [tenant]):
                    rows = decode_rows(m, batch)
                    await asyncio.to_thread(replicate.load_rows, conn, m.name, rows)
                    n += len(rows)
                built.rows[m.name] = n
            lines: dict[str, list[str]] = {}
            wanted = "SELECT origin, line FROM macupos.facts_events WHERE tenant_id = %s ORDER BY seq, at_ms, id"
            async for batch in tx.stream(wanted, [tenant]):
                for origin, line in batch:
                    lines.setdefault(str(origin), []).append(from_pg_text(str(line)))
        built.rows["facts_events"] = sum(len(v) for v in lines.values())

        def finish() -> None:
            replicate.rebuild_chunk_fts(conn)
            replicate.optimize_fts(conn)
            replicate.install_capture(conn)
            replicate.set_state(
                conn,
                database_id=link.database_id,
                tenant=tenant,
                generation=built.generation,
                cursor=built.seq,
                events_cursor=built.seq,
                events_offset=0,
                schema=SCHEMA_VERSION,
            )
            conn.execute("COMMIT")

        await asyncio.to_thread(finish)
        await asyncio.to_thread(events.append_lines, events_dir, lines)
        return built
    finally:
        conn.close()
