"""Webhooks and their delivery log in PostgreSQL (``macupos.webhooks``, ``macupos.webhook_deliveries``): the
store of a fleet, on the key store's link. Outside the tenant wall, as the keys are: every server's deliverer
claims the due deliveries of all tenants, ``FOR UPDATE SKIP LOCKED`` so that two never claim the same one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from service.pg.link import PgLink
from service.webhooks.store import Rows, Run, SqlWebhookStore

__all__ = ["PgWebhookStore"]


class PgWebhookStore(SqlWebhookStore):
    hooks = "macupos.webhooks"
    log = "macupos.webhook_deliveries"
    tenant_col = "tenant_id"
    mark = "%s"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(self, link: PgLink, per_tenant: int) -> None:
        super().__init__(per_tenant)
        self.link = link

    def _read(self, sql: str, args: Sequence[Any] = ()) -> Awaitable[Rows]:
        return self.link.fetch(sql, args)

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Run]:
        async with self.link.connection() as conn, self.link.guard(), conn.transaction():

            async def run(sql: str, args: Sequence[Any]) -> Rows:
                cur = await conn.execute(sql, args)
                return [tuple(r) for r in await cur.fetchall()] if cur.description else []

            yield run
