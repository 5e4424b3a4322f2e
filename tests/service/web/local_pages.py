"""What the memory page tests over real HTTP share: a `serve --local` with a client already logged in by its
one-time link, Telegram's signed initData for the owner, and the check that no hostile payload reached a page
as markup."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from service.web.initdata import sign_init_data
from tests.service.web.conftest import BOT_TOKEN, OWNER_ID, running_local

# The seeded payloads (tests.service.web.conftest.PAYLOADS) as they would stand had they become markup.
RAW = ("<script>window.__pwned", "<img src=x onerror", "<svg onload", 'href="javascript')


def assert_no_markup(text: str) -> None:
    """No hostile payload stands in ``text`` as markup: each is escaped, or gone."""
    for raw in RAW:
        assert raw not in text, raw


@asynccontextmanager
async def logged_in_local(home: Path) -> AsyncIterator[httpx.AsyncClient]:
    """`serve --local` over ``home`` and a client of it logged in with the one-time link."""
    async with running_local(home) as srv, srv.client() as web:
        await web.get(f"/login?token={srv.token}")
        yield web


def telegram_init_data() -> str:
    """Mini App initData for the owner (Ann), signed with the bot's token five seconds ago."""
    fields = {"user": json.dumps({"id": OWNER_ID, "first_name": "Ann"}), "auth_date": str(int(time.time() - 5))}
    return sign_init_data(fields, BOT_TOKEN)
