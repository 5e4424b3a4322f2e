"""Catching every change to a replica's rows: triggers note the group of each row any connection changes (the
aiosqlite connection, a bulk import's thread, the facts engine's own connection) in ``_replica_changes``, in the
same transaction as the change; ``_replica_state`` keeps the replica's cursors. Synchronous, on a plain
``sqlite3`` connection, inside the caller's transaction."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict

from memory.replica.rows import MIRRORS, Key

__all__ = ["clear_changes", "drop_capture", "get_state", "install_capture", "pending_changes", "set_state"]

_STATE_DDL = (
    "CREATE TABLE IF NOT EXISTS _replica_changes(mirror TEXT NOT NULL, key TEXT NOT NULL,"
    " PRIMARY KEY(mirror, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _replica_state(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID",
)


def _triggers() -> dict[str, str]:
    by_table: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for m in MIRRORS:
        for table, cols in m.sources.items():
            by_table[table].append((m.name, cols))
    out = {}
    for table, feeds in sorted(by_table.items()):
        for event, refs in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            # Not INSERT OR IGNORE: a statement's own conflict clause (an upsert, OR REPLACE) overrides the
            # ones in the triggers it fires, so a second note of a group would abort the write.
            notes = " ".join(
                f"INSERT INTO _replica_changes(mirror, key) SELECT '{name}', k FROM (SELECT json_array("
                f"{', '.join(f'{ref}.{c}' for c in cols)}) AS k) WHERE NOT EXISTS (SELECT 1 FROM _replica_changes"
                f" WHERE mirror = '{name}' AND key = k);"
                for ref in refs
                for name, cols in feeds
            )
            trigger = f"_replica_{table}_{event.lower()}"
            out[trigger] = f"CREATE TRIGGER IF NOT EXISTS {trigger} AFTER {event} ON {table} BEGIN {notes} END"
    return out


def install_capture(conn: sqlite3.Connection) -> None:
    """Create the change log and the replica state table, and (re)create the triggers as this code writes them."""
    for ddl in _STATE_DDL:
        conn.execute(ddl)
    for trigger, ddl in _triggers().items():
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        conn.execute(ddl)


def drop_capture(conn: sqlite3.Connection) -> None:
    """Remove every trace of replication: the file becomes a plain memory database."""
    for trigger in _triggers():
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    conn.execute("DROP TABLE IF EXISTS _replica_changes")
    conn.execute("DROP TABLE IF EXISTS _replica_state")


def pending_changes(conn: sqlite3.Connection) -> dict[str, set[Key]]:
    """The groups changed since the log was last cleared, by mirror."""
    out: dict[str, set[Key]] = defaultdict(set)
    for name, key in conn.execute("SELECT mirror, key FROM _replica_changes"):
        out[str(name)].add(tuple(json.loads(str(key))))
    return dict(out)


def clear_changes(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM _replica_changes")


def get_state(conn: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SELECT k, v FROM _replica_state")}


def set_state(conn: sqlite3.Connection, **values: object) -> None:
    conn.executemany(
        "INSERT INTO _replica_state(k, v) VALUES(?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
        [(k, str(v)) for k, v in values.items()],
    )
