"""The memory service from a client over loopback, beside the local paths on the same data.

A real `macupos serve` process (no rate limit), an httpx client with keep-alive:

- `/v1/get` latency at N synthetic handoffs in one tenant (p50 / p95 / p99), beside the in-process
  `Eywa.get` the CLI runs on the same database, and beside the whole `macupos memory get --json` command;
- gets a second across 10 tenants (each with its own copy of the corpus) from concurrent clients;
- upload and ingest of a 1 MB transcript (plain and gzip), beside `Eywa.ingest` of the same file.

Run: .venv/bin/python -m bench.service_latency [--handoffs 10000] [--queries 500] [--seconds 10]
     [--concurrency 16] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench._harness import wait_serving
from bench._synthetic import build, generate
from bench.latency import pct, query_mix
from bench.synth_transcript import write_transcript
from memory.facade import Eywa
from memory.settings import MemorySettings
from memory.storage.database import Database
from service.keys import SqliteKeyStore

MACUPOS = Path(sys.executable).parent / "macupos"
TENANTS = 10


def _settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_", "CODEX_"))}
    return env | {"MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0"}


async def _prepare(home: Path, n: int) -> tuple[list[str], list[str], datetime]:
    """Ten tenants, each a copy of one n-handoff corpus, and a key each; the query mix and its 'now'."""
    t0 = time.perf_counter()
    corpus = generate(n)
    first = home / "tenants" / "tenant-0" / "memory.db"
    first.parent.mkdir(parents=True)
    db = await Database.open(first)  # the schema, migrated as the server would
    await db.close()
    build(corpus, first)
    for i in range(1, TENANTS):
        (home / "tenants" / f"tenant-{i}").mkdir()
        shutil.copy(first, home / "tenants" / f"tenant-{i}" / "memory.db")
    store = await SqliteKeyStore.open(home / "service.db")
    keys = [(await store.create_key(f"tenant-{i}", "read")).api_key for i in range(TENANTS)]
    await store.close()
    print(f"{TENANTS} tenants of {n} handoffs built in {time.perf_counter() - t0:.1f}s", flush=True)
    mixed, _, _ = query_mix(corpus, random.Random(n), 1000)
    return keys, mixed, datetime.fromtimestamp(corpus.end_ts, UTC)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: what it cost, whatever else the machine ran."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def serving(home: Path, *args: str, log: Path, start_s: float = 60) -> Iterator[tuple[str, int]]:
    """A real `macupos serve` (with ``args``) on a free port, its output in ``log``: (its URL, its pid) once
    /healthz answers, within ``start_s``; stopped after."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [str(MACUPOS), "serve", "--port", "0", "--rate", "0", *args], env=_env(home), stdout=err, stderr=err
        )
    try:
        yield wait_serving(proc, log, r"listening on (\S+)", start_s), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def _ms(samples: list[float]) -> dict[str, float]:
    return {
        "p50": round(pct(samples, 0.5), 3),
        "p95": round(pct(samples, 0.95), 3),
        "p99": round(pct(samples, 0.99), 3),
    }


def remote_latency(url: str, key: str, queries: list[str], now: datetime) -> list[float]:
    out = []
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as c:
        for q in queries[:50]:  # warm: the tenant opens, pages come into the cache
            c.get("/v1/get", params={"q": q, "as_of": now.isoformat()}).raise_for_status()
        for q in queries:
            start = time.perf_counter()
            r = c.get("/v1/get", params={"q": q, "as_of": now.isoformat()})
            out.append(time.perf_counter() - start)
            r.raise_for_status()
    return out


async def local_latency(home: Path, queries: list[str], now: datetime) -> tuple[list[float], float]:
    """Wall time of each in-process `Eywa.get`, and the CPU seconds one took on average."""
    eywa = await Eywa.open(_settings(home))
    out = []
    try:
        for q in queries[:50]:
            await eywa.get(q, as_of=now)
        cpu = time.process_time()
        for q in queries:
            start = time.perf_counter()
            await eywa.get(q, as_of=now)
            out.append(time.perf_counter() - start)
        cpu = (time.process_time() - cpu) / len(queries)
    finally:
        await eywa.close()
    return out, cpu


def healthz_cpu(url: str, pid: int, n: int = 300) -> float:
    """The server's CPU seconds for a request that does nothing: HTTP parsing, routing, the middleware."""
    with httpx.Client(base_url=url, timeout=60) as c:
        for _ in range(30):
            c.get("/healthz")
        cpu0 = _cpu_s(pid)
        for _ in range(n):
            c.get("/healthz")
    return (_cpu_s(pid) - cpu0) / n


def cli_latency(home: Path, queries: list[str], now: datetime, runs: int) -> list[float]:
    out = []
    for q in queries[:runs]:
        start = time.perf_counter()
        subprocess.run(
            [str(MACUPOS), "memory", "get", q, "--as-of", now.isoformat(), "--json"],
            env=_env(home),
            capture_output=True,
            check=True,
            timeout=120,
        )
        out.append(time.perf_counter() - start)
    return out


async def throughput(
    url: str, keys: list[str], queries: list[str], now: datetime, seconds: float, conc: int, client: str = "httpx"
) -> dict[str, Any]:
    """Concurrent clients, each request to the next tenant in turn; warm-up, then `seconds` measured.

    ``client``: httpx (what the tests and the memory clients use) or aiohttp, a load generator that costs
    about a third of httpx's CPU a request, so more of the two cores is left to the server."""
    ok = errors = 0
    measuring = False
    stop = time.monotonic() + 2.0 + seconds

    async def drive(get: Callable[[int], Awaitable[int]]) -> tuple[float, float]:
        async def worker(w: int) -> None:
            nonlocal ok, errors
            i = w
            while time.monotonic() < stop:
                status = await get(i)
                if measuring:
                    if status == 200:
                        ok += 1
                    else:
                        errors += 1
                i += conc

        nonlocal measuring
        tasks = [asyncio.create_task(worker(w)) for w in range(conc)]
        await asyncio.sleep(2.0)  # every tenant opened and warm before counting
        measuring = True
        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        return wall, (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)

    def params(i: int) -> dict[str, str]:
        return {"q": queries[i % len(queries)], "as_of": now.isoformat()}

    if client == "aiohttp":
        import aiohttp

        connector = aiohttp.TCPConnector(limit=conc)
        async with aiohttp.ClientSession(base_url=url, connector=connector) as session:

            async def get_aiohttp(i: int) -> int:
                headers = {"X-API-Key": keys[i % len(keys)]}
                async with session.get("/v1/get", params=params(i), headers=headers) as r:
                    await r.read()
                    return r.status

            wall, client_cpu = await drive(get_aiohttp)
    else:
        limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as c:

            async def get_httpx(i: int) -> int:
                r = await c.get("/v1/get", params=params(i), headers={"X-API-Key": keys[i % len(keys)]})
                return r.status_code

            wall, client_cpu = await drive(get_httpx)
    return {
        "gets_per_s": round(ok / wall, 1),
        "errors": errors,
        "seconds": round(wall, 1),
        "concurrency": conc,
        "client_cpu_share": round(client_cpu / wall, 2),  # cores the load generator itself used
        "client": client,
    }


def uploads(url: str, key: str, root: Path, runs: int) -> dict[str, Any]:
    files = []
    for i in range(runs * 2):
        path = root / f"upload-{i}.jsonl"
        write_transcript(path, 1024 * 1024, session_id=f"upload-{i}", seed=i)
        files.append(path)
    plain, gzipped = [], []
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120) as c:
        for i, path in enumerate(files):
            body = path.read_bytes()
            headers = {}
            if i % 2:
                body, headers = gzip.compress(body, 6), {"Content-Encoding": "gzip"}
            start = time.perf_counter()
            r = c.post("/v1/transcripts", params={"name": f"bench/{path.name}"}, content=body, headers=headers)
            (gzipped if i % 2 else plain).append(time.perf_counter() - start)
            r.raise_for_status()
    return {"files": files, "plain": plain, "gzip": gzipped}


def gets_during_upload(
    url: str, reader: str, writer: str, queries: list[str], now: datetime, root: Path
) -> dict[str, Any]:
    """Gets of one tenant while another tenant's 20 MB transcript uploads and ingests (on a worker thread)."""
    big = root / "big.jsonl"
    write_transcript(big, 20 * 1024 * 1024, session_id="big", seed=99)
    took: list[float] = []

    def upload() -> None:
        with httpx.Client(base_url=url, headers={"X-API-Key": writer}, timeout=300) as c:
            start = time.perf_counter()
            c.post("/v1/transcripts", params={"name": "bench/big.jsonl"}, content=big.read_bytes()).raise_for_status()
            took.append(time.perf_counter() - start)

    samples = []
    thread = threading.Thread(target=upload)
    with httpx.Client(base_url=url, headers={"X-API-Key": reader}, timeout=60) as c:
        thread.start()
        i = 0
        while thread.is_alive():
            start = time.perf_counter()
            c.get("/v1/get", params={"q": queries[i % len(queries)], "as_of": now.isoformat()}).raise_for_status()
            samples.append(time.perf_counter() - start)
            i += 1
    thread.join()
    return {
        "upload_20mb_s": round(took[0], 2),
        "gets": len(samples),
        "get_ms": _ms(samples),
        "max_ms": round(max(samples) * 1000, 1),
    }


async def local_ingest(files: list[Path], root: Path) -> list[float]:
    eywa = await Eywa.open(_settings(root / "local-ingest"))
    out = []
    try:
        for path in files:
            start = time.perf_counter()
            await eywa.ingest([path], use_llm=False)
            out.append(time.perf_counter() - start)
    finally:
        await eywa.close()
    return out


async def run(root: Path, n: int, n_queries: int, seconds: float, conc: int) -> dict[str, Any]:
    home = root / "home"
    keys, queries, now = await _prepare(home, n)
    queries = queries[:n_queries]
    tenant0 = home / "tenants" / "tenant-0"
    local, local_cpu = await local_latency(tenant0, queries, now)
    cli = cli_latency(tenant0, queries, now, 5)
    load_before = os.getloadavg()[0]
    with serving(home, log=home.parent / "serve.log") as (url, pid):
        bare_cpu = healthz_cpu(url, pid)
        cpu0 = _cpu_s(pid)
        remote = remote_latency(url, keys[0], queries, now)
        cpu_per_get = (_cpu_s(pid) - cpu0) / (len(queries) + 50)
        cpu1 = _cpu_s(pid)
        rates = []
        for client in ("httpx", "aiohttp"):
            rate = await throughput(url, keys, queries, now, seconds, conc, client)
            rate["server_cpu_share"] = round((_cpu_s(pid) - cpu1) / (rate["seconds"] + 2.0), 2)
            rates.append(rate)
            cpu1 = _cpu_s(pid)
        store = await SqliteKeyStore.open(home / "service.db")
        writer = (await store.create_key("uploads", "write")).api_key
        await store.close()
        up = uploads(url, writer, root, 5)
        during = gets_during_upload(url, keys[1], writer, queries, now, root)
    ingest = await local_ingest(up["files"], root)
    return {
        "handoffs": n,
        "queries": len(queries),
        "get_ms": {"remote": _ms(remote), "local_eywa_get": _ms(local), "local_cli_process": _ms(cli)},
        "cpu_ms": {
            "server_per_get": round(cpu_per_get * 1000, 3),
            "server_per_healthz": round(bare_cpu * 1000, 3),
            "local_eywa_get": round(local_cpu * 1000, 3),
        },
        "throughput": rates,
        "upload_1mb_s": {
            "plain_median": round(statistics.median(up["plain"]), 3),
            "gzip_median": round(statistics.median(up["gzip"]), 3),
            "max": round(max(up["plain"] + up["gzip"]), 3),
            "local_ingest_median": round(statistics.median(ingest), 3),
        },
        "gets_during_20mb_upload": during,
        "cores": os.cpu_count(),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],  # other work on the machine
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--handoffs", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds of the throughput run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temp dir, removed after)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        result = asyncio.run(run(Path(tmp), args.handoffs, args.queries, args.seconds, args.concurrency))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    g = result["get_ms"]
    print(f"\n/v1/get at {result['handoffs']} handoffs, {result['queries']} mixed queries (ms):")
    print(f"{'path':<34} {'p50':>8} {'p95':>8} {'p99':>8}")
    for label, key in (
        ("remote (HTTP, keep-alive)", "remote"),
        ("local Eywa.get (in process)", "local_eywa_get"),
        ("local `macupos memory get` command", "local_cli_process"),
    ):
        print(f"{label:<34} {g[key]['p50']:>8.2f} {g[key]['p95']:>8.2f} {g[key]['p99']:>8.2f}")
    cpu = result["cpu_ms"]
    print(
        f"CPU per request: server /v1/get {cpu['server_per_get']} ms, server /healthz {cpu['server_per_healthz']} ms, "
        f"in-process Eywa.get {cpu['local_eywa_get']} ms"
    )
    for t in result["throughput"]:
        print(
            f"throughput ({t['client']} client): {t['gets_per_s']} gets/s over {TENANTS} tenants, "
            f"{t['concurrency']} concurrent clients, {t['seconds']} s, {t['errors']} errors (server used "
            f"{t['server_cpu_share']} cores, the client {t['client_cpu_share']})"
        )
    u = result["upload_1mb_s"]
    print(
        f"upload + ingest of 1 MB: median {u['plain_median']} s plain, {u['gzip_median']} s gzip, max {u['max']} s; "
        f"local Eywa.ingest median {u['local_ingest_median']} s"
    )
    d = result["gets_during_20mb_upload"]
    print(
        f"while another tenant's 20 MB transcript uploaded and ingested ({d['upload_20mb_s']} s): {d['gets']} gets, "
        f"p50 {d['get_ms']['p50']} ms, p95 {d['get_ms']['p95']} ms, max {d['max_ms']} ms"
    )
    print(f"load average before / after: {result['load_average']} on {result['cores']} cores")


if __name__ == "__main__":
    main()
