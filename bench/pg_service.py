"""The memory service on PostgreSQL beside the embedded engine: same synthetic data, same client, real processes.

For each corpus size (synthetic handoffs, bench/_synthetic.py), one tenant holds the corpus: as the embedded
store's memory.db, and moved into a private PostgreSQL (tests/service/pg/cluster.py; or --database URL) with
`migrate --from-sqlite`. Then, with httpx keep-alive clients over loopback:

- `/v1/get` latency (p50 / p95 / p99), embedded vs PostgreSQL (the first get of a fresh process, which builds
  its local copy from the database, timed apart);
- gets a second from concurrent clients: embedded (one process), PostgreSQL with one and with two
  `macupos serve` processes (the scaling ratio), and what the database spent on them (CPU of every
  PostgreSQL process a thousand gets, connections each server holds);
- uploads: 2-turn transcripts one after another (uploads a second, embedded vs PostgreSQL, and PostgreSQL
  with two processes taking turns, so each write first catches up with the other's), and 1 MB ones.

Run: .venv/bin/python -m bench.pg_service [--handoffs 10000,100000] [--queries 300] [--seconds 10]
     [--concurrency 16] [--database URL] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench._synthetic import build, generate
from bench.latency import query_mix
from bench.service_latency import _cpu_s, _ms, remote_latency, serving, uploads
from memory.storage.database import Database
from service.keys import SqliteKeyStore
from service.pg.keys import PgKeyStore
from service.pg.link import PgLink
from service.pg.migrate import from_sqlite
from tests.service.conftest import transcript_bytes
from tests.service.pg.cluster import Cluster

TENANT = "bench"


@contextmanager
def pg_serving(home: Path, *args: str) -> Iterator[tuple[str, int]]:
    """``macupos serve --no-web`` with ``args``, its log in ``home``; a cold start on PostgreSQL can be long."""
    home.mkdir(parents=True, exist_ok=True)
    with serving(home, "--no-web", *args, log=home / "serve.log", start_s=300) as started:
        yield started


def first_get(url: str, key: str, query: str, now: datetime) -> float:
    """Seconds until a fresh server's first get succeeds: its copy of the tenant is built (or opened) then,
    the requests meanwhile answered 503 (come back) as a client sees them."""
    start = time.perf_counter()
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=600) as c:
        while True:
            r = c.get("/v1/get", params={"q": query, "as_of": now.isoformat()})
            if r.status_code != 503:
                r.raise_for_status()
                return time.perf_counter() - start
            time.sleep(float(r.headers.get("Retry-After", "1")))


class PgCpu:
    """CPU seconds of every process of a local PostgreSQL cluster (its postmaster and all it forked)."""

    def __init__(self, data: Path | None) -> None:
        self.root = int((data / "postmaster.pid").read_text().split()[0]) if data else None

    def seconds(self) -> float | None:
        if self.root is None:
            return None
        total = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            pid, rest = int(stat.parent.name), text.rsplit(")", 1)[1].split()
            if pid == self.root or int(rest[1]) == self.root:
                total += (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
        return total


def connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'macupos serve'").fetchone()
    return int(row[0]) if row else 0


async def gets_per_second(
    urls: list[str], key: str, queries: list[str], now: datetime, seconds: float, conc: int
) -> dict[str, Any]:
    """``conc`` clients, spread over the servers; warm-up, then ``seconds`` measured."""
    ok = errors = 0
    measuring = False
    stop = time.monotonic() + 2.0 + seconds
    clients = [
        httpx.AsyncClient(base_url=u, timeout=60, headers={"X-API-Key": key}, limits=httpx.Limits(max_connections=conc))
        for u in urls
    ]

    async def worker(w: int) -> None:
        nonlocal ok, errors
        c, i = clients[w % len(clients)], w
        while time.monotonic() < stop:
            r = await c.get("/v1/get", params={"q": queries[i % len(queries)], "as_of": now.isoformat()})
            if measuring:
                if r.status_code == 200:
                    ok += 1
                else:
                    errors += 1
            i += conc

    try:
        tasks = [asyncio.create_task(worker(w)) for w in range(conc)]
        await asyncio.sleep(2.0)
        measuring = True
        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        for c in clients:
            await c.aclose()
    client_cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    return {"gets_per_s": round(ok / wall, 1), "errors": errors, "seconds": round(wall, 1), "ok": ok,
            "client_cpu_share": round(client_cpu / wall, 2)}  # fmt: skip


def small_uploads(urls: list[str], key: str, n: int, tag: str) -> dict[str, float]:
    """n 2-turn transcripts one after another, through the servers in turn; uploads a second and the median."""
    clients = [httpx.Client(base_url=u, headers={"X-API-Key": key}, timeout=120) for u in urls]
    took = []
    try:
        start = time.perf_counter()
        for i in range(n):
            sid = f"{tag}-{i}"
            t = time.perf_counter()
            r = clients[i % len(clients)].post(
                "/v1/transcripts", params={"name": f"{sid}.jsonl"}, content=transcript_bytes(sid, f"mark{i}")
            )
            r.raise_for_status()
            took.append(time.perf_counter() - t)
        wall = time.perf_counter() - start
    finally:
        for c in clients:
            c.close()
    return {"uploads_per_s": round(n / wall, 1), "median_ms": round(statistics.median(took) * 1000, 1)}


async def prepare(root: Path, n: int, url: str) -> tuple[Path, str, str, list[str], datetime, dict[str, float]]:
    """The embedded home (the corpus as tenant `bench`, a key) and the same corpus moved into the database."""
    t0 = time.perf_counter()
    corpus = generate(n)
    home = root / f"embedded-{n}"
    db_path = home / "tenants" / TENANT / "memory.db"
    db_path.parent.mkdir(parents=True)
    await (await Database.open(db_path)).close()
    build(corpus, db_path)
    built = time.perf_counter() - t0
    keys = await SqliteKeyStore.open(home / "service.db")
    emb_key = (await keys.create_key(TENANT, "write")).api_key
    await keys.close()
    copy = root / f"copy-{n}.db"
    shutil.copy(db_path, copy)
    link = await PgLink.open(url, max_size=2)
    try:
        t1 = time.perf_counter()
        report = await from_sqlite(link, copy, TENANT)
        moved = time.perf_counter() - t1
        assert report.equal, report.rows
        pg_key = (await PgKeyStore(link).create_key(TENANT, "write")).api_key
    finally:
        await link.close()
    mixed, _, _ = query_mix(corpus, random.Random(n), 1000)
    print(f"{n} handoffs: built in {built:.1f}s, moved into PostgreSQL in {moved:.1f}s", flush=True)
    return home, emb_key, pg_key, mixed, datetime.fromtimestamp(corpus.end_ts, UTC), {"migrate_s": round(moved, 1)}


def _pg_cpu_per_k(cpu: PgCpu, before: float | None, gets: int) -> float | None:
    """Milliseconds of PostgreSQL CPU (all its processes) a get."""
    after = cpu.seconds()
    if before is None or after is None or not gets:
        return None
    return round((after - before) / gets * 1000, 3)


async def one_size(
    root: Path, n: int, url: str, cpu: PgCpu, n_queries: int, seconds: float, conc: int
) -> dict[str, Any]:
    home, emb_key, pg_key, queries, now, moved = await prepare(root, n, url)
    queries = queries[:n_queries]
    out: dict[str, Any] = {"handoffs": n, "queries": len(queries), **moved}
    with pg_serving(home) as (emb_url, emb_pid):
        out["embedded_first_get_s"] = round(first_get(emb_url, emb_key, queries[0], now), 2)
        c0 = _cpu_s(emb_pid)
        out["embedded_get_ms"] = _ms(remote_latency(emb_url, emb_key, queries, now))
        out["embedded_server_cpu_ms_per_get"] = round((_cpu_s(emb_pid) - c0) / (len(queries) + 50) * 1000, 2)
        c0 = _cpu_s(emb_pid)
        out["embedded_rate"] = await gets_per_second([emb_url], emb_key, queries, now, seconds, conc)
        out["embedded_rate"]["server_cpu_share"] = round((_cpu_s(emb_pid) - c0) / (seconds + 2), 2)
    with pg_serving(root / f"pg-a-{n}", "--database", url) as (a_url, a_pid):
        out["pg_first_get_s"] = round(first_get(a_url, pg_key, queries[0], now), 2)  # builds its copy
        c0, p0 = _cpu_s(a_pid), cpu.seconds()
        out["pg_get_ms"] = _ms(remote_latency(a_url, pg_key, queries, now))
        out["pg_server_cpu_ms_per_get"] = round((_cpu_s(a_pid) - c0) / (len(queries) + 50) * 1000, 2)
        out["pg_db_cpu_ms_per_get"] = _pg_cpu_per_k(cpu, p0, len(queries) + 50)
        c0, p0 = _cpu_s(a_pid), cpu.seconds()
        one = await gets_per_second([a_url], pg_key, queries, now, seconds, conc)
        one["server_cpu_share"] = round((_cpu_s(a_pid) - c0) / (seconds + 2), 2)
        one["db_cpu_ms_per_get"] = _pg_cpu_per_k(cpu, p0, one["ok"])
        one["db_connections"] = connections(url)
        out["pg_rate_1"] = one
        with pg_serving(root / f"pg-b-{n}", "--database", url) as (b_url, b_pid):
            out["pg_second_first_get_s"] = round(first_get(b_url, pg_key, queries[0], now), 2)
            c0, d0, p0 = _cpu_s(a_pid), _cpu_s(b_pid), cpu.seconds()
            two = await gets_per_second([a_url, b_url], pg_key, queries, now, seconds, conc)
            two["servers_cpu_share"] = round((_cpu_s(a_pid) - c0 + _cpu_s(b_pid) - d0) / (seconds + 2), 2)
            two["db_cpu_ms_per_get"] = _pg_cpu_per_k(cpu, p0, two["ok"])
            two["db_connections"] = connections(url)
            out["pg_rate_2"] = two
            out["scaling_2_over_1"] = round(two["gets_per_s"] / max(one["gets_per_s"], 1e-9), 2)
            replica = root / f"pg-b-{n}" / "pg"
            out["copy_mb_per_process"] = round(
                sum(f.stat().st_size for f in replica.rglob("*") if f.is_file()) / 2**20, 1
            )
    return out


async def upload_runs(root: Path, url: str, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    emb_home = root / "emb-uploads"
    emb_home.mkdir(parents=True)
    keys = await SqliteKeyStore.open(emb_home / "service.db")
    emb_key = (await keys.create_key("up", "write")).api_key
    await keys.close()
    link = await PgLink.open(url, max_size=1)
    pg_key = (await PgKeyStore(link).create_key("up", "write")).api_key
    await link.close()
    (root / "files-emb").mkdir()
    (root / "files-pg").mkdir()
    with pg_serving(emb_home) as (emb_url, _):
        out["embedded_small"] = small_uploads([emb_url], emb_key, n, "e")
        big = uploads(emb_url, emb_key, root / "files-emb", 3)
        out["embedded_1mb_median_s"] = round(statistics.median(big["plain"] + big["gzip"]), 3)
    with pg_serving(root / "pg-up-a", "--database", url) as (a_url, _):
        out["pg_small"] = small_uploads([a_url], pg_key, n, "p")
        big = uploads(a_url, pg_key, root / "files-pg", 3)
        out["pg_1mb_median_s"] = round(statistics.median(big["plain"] + big["gzip"]), 3)
        with pg_serving(root / "pg-up-b", "--database", url) as (b_url, _):
            out["pg_small_two_processes_in_turn"] = small_uploads([a_url, b_url], pg_key, n, "q")
    return out


async def run(
    root: Path, sizes: list[int], url: str | None, n_queries: int, seconds: float, conc: int
) -> dict[str, Any]:
    cluster = None
    if url is None:
        cluster = Cluster.create()
        cluster.start()
    try:
        load_before = os.getloadavg()[0]
        results: dict[str, Any] = {"sizes": []}
        for n in sizes:
            if cluster is not None:
                cluster.admin(f"CREATE DATABASE bench_{n}")
            db = cluster.url(f"bench_{n}") if cluster is not None else str(url)
            cpu = PgCpu(cluster.data if cluster is not None else None)
            results["sizes"].append(await one_size(root, n, db, cpu, n_queries, seconds, conc))
            print(json.dumps(results["sizes"][-1]), flush=True)
        if cluster is not None:
            cluster.admin("CREATE DATABASE bench_uploads")
        results["uploads"] = await upload_runs(root, cluster.url("bench_uploads") if cluster else str(url), 100)
        results["cores"] = os.cpu_count()
        results["load_average"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
        return results
    finally:
        if cluster is not None:
            cluster.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--handoffs", default="10000,100000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--database", help="an existing PostgreSQL (default: a private cluster, removed after)")
    parser.add_argument("--dir", type=Path, help="work folder (default: a temp dir, removed after)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(x) for x in args.handoffs.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out = asyncio.run(run(Path(tmp), sizes, args.database, args.queries, args.seconds, args.concurrency))
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
