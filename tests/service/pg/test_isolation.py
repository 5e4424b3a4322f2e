"""The tenant isolation property of the service (tests/service/test_isolation.py) on PostgreSQL: five tenants
upload, get, search (REST and MCP), show, forget, script, list, stat and export at random, at the same time,
through one server whose tenant LRU holds only two of their copies; no tenant ever sees another's session
ids, text or counts, and each sees exactly its own."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.settings import Limits
from tests.service.pg.cluster import Cluster
from tests.service.pg.conftest import fresh_database, running_pg_service
from tests.service.test_isolation import OPS, run_program


async def _run(home: Path, url: str, program: list[tuple[Any, ...]]) -> None:
    async with running_pg_service(home, url, limits=Limits(rate_per_s=0, max_open_tenants=2)) as srv:
        await run_program(srv, program)


def test_no_tenant_ever_sees_another_tenants_sessions_text_or_counts_on_postgresql(pg_cluster: Cluster) -> None:
    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(program=st.lists(OPS, min_size=10, max_size=40))
    def check(program: list[tuple[Any, ...]]) -> None:
        with tempfile.TemporaryDirectory() as tmp, fresh_database(pg_cluster) as url:
            asyncio.run(_run(Path(tmp) / "home", url, program))

    check()
