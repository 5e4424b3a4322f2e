"""The memory service on a real PostgreSQL: one private cluster for the test session (tests/service/pg/cluster.py),
a fresh database for each test (copied from a migrated template), the service in this process or as real
`macupos serve --database` processes."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import psycopg
import pytest

from service.app import build_app
from service.pg.keys import PgKeyStore
from service.pg.link import PgLink
from service.pg.store import PgTenantStore, pg_store
from service.settings import Limits, ServiceSettings
from service.tenants import Scope
from tests.service.conftest import Server, memory_settings, serving
from tests.service.pg.cluster import Cluster
from tests.service.serve_proc import MACUPOS, serve_env, stop, wait_listening

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


@asynccontextmanager
async def tenant_store(home: Path, url: str) -> AsyncIterator[PgTenantStore]:
    """The tenant store one service process keeps on the database ``url`` (its local copies under ``home``)."""
    settings = ServiceSettings(home=home, database_url=url)
    store = cast(PgTenantStore, await pg_store(settings, memory_settings(home))())
    try:
        yield store
    finally:
        await store.close()


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
        yield proc, wait_listening(proc, log, offset=offset, timeout_s=120)
    finally:
        stop(proc, grace_s=60)
