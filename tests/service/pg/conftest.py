"""The memory service on a real PostgreSQL: one private cluster for the test session (tests/service/pg/cluster.py),
a fresh database for each test (copied from a migrated template), the service in this process or as real
`macupos serve --database` processes."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from service.app import build_app
from service.pg.keys import PgKeyStore
from service.pg.link import PgLink
from service.pg.store import pg_store
from service.settings import Limits, ServiceSettings
from service.tenants import Scope
from tests.cli_env import cli_env
from tests.service.conftest import Server, memory_settings, serving
from tests.service.pg.cluster import Cluster

MACUPOS = Path(sys.executable).parent / "macupos"
_names = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    cluster = Cluster.create()
    try:
        cluster.start()
        cluster.admin("CREATE DATABASE macupos_template")

        async def migrate() -> None:
            link = await PgLink.open(cluster.url("macupos_template"), max_size=1)
            await link.close()

        asyncio.run(migrate())
        yield cluster
    finally:
        cluster.remove()


@contextmanager
def fresh_database(cluster: Cluster) -> Iterator[str]:
    """A new database of the schema (copied from the migrated template), with its own database id; dropped after."""
    name = f"t{os.getpid()}_{next(_names)}"
    cluster.admin(f"CREATE DATABASE {name} TEMPLATE macupos_template")
    url = cluster.url(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE macupos.info SET value = gen_random_uuid()::text WHERE key = 'database_id'")
    try:
        yield url
    finally:
        cluster.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    with fresh_database(pg_cluster) as url:
        yield url


async def add_key(url: str, tenant: str, scope: Scope = "write") -> str:
    link = await PgLink.open(url, max_size=1)
    try:
        return (await PgKeyStore(link).create_key(tenant, scope)).api_key
    finally:
        await link.close()


@dataclass(slots=True)
class PgServer(Server):
    database: str = ""

    async def add_key(self, tenant: str, scope: Scope = "write") -> str:
        key = await add_key(self.database, tenant, scope)
        self.keys[tenant if scope == "write" else f"{tenant}:{scope}"] = key
        return key


@asynccontextmanager
async def running_pg_service(home: Path, url: str, **settings: object) -> AsyncIterator[PgServer]:
    """The app on PostgreSQL, served (:func:`tests.service.conftest.serving`)."""
    limits = settings.pop("limits", Limits(rate_per_s=0))
    service = ServiceSettings(home=home, port=0, limits=limits, database_url=url, **settings)  # type: ignore[arg-type]
    async with serving(build_app(service, pg_store(service, memory_settings(home))), timeout_s=60) as base:
        yield PgServer(base, home, database=url)


def serve_env(home: Path) -> dict[str, str]:
    return cli_env(home, HOME=str(home.parent))


@contextmanager
def serve_process(home: Path, url: str, log: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A real `macupos serve --database URL` process on a free port; (the process, its base URL)."""
    home.mkdir(parents=True, exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [str(MACUPOS), "-v", "serve", "--port", "0", "--rate", "0", "--no-web", "--database", url, *args],
            env=serve_env(home),
            stdout=err,
            stderr=err,
        )
    try:
        yield proc, wait_listening(proc, log, offset)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def wait_listening(proc: subprocess.Popen[bytes], log: Path, offset: int = 0) -> str:
    """The URL a starting `macupos serve` announces (in its log past ``offset``), once /healthz answers."""
    deadline = time.monotonic() + 120
    url = None
    while url is None:
        text = log.read_bytes()[offset:].decode(errors="replace")
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", text)
        if found:
            url = found.group(1)
        elif proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"macupos serve did not start:\n{text[-4000:]}")
        else:
            time.sleep(0.05)  # polling a file another process writes; bounded by the deadline above
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return url
        except httpx.TransportError:
            time.sleep(0.05)  # bounded by the deadline
    raise AssertionError("macupos serve did not answer /healthz")
