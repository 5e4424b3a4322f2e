"""The synchronous facts store: one sqlite3 connection, used from one thread (the facade's worker).

Every change is an event: live operations validate, build the event and apply it through the same
``_apply`` that replay uses, so a rebuilt database equals the live one. Changes of one transaction
are appended to the log (fsynced) before the commit; a crash between the two is healed by
``replay_new`` at the next open (the applied event ids are in ``applied_events``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory.facts import decay
from memory.facts.events import Event, EventLog, load_origin, new_event, read_events
from memory.facts.model import RELATIONSHIP, FactsError, Memory, State, check_name, component, format_number

__all__ = ["FactsEngine", "link_id"]

logger = logging.getLogger(__name__)

_COLUMNS = (
    "id, subject, ctype, fields, created_ms, ts_ms, last_access_ms, access_count, state, sweep_marked_ms, "
    "provenance, via_link"
)
_META_KEYS = ("created_ms", "ts_ms", "last_access_ms", "access_count", "state", "sweep_marked_ms")


def link_id(source: str, kind: str, target: str) -> str:
    return f"{source}~{kind}~{target}"


def _row(r: Sequence[Any]) -> Memory:
    return Memory(
        id=r[0],
        subject=r[1],
        ctype=r[2],
        fields=json.loads(r[3]),
        created_ms=r[4],
        ts_ms=r[5],
        last_access_ms=r[6],
        access_count=r[7],
        state=State(r[8]),
        sweep_marked_ms=r[9],
        provenance=r[10],
        via_link=bool(r[11]),
    )


class FactsEngine:
    def __init__(
        self,
        facts_dir: Path,
        db_path: Path,
        conn: sqlite3.Connection,
        *,
        half_life_days: float,
        busy_timeout_ms: int,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        if half_life_days <= 0:
            raise ValueError("half_life_days must be positive")
        self.facts_dir = facts_dir
        self.half_life_ms = half_life_days * decay.DAY_MS
        self.origin = load_origin(facts_dir)
        self.log = EventLog(facts_dir / "events", self.origin)
        self.db_path = db_path
        # The connection is memory's Database's (it opened and migrated the file, and closes this): only
        # one owner opens a database file in a process (memory/storage/share.py says why).
        self.conn = conn
        self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self._pending: list[Event] | None = None
        self.events_since_snapshot = 0
        self.redact: Callable[[str], str] = redact or (lambda text: text)

    # -- transactions -------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction whose events are logged (and fsynced) before it commits; all or nothing."""
        if self._pending is not None:
            yield  # nested: the outer transaction logs and commits
            return
        self.conn.execute("BEGIN IMMEDIATE")
        # Another process of this origin may have committed events stamped ahead of the wall clock (a bulk
        # script goes 1 ms per event): stamp ours after them, so replay order is commit order.
        (newest,) = self.conn.execute(
            "SELECT max(at_ms) FROM applied_events WHERE origin = ?", (self.origin,)
        ).fetchone()
        if newest is not None:
            self.log.observe(int(newest))
        self._pending = []
        try:
            yield
            events = self._pending
            self.conn.executemany(
                "INSERT OR IGNORE INTO applied_events(id, at_ms, origin) VALUES (?, ?, ?)",
                [(e.id, e.at_ms, e.origin) for e in events],
            )
            self.log.append(events)
        except BaseException:
            self._pending = None
            self.conn.execute("ROLLBACK")
            raise
        self._pending = None
        self.conn.execute("COMMIT")
        self.events_since_snapshot += len(events)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Inside a transaction: a block whose changes and events are all undone if it raises."""
        if self._pending is None:
            raise RuntimeError("a savepoint needs an open engine.transaction()")
        mark = len(self._pending)
        self.conn.execute("SAVEPOINT block")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO block")
            self.conn.execute("RELEASE block")
            del self._pending[mark:]
            raise
        self.conn.execute("RELEASE block")

    def _emit(self, op: str, args: dict[str, Any]) -> None:
        if self._pending is None:
            raise RuntimeError("facts changes must run inside engine.transaction()")
        event = new_event(self.origin, op, args, self.log.next_at_ms())
        self._apply(event)
        self._pending.append(event)

    # -- applying events (shared by live operations and replay) ------------------------------------

    def _apply(self, e: Event) -> None:
        a = e.args
        now = int(a.get("now_ms", e.at_ms))
        if e.op == "remember":
            self._insert(a, now)
        elif e.op == "link":
            strength = format_number(float(a.get("strength", 1.0)))
            fields = {"target": a["to"], "kind": a["kind"], "strength": strength}
            args = {"id": link_id(a["from"], a["kind"], a["to"]), "subject": a["from"], "type": RELATIONSHIP.name}
            self._insert(
                args | {"fields": fields, "meta": a.get("meta", {}), "provenance": a.get("provenance", "")}, now, True
            )
        elif e.op == "forget":
            if self.conn.execute("DELETE FROM facts WHERE id = ?", (a["id"],)).rowcount == 0:
                raise FactsError(f"no memory with id {a['id']!r}")
            self.conn.execute("DELETE FROM facts_fts WHERE id = ?", (a["id"],))
        elif e.op == "touch":
            self.conn.executemany(
                "UPDATE facts SET access_count = access_count + 1, last_access_ms = ? WHERE id = ?",
                [(now, i) for i in a["ids"]],
            )
        elif e.op == "consolidate":
            self.conn.executemany("UPDATE facts SET state = ? WHERE id = ?", [(s, i) for i, s in a["transitions"]])
        elif e.op == "sweep":
            self.conn.executemany("UPDATE facts SET sweep_marked_ms = ? WHERE id = ?", [(now, i) for i in a["marked"]])
            self.conn.executemany("DELETE FROM facts WHERE id = ?", [(i,) for i in a["deleted"]])
            self.conn.executemany("DELETE FROM facts_fts WHERE id = ?", [(i,) for i in a["deleted"]])
        elif e.op == "revive":
            cur = self.conn.execute(
                "UPDATE facts SET state = 'Active', ts_ms = ?, sweep_marked_ms = NULL WHERE id = ?", (now, a["id"])
            )
            if cur.rowcount == 0:
                raise FactsError(f"no memory with id {a['id']!r}")
        else:
            raise FactsError(f"unknown event op {e.op!r}")

    def _insert(self, a: Mapping[str, Any], now: int, via_link: bool = False) -> None:
        mid, subject, ctype = a["id"], a["subject"], component(a["type"])
        fields = ctype.normalize({k: str(v) for k, v in a["fields"].items()})
        if self.get(mid) is not None:
            raise FactsError(f"memory {mid!r} already exists (add_once: forget it first to replace it)")
        if self.is_concept(mid):
            raise FactsError(f"{mid!r} is a concept (a permanent anchor) and cannot be a memory id")
        meta = {k: a.get("meta", {}).get(k) for k in _META_KEYS}
        target = str(fields.get(ctype.target_field, "")) if ctype.target_field else ""
        self.conn.execute(
            f"INSERT INTO facts({_COLUMNS}, target) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                mid,
                subject,
                ctype.name,
                json.dumps(fields, ensure_ascii=False),
                meta["created_ms"] if meta["created_ms"] is not None else now,
                meta["ts_ms"] if meta["ts_ms"] is not None else (meta["created_ms"] or now),
                meta["last_access_ms"] if meta["last_access_ms"] is not None else (meta["created_ms"] or now),
                meta["access_count"] or 0,
                State(meta["state"] or State.ACTIVE).value,
                meta["sweep_marked_ms"],
                str(a.get("provenance", "")),
                int(via_link),
                target,
            ),
        )
        words = [mid, subject, ctype.name, *(format_number(v) if isinstance(v, float) else v for v in fields.values())]
        self.conn.execute("INSERT INTO facts_fts(id, body) VALUES (?, ?)", (mid, " ".join(words)))

    # -- live operations (call inside transaction()) ----------------------------------------------

    def remember(
        self,
        mid: str,
        subject: str,
        ctype: str,
        fields: Mapping[str, str],
        *,
        now_ms: int,
        provenance: str = "",
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        self._check_name("a memory id", mid)
        self._check_name("a subject", subject)
        spec = component(ctype)
        spec.normalize(dict(fields))  # fail before emitting
        if mid == subject:
            raise FactsError("a memory cannot be its own subject")
        # Redacted before the event is written: the log, the table, the snapshot and a git remote all
        # see only the redacted text.
        clean = {k: self.redact(str(v)) for k, v in fields.items()}
        args: dict[str, Any] = {"id": mid, "subject": subject, "type": spec.name, "fields": clean}
        args |= {"now_ms": now_ms, "provenance": self.redact(provenance)}
        if meta:
            args["meta"] = dict(meta)
        self._emit("remember", args)
        return mid

    def link(
        self,
        source: str,
        target: str,
        kind: str,
        strength: float,
        *,
        now_ms: int,
        provenance: str = "",
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        for what, value in (("a link source", source), ("a link target", target), ("a link kind", kind)):
            self._check_name(what, value)
            if "~" in value:  # the id's separator: "a y~b x" and "a~x b y" would share the id a~x~y~b
                raise FactsError(f"{what} cannot contain '~' (it separates the parts of a link's id): {value!r}")
        RELATIONSHIP.normalize({"target": target, "kind": kind, "strength": str(strength)})
        args: dict[str, Any] = {"from": source, "to": target, "kind": kind, "strength": strength}
        args |= {"now_ms": now_ms, "provenance": self.redact(provenance)}
        if meta:
            args["meta"] = dict(meta)
        self._emit("link", args)
        return link_id(source, kind, target)

    def _check_name(self, what: str, value: str) -> None:
        """A valid name that is no secret: names are identifiers, kept as they are in the log, the snapshot and
        a git remote, so one that redaction would change is refused rather than stored."""
        check_name(what, value)
        if self.redact(value) != value:
            raise FactsError(f"{what} looks like a secret; names are never redacted: put it in a field, which is")

    def forget(self, mid: str, *, now_ms: int) -> str:
        if self.get(mid) is None:
            if self.is_concept(mid):
                raise FactsError(f"{mid!r} is a concept (a permanent anchor); only memories can be forgotten")
            raise FactsError(f"no memory with id {mid!r}")
        self._emit("forget", {"id": mid, "now_ms": now_ms})
        return mid

    def touch(self, ids: Sequence[str], *, now_ms: int) -> None:
        if ids:
            self._emit("touch", {"ids": list(ids), "now_ms": now_ms})

    def revive(self, mid: str, *, now_ms: int) -> str:
        if self.get(mid) is None:
            raise FactsError(f"no memory with id {mid!r}")
        self._emit("revive", {"id": mid, "now_ms": now_ms})
        return mid

    def consolidate(self, *, now_ms: int) -> dict[str, int]:
        """Move memories forward in the lifecycle; counts (and logs) only real transitions."""
        moves: list[tuple[str, str]] = []
        rows = self.conn.execute("SELECT id, ts_ms, access_count, state FROM facts WHERE state != 'Archived'")
        for mid, ts_ms, count, state in rows:
            target = decay.next_state(State(state), decay.effective(ts_ms, count, now_ms, self.half_life_ms))
            if target is not None:
                moves.append((mid, target.value))
        if moves:
            self._emit("consolidate", {"transitions": moves, "now_ms": now_ms})
        dormant = sum(1 for _, s in moves if s == State.DORMANT)
        return {"transitions": len(moves), "dormant": dormant, "archived": len(moves) - dormant}

    def sweep(self, *, now_ms: int, grace_ms: int, max_delete: int, dry_run: bool) -> dict[str, int]:
        """Two passes: mark Archived memories, then delete those marked at least ``grace_ms`` ago."""
        marked: list[str] = []
        deleted: list[str] = []
        rows = self.conn.execute("SELECT id, sweep_marked_ms FROM facts WHERE state = 'Archived' ORDER BY id")
        for mid, mark in rows:
            if mark is None:
                marked.append(mid)
            elif now_ms - mark >= grace_ms and len(deleted) < max_delete:
                deleted.append(mid)
        if (marked or deleted) and not dry_run:
            self._emit("sweep", {"marked": marked, "deleted": deleted, "now_ms": now_ms})
        return {"marked": len(marked), "deleted": len(deleted), "dry_run": int(dry_run)}

    # -- queries -----------------------------------------------------------------------------------

    def get(self, mid: str) -> Memory | None:
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM facts WHERE id = ?", (mid,)).fetchone()
        return _row(row) if row else None

    def is_concept(self, name: str) -> bool:
        if self.conn.execute("SELECT 1 FROM facts WHERE id = ?", (name,)).fetchone():
            return False
        hit = self.conn.execute("SELECT 1 FROM facts WHERE subject = ? OR target = ? LIMIT 1", (name, name))
        return hit.fetchone() is not None

    def decay_of(self, m: Memory, now_ms: int) -> float:
        return decay.effective(m.ts_ms, m.access_count, now_ms, self.half_life_ms)

    def ranked(self, where: str, params: Sequence[Any], now_ms: int, limit: int) -> list[Memory]:
        """Memories matching ``where``, strongest effective decay first (age / reinforcement is monotone)."""
        sql = (
            f"SELECT {_COLUMNS} FROM facts WHERE {where} "
            "ORDER BY MAX(0, ? - ts_ms) * 1.0 / (1 + 0.5 * access_count), id LIMIT ?"
        )
        return [_row(r) for r in self.conn.execute(sql, (*params, now_ms, limit))]

    def search(self, terms: Sequence[str], now_ms: int, limit: int) -> list[tuple[Memory, float]]:
        tokens = [t for term in terms for t in "".join(c if c.isalnum() else " " for c in term).split()]
        if not tokens:
            return []
        query = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(tokens))
        rows = self.conn.execute(
            "SELECT id, bm25(facts_fts) FROM facts_fts WHERE facts_fts MATCH ? ORDER BY bm25(facts_fts) LIMIT ?",
            (query, max(limit * 5, 50)),
        ).fetchall()
        hits: list[tuple[Memory, float]] = []
        for mid, bm in rows:
            m = self.get(mid)
            if m is None or m.state == State.ARCHIVED:
                continue
            # Relevance first, then a gentle preference for fresher memories.
            hits.append((m, -bm * (0.5 + 0.5 * self.decay_of(m, now_ms))))
        hits.sort(key=lambda h: (-h[1], h[0].id))
        return hits[:limit]

    def all_memories(self) -> list[Memory]:
        return [_row(r) for r in self.conn.execute(f"SELECT {_COLUMNS} FROM facts ORDER BY id")]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {"memories": 0, "Active": 0, "Dormant": 0, "Archived": 0}
        for state, n in self.conn.execute("SELECT state, COUNT(*) FROM facts GROUP BY state"):
            out[state] = n
            out["memories"] += n
        for ctype, n in self.conn.execute("SELECT ctype, COUNT(*) FROM facts GROUP BY ctype ORDER BY ctype"):
            out[ctype] = n
        concepts = self.conn.execute(
            "SELECT COUNT(*) FROM (SELECT subject AS n FROM facts UNION SELECT target FROM facts WHERE target != '') "
            "AS u WHERE NOT EXISTS (SELECT 1 FROM facts AS f WHERE f.id = u.n)"
        ).fetchone()
        out["concepts"] = int(concepts[0])
        return out

    # -- replay ------------------------------------------------------------------------------------

    def replay_new(self) -> int:
        """Apply events from every origin file not applied yet, in (at_ms, id) order. Idempotent."""
        applied = {r[0] for r in self.conn.execute("SELECT id FROM applied_events")}
        fresh: dict[str, Event] = {}
        for e in read_events(self.log.folder):
            if e.origin == self.origin:
                self.log.observe(e.at_ms)
            if e.id not in applied:
                fresh.setdefault(e.id, e)
        if not fresh:
            return 0
        n = 0
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for e in sorted(fresh.values(), key=lambda ev: ev.order):
                cur = self.conn.execute(
                    "INSERT OR IGNORE INTO applied_events(id, at_ms, origin) VALUES (?, ?, ?)",
                    (e.id, e.at_ms, e.origin),
                )
                if cur.rowcount == 0:
                    continue  # another process applied it meanwhile
                n += 1
                try:
                    self._apply(e)
                except (FactsError, KeyError, TypeError, ValueError) as exc:
                    # A conflicting event (e.g. both clones remembered the same id): first in order wins.
                    logger.info("event %s (%s) not applied: %s", e.id, e.op, exc)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return n

    def rebuild(self) -> int:
        """Drop every facts row and replay all event files from scratch."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for table in ("facts", "facts_fts", "applied_events"):
                self.conn.execute(f"DELETE FROM {table}")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return self.replay_new()
