"""A memory database as a replica: which rows make it up, how a change to them is caught, read and applied.

A store that keeps the durable truth elsewhere (PostgreSQL: service/pg) keeps each process's copy of a
memory as an ordinary memory database, so every read runs the one engine (retrieval, its pruning, FTS5's
bm25) and answers what the embedded engine answers on the same rows. This module is the memory side of
that: it knows the schema, not the other store.

- :data:`MIRRORS`: every table of the schema as copied rows. Each is replicated in *groups*: all rows
  sharing the group columns (a session's postings, a session's windows, one term's df) are replaced
  together, so a group key needs no float (a posting's ``ts``) and a shrinking group leaves no stale row.
  ``content`` is the FTS5 row and its ``content_rows`` entry together (its rowid kept, since windows point
  at it); ``facts_fts`` is copied with its rowid; ``chunk_fts`` (contentless) is derived again from
  ``chunks`` and ``content`` exactly as memory/index/postings.py indexed it; ``content_vocab`` is a view.
- memory.replica.capture: triggers note the group of every row any connection changes in
  ``_replica_changes``, in the same transaction as the change.
- :func:`read_groups` / :func:`apply_groups`: the rows of some groups now, and replacing groups with given
  rows (the windows' full-text entries kept in step). Applying copies rows verbatim, rowids included, so a
  replica is the writer's database row for row.

All functions are synchronous, on a plain ``sqlite3`` connection, inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memory.errors import MemoryStoreError

__all__ = [
    "MIRRORS",
    "MIRROR_NAMES",
    "Column",
    "Key",
    "Mirror",
    "ReplicaStateError",
    "Row",
    "all_rows",
    "apply_groups",
    "group_of",
    "load_rows",
    "mirror",
    "optimize_fts",
    "read_groups",
    "rebuild_chunk_fts",
]

Kind = Literal["text", "int", "real"]
Key = tuple[Any, ...]
Row = tuple[Any, ...]


class ReplicaStateError(MemoryStoreError):
    """A replica that cannot be brought in step (a value of the wrong type, a schema this code does not know)."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: Kind
    null: bool = False


@dataclass(frozen=True, slots=True)
class Mirror:
    name: str
    columns: tuple[Column, ...]
    group: tuple[str, ...]  # the leading columns that name a group
    # SQLite tables whose changes touch this mirror's groups: table -> the columns of its rows that give the key
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def width(self) -> int:
        return len(self.group)


def _cols(spec: str) -> tuple[Column, ...]:
    """``"name:text id:int? …"``: a column list (``?``: nullable)."""
    out = []
    for part in spec.split():
        name, kind = part.split(":")
        null = kind.endswith("?")
        out.append(Column(name, kind.rstrip("?"), null))  # type: ignore[arg-type]
    return tuple(out)


def _m(name: str, spec: str, group: str, sources: dict[str, str] | None = None) -> Mirror:
    keys = tuple(group.split())
    found = {table: tuple(cols.split()) for table, cols in (sources or {name: group}).items()}
    return Mirror(name, _cols(spec), keys, found)


# The schema of memory/storage/migrations.py as of its version 7. A migration that adds a table or a column adds it
# here too (and to service/pg/migrations.py); tests/service/pg/test_schema.py compares the three.
MIRRORS: tuple[Mirror, ...] = (
    _m("meta", "key:text value:text", "key"),
    _m(
        "sources",
        "path:text size:int mtime_ns:int sha256:text session_ids:text lines_skipped:int ingested_at:text",
        "path",
    ),
    _m(
        "sessions",
        "session_id:text kind:text parent_id:text source_path:text cwd:text git_branch:text title:text model:text"
        " started_at:text ended_at:text duration_min:real n_entries:int markdown:text content_sha:text"
        " extract_state:text updated_at:text",
        "session_id",
    ),
    _m(
        "handoffs",
        "session_id:text kind:text parent_id:text ts:real date:text duration_min:real substance:int headline:text"
        " projects:text keywords:text markdown:text source:text review:text indexed:int updated_at:text"
        " reviewed_by:text reviewed_at:text",
        "session_id",
    ),
    _m("postings", "session_id:text field:int term:text ts:real dur:real", "session_id"),
    _m("term_df", "field:int term:text df:int", "field term"),
    # A session's FTS5 content row and its rowid (content_rows). Eywa.link changes content.parent_id with its
    # sessions row, hence the sessions source.
    _m(
        "content",
        "session_id:text row:int kind:text parent_id:text body:text",
        "session_id",
        {"content_rows": "session_id", "sessions": "session_id"},
    ),
    _m(
        "chunks",
        "session_id:text id:int handoff_id:text start:int stop:int prefix:text row:int ts:real? dur:real",
        "session_id",
    ),
    _m("forgotten", "session_id:text at:text forgotten_by:text", "session_id"),
    _m("problems", "path:text line_no:int reason:text", "path"),
    _m(
        "facts",
        "id:text subject:text ctype:text fields:text target:text via_link:int created_ms:int ts_ms:int"
        " last_access_ms:int access_count:int state:text sweep_marked_ms:int? provenance:text",
        "id",
    ),
    _m("facts_fts", "id:text row:int body:text", "id", {"facts": "id"}),
    _m("applied_events", "id:text at_ms:int origin:text", "id"),
    _m(
        "ledger",
        "id:int ts:text engine:text session_id:text thread_id:text run_id:text stage:text model:text"
        " input_tokens:int output_tokens:int cache_read_tokens:int cache_write_tokens:int cost_usd:real?"
        " duration_s:real rollout_path:text",
        "id",
    ),
)
_BY_NAME = {m.name: m for m in MIRRORS}
MIRROR_NAMES = frozenset(_BY_NAME)
# Applied in this order: windows' full-text entries are handed back with the body they indexed, so chunks
# go before content is replaced and their new entries after (see apply_groups).
_SPECIAL = {"content", "chunks", "facts_fts"}


def mirror(name: str) -> Mirror:
    return _BY_NAME[name]


# --- reading rows ---------------------------------------------------------------------------------------

_SELECT = {
    "content": (
        # CROSS JOIN: content_rows drives, each FTS5 row found by its rowid (the other way round is a scan of
        # content_rows for every content row).
        "SELECT r.session_id, r.row, c.kind, c.parent_id, c.body FROM content_rows AS r"
        " CROSS JOIN content AS c ON c.rowid = r.row"
    ),
    "facts_fts": "SELECT id, rowid, body FROM facts_fts",
}
_KEYCOL = {"content": ("r.session_id",)}


def _select(m: Mirror) -> str:
    return _SELECT.get(m.name, f"SELECT {', '.join(m.names)} FROM {m.name}")


def _where(m: Mirror, n: int) -> str:
    cols = _KEYCOL.get(m.name, m.group)
    if len(cols) == 1:
        return f" WHERE {cols[0]} IN ({','.join('?' * n)})"
    one = "(" + " AND ".join(f"{c} = ?" for c in cols) + ")"
    return " WHERE " + " OR ".join([one] * n)


def read_groups(conn: sqlite3.Connection, name: str, keys: Iterable[Key], batch: int = 400) -> list[Row]:
    """The rows of these groups of mirror ``name`` as they are now (none for a group that is gone)."""
    m = mirror(name)
    wanted = sorted(set(keys), key=repr)
    per = max(1, batch // m.width)
    out: list[Row] = []
    for i in range(0, len(wanted), per):
        part = wanted[i : i + per]
        args = [v for k in part for v in k]
        out.extend(tuple(r) for r in conn.execute(_select(m) + _where(m, len(part)), args))
    return out


def all_rows(conn: sqlite3.Connection, name: str, batch: int = 5000) -> Iterator[list[Row]]:
    """Every row of mirror ``name``, in batches (content and windows by rowid, so bodies repeat in a run)."""
    m = mirror(name)
    order = {"content": " ORDER BY r.row", "chunks": " ORDER BY row, id", "facts_fts": " ORDER BY rowid"}
    cur = conn.execute(_select(m) + order.get(name, ""))
    while rows := cur.fetchmany(batch):
        yield [tuple(r) for r in rows]


def group_of(m: Mirror, row: Sequence[object]) -> Key:
    return tuple(row[: m.width])


# --- applying rows --------------------------------------------------------------------------------------


def _chunk_text(prefix: Any, body: str, start: Any, stop: Any) -> str:
    # What memory/index/postings.py gives chunk_fts for a window: its prefix and its span of the session's body.
    return str(prefix) + body[int(start) : int(stop)]


def _bodies(conn: sqlite3.Connection, rows: Iterable[Any]) -> dict[int, str]:
    wanted = sorted({int(r) for r in rows})
    out: dict[int, str] = {}
    for i in range(0, len(wanted), 400):
        part = wanted[i : i + 400]
        sql = f"SELECT rowid, body FROM content WHERE rowid IN ({','.join('?' * len(part))})"
        out.update((int(r), str(b)) for r, b in conn.execute(sql, part))
    return out


def _window_texts(conn: sqlite3.Connection, rows: Sequence[Row], bodies: Mapping[int, str]) -> dict[int, str]:
    """chunk id -> the text chunk_fts indexed for it (rows: chunks mirror rows)."""
    out = {}
    for _sid, cid, _hid, start, stop, prefix, row, _ts, _dur in rows:
        body = bodies.get(int(row))
        if body is not None:
            out[int(cid)] = _chunk_text(prefix, body, start, stop)
    return out


def apply_groups(conn: sqlite3.Connection, changes: Mapping[str, tuple[set[Key], list[Row]]]) -> None:
    """Replace each named group with the given rows (``changes[mirror] = (groups, their rows now)``).

    Rows are written verbatim, rowids included. A window whose text is unchanged keeps its full-text entry;
    one whose text changed or went is handed back to FTS5 with the very text it indexed (a contentless
    table forgets a row no other way), read before the session's content is replaced.
    """
    for name in changes:
        if name not in _BY_NAME:
            raise ReplicaStateError(f"unknown table {name!r}: this replica is older than the data")
    chunk_keys, new_chunks = changes.get("chunks", (set(), []))
    content_keys, new_content = changes.get("content", (set(), []))
    old_chunks = read_groups(conn, "chunks", chunk_keys) if chunk_keys else []
    old_texts = _window_texts(conn, old_chunks, _bodies(conn, (r[6] for r in old_chunks)))
    # New windows' text: the new body of their session when it changes now, else the stored one.
    new_bodies = {int(r[1]): str(r[4]) for r in new_content}
    stored = _bodies(conn, (r[6] for r in new_chunks if int(r[6]) not in new_bodies))
    new_texts = _window_texts(conn, new_chunks, {**stored, **new_bodies})
    gone = [(cid, text) for cid, text in old_texts.items() if new_texts.get(cid) != text]
    if gone:
        conn.executemany("INSERT INTO chunk_fts(chunk_fts, rowid, body) VALUES('delete', ?, ?)", gone)
    if chunk_keys:
        _replace_plain(conn, mirror("chunks"), chunk_keys, new_chunks)
    if content_keys:
        _replace_content(conn, content_keys, new_content)
    added = [(cid, text) for cid, text in new_texts.items() if old_texts.get(cid) != text]
    if added:
        conn.executemany("INSERT INTO chunk_fts(rowid, body) VALUES(?, ?)", added)
    if "facts_fts" in changes:
        keys, rows = changes["facts_fts"]
        _delete_where(conn, "DELETE FROM facts_fts", "id", [k[0] for k in keys])
        conn.executemany("INSERT INTO facts_fts(rowid, id, body) VALUES(?, ?, ?)", [(r[1], r[0], r[2]) for r in rows])
    for name, (keys, rows) in changes.items():
        if name not in _SPECIAL and keys:
            _replace_plain(conn, mirror(name), keys, rows)


def _delete_where(conn: sqlite3.Connection, head: str, col: str, values: Sequence[object]) -> None:
    for i in range(0, len(values), 400):
        part = values[i : i + 400]
        conn.execute(f"{head} WHERE {col} IN ({','.join('?' * len(part))})", part)


def _replace_plain(conn: sqlite3.Connection, m: Mirror, keys: set[Key], rows: Sequence[Row]) -> None:
    if m.width == 1:
        _delete_where(conn, f"DELETE FROM {m.name}", m.group[0], [k[0] for k in keys])
    else:
        cond = " AND ".join(f"{c} = ?" for c in m.group)
        conn.executemany(f"DELETE FROM {m.name} WHERE {cond}", list(keys))
    _insert_plain(conn, m, rows)


def _insert_plain(conn: sqlite3.Connection, m: Mirror, rows: Sequence[Row]) -> None:
    if rows:
        conn.executemany(f"INSERT INTO {m.name}({', '.join(m.names)}) VALUES({','.join('?' * len(m.names))})", rows)


def _replace_content(conn: sqlite3.Connection, keys: set[Key], rows: Sequence[Row]) -> None:
    sids = [k[0] for k in keys]
    for i in range(0, len(sids), 400):
        part = sids[i : i + 400]
        marks = ",".join("?" * len(part))
        conn.execute(
            f"DELETE FROM content WHERE rowid IN (SELECT row FROM content_rows WHERE session_id IN ({marks}))", part
        )
        conn.execute(f"DELETE FROM content_rows WHERE session_id IN ({marks})", part)
    _insert_content(conn, rows)


def _insert_content(conn: sqlite3.Connection, rows: Sequence[Row]) -> None:
    conn.executemany(
        "INSERT INTO content(rowid, session_id, kind, parent_id, body) VALUES(?, ?, ?, ?, ?)",
        [(r[1], r[0], r[2], r[3], r[4]) for r in rows],
    )
    conn.executemany("INSERT INTO content_rows(session_id, row) VALUES(?, ?)", [(r[0], r[1]) for r in rows])


def load_rows(conn: sqlite3.Connection, name: str, rows: Sequence[Row]) -> None:
    """Add rows to an empty replica being built (no group is replaced; chunk_fts comes after, at once)."""
    if name == "content":
        _insert_content(conn, rows)
    elif name == "facts_fts":
        conn.executemany("INSERT INTO facts_fts(rowid, id, body) VALUES(?, ?, ?)", [(r[1], r[0], r[2]) for r in rows])
    else:
        _insert_plain(conn, mirror(name), rows)


def optimize_fts(conn: sqlite3.Connection) -> None:
    """Merge each full-text index into one segment (a copy built in batches has many): faster to query, the
    same bm25 (FTS5's statistics do not depend on how its index is cut into segments)."""
    for table in ("content", "chunk_fts", "facts_fts"):
        conn.execute(f"INSERT INTO {table}({table}) VALUES('optimize')")


def rebuild_chunk_fts(conn: sqlite3.Connection) -> int:
    """Index every window's text in chunk_fts (a replica just built, whose chunk_fts is empty)."""
    n = 0
    body_row = -1
    batch: list[tuple[int, str]] = []
    cur = conn.execute("SELECT c.id, c.start, c.stop, c.prefix, c.row FROM chunks AS c ORDER BY c.row, c.id")
    body: str | None = None
    for cid, start, stop, prefix, row in cur.fetchall():
        if row != body_row:
            found = conn.execute("SELECT body FROM content WHERE rowid = ?", (row,)).fetchone()
            body_row, body = row, (str(found[0]) if found else None)
        if body is None:  # a window whose session has no content row: nothing was indexed for it
            continue
        batch.append((int(cid), _chunk_text(prefix, body, start, stop)))
        if len(batch) >= 2000:
            conn.executemany("INSERT INTO chunk_fts(rowid, body) VALUES(?, ?)", batch)
            n += len(batch)
            batch.clear()
    conn.executemany("INSERT INTO chunk_fts(rowid, body) VALUES(?, ?)", batch)
    return n + len(batch)
