"""Moving one tenant's memory between a SQLite memory database and PostgreSQL, without loss.

``from_sqlite``: every row of a memory.db (sessions, handoffs, postings, content and its windows, facts,
the ledger, …) and the facts event log beside it (``facts/events/*.jsonl``) become the tenant's rows, in
one transaction, counted on both sides before it commits; the tenant's keys in ``service.db`` come along.
The rows are copied as they are, rowids included, so a copy built from the database answers exactly what
the file did. ``to_sqlite``: the tenant's rows as a new memory.db (plain: no replication triggers), its
event log and its readable handoff tree beside it.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from memory import Eywa, MemorySettings
from memory import replica as replicate
from memory.facts import read_events
from memory.replica import MIRRORS
from memory.storage import Database
from service.errors import Conflict, NotFound
from service.pg.keys import PgKeyStore
from service.pg.link import PgLink, to_pg_text
from service.pg.rows import build_copy, push_rows
from service.tenants import KeyRecord, Scope, check_tenant_name

__all__ = ["MigrationReport", "from_sqlite", "to_sqlite"]


@dataclass(slots=True)
class MigrationReport:
    tenant: str
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (SQLite's count, PostgreSQL's)
    keys: int = 0

    @property
    def equal(self) -> bool:
        return all(a == b for a, b in self.rows.values())


def _events(folder: Path) -> list[tuple[str, int, str, str]]:
    seen: dict[str, tuple[str, int, str, str]] = {}
    for e in read_events(folder):
        seen.setdefault(e.id, (e.id, e.at_ms, e.origin, e.to_line().rstrip("\n")))
    return sorted(seen.values(), key=lambda r: (r[1], r[0]))


def _keys(path: Path, tenant: str) -> list[tuple[KeyRecord, str]]:
    if not path.is_file():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT key_id, tenant, scope, label, created_at, revoked_at, sha256 FROM api_keys WHERE tenant = ?",
            (tenant,),
        ).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    out = []
    for key_id, name, scope, label, created, revoked, sha in rows:
        record = KeyRecord(str(key_id), str(name), cast(Scope, scope), str(label), float(created), revoked)
        out.append((record, str(sha)))
    return out


async def _counts(link: PgLink, tenant: str) -> dict[str, int]:
    out = {}
    async with link.tenant_read(tenant) as tx:
        for name in (*(m.name for m in MIRRORS), "facts_events"):
            [(n,)] = await tx.rows(f"SELECT count(*) FROM macupos.{name} WHERE tenant_id = %s", [tenant])
            out[name] = int(n)
    return out


async def from_sqlite(link: PgLink, path: Path, tenant: str, *, keys_db: Path | None = None) -> MigrationReport:
    """Copy the memory database at ``path`` (and its facts events) in as ``tenant``, which must hold no memory
    yet. Nothing is committed unless every table's count in PostgreSQL equals the file's."""
    check_tenant_name(tenant)
    if not path.is_file():
        raise NotFound(f"no memory database at {path}")
    db = await Database.open(path)  # an older schema is migrated first, as any macupos command would
    await db.close()
    state = await link.tenant_state(tenant)
    if state is None:
        await link.ensure_tenant(tenant, origin="migrate")
    elif state[0] > 0:
        raise Conflict(f"the tenant {tenant!r} already holds memory in the database: migrate into a new tenant")
    report = MigrationReport(tenant)
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        async with link.tenant_write(tenant, lock_wait_s=30) as tx:
            if tx.seq != 1:
                raise Conflict(f"the tenant {tenant!r} was written to meanwhile: migrate into a new tenant")
            for m in MIRRORS:
                n = 0
                for batch in replicate.all_rows(src, m.name):
                    await push_rows(tx, m, batch, tx.seq)
                    n += len(batch)
                report.rows[m.name] = (n, -1)
            events = await asyncio.to_thread(_events, path.parent / "facts" / "events")
            for i in range(0, len(events), 5000):
                part = events[i : i + 5000]
                await tx.run(
                    "INSERT INTO macupos.facts_events(tenant_id, id, at_ms, origin, line, seq)"
                    " SELECT %s, u.*, %s FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[]) AS u",
                    [
                        tenant,
                        tx.seq,
                        [e[0] for e in part],
                        [e[1] for e in part],
                        [e[2] for e in part],
                        [to_pg_text(e[3]) for e in part],
                    ],
                )
            report.rows["facts_events"] = (len(events), -1)
            for name, (n, _) in report.rows.items():
                [(got,)] = await tx.rows(f"SELECT count(*) FROM macupos.{name} WHERE tenant_id = %s", [tenant])
                report.rows[name] = (n, int(got))
            if not report.equal:
                return report  # rolled back
            await tx.commit()
    finally:
        src.close()
    if keys_db is not None:
        report.keys = await PgKeyStore(link).import_keys(await asyncio.to_thread(_keys, keys_db, tenant))
    return report


async def to_sqlite(link: PgLink, tenant: str, path: Path) -> MigrationReport:
    """Write ``tenant``'s memory as a new memory database at ``path``, its facts events in
    ``facts/events/`` and its handoff files in ``handoffs/`` beside it (the layout of a memory home)."""
    check_tenant_name(tenant)
    if await link.tenant_state(tenant) is None:
        raise NotFound(f"no tenant {tenant!r} in the database")
    if path.exists():
        raise Conflict(f"{path} exists already: name a new file")
    home = path.parent
    events_dir = home / "facts" / "events"
    if events_dir.is_dir() and any(events_dir.glob("*.jsonl")):
        raise Conflict(f"{events_dir} holds event files already: export into an empty folder")
    home.mkdir(parents=True, exist_ok=True)
    staged = home / f".{path.name}.staged"
    try:
        built = await build_copy(link, tenant, staged, events_dir)

        def plain() -> None:
            conn = sqlite3.connect(staged, isolation_level=None)
            try:
                replicate.drop_capture(conn)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()

        await asyncio.to_thread(plain)
        await asyncio.to_thread(shutil.move, staged, path)
    finally:
        Database.check_closed(staged, "remove the staged copy")
        for leftover in (staged, staged.with_name(staged.name + "-wal"), staged.with_name(staged.name + "-shm")):
            leftover.unlink(missing_ok=True)
    counts = await _counts(link, tenant)
    report = MigrationReport(tenant, {name: (built.rows.get(name, 0), n) for name, n in counts.items()})
    settings = MemorySettings(home=home, claude_config_dir=home / ".no-claude", codex_home=home / ".no-codex")
    db = await Database.open(path)
    async with Eywa(settings, db) as eywa:
        await eywa.export_dir(home / "handoffs")
    return report
