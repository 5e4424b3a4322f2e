"""Live Review and Sessions over real HTTP: the event streams report a handoff or a session that arrives
after the page was drawn, follow keeps, outlive the page's request deadline (the stream holds no lease and
no deadline of the page), end on a logout, and are behind the login like the pages. Every wait is bounded
by a timeout; the server's polls (every 2 s) are what the reads wait for."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from html import unescape
from pathlib import Path

import httpx

from memory.facade import Eywa
from service.settings import Limits, ServiceSettings
from service.web.local import LocalTenantStore
from service.web.settings import WebSettings
from tests.service.conftest import claude_lines
from tests.service.web.conftest import csrf_of, memory_settings, running_local, seed_memory, serve_app
from tests.service.web.local_pages import logged_in_local
from tests.service.web.test_review_page import add_pending

WAIT_S = 20  # several polls: the longest any read below may take


class Events:
    """A text/event-stream read as (event, data) pairs, comments counted apart."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines: AsyncIterator[str] = response.aiter_lines()
        self.comments = 0

    async def next(self) -> tuple[str, dict[str, object]]:
        name, data = "message", ""
        async with asyncio.timeout(WAIT_S):
            async for line in self.lines:
                if line.startswith(":"):
                    self.comments += 1
                elif line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    data = line.removeprefix("data: ")
                elif line == "" and data:
                    return name, json.loads(data)
        raise AssertionError("the stream ended without an event")

    async def until(self, name: str, **want: object) -> dict[str, object]:
        while True:
            got, data = await self.next()
            if got == name and all(data.get(k) == v for k, v in want.items()):
                return data

    async def comments_at_least(self, n: int) -> None:
        async with asyncio.timeout(WAIT_S):
            async for line in self.lines:
                self.comments += line.startswith(":")
                if self.comments >= n:
                    return


def events_url(html: str) -> str:
    found = re.search(r'data-events="([^"]+)"', html)
    assert found, "the page names no event stream"
    return unescape(found.group(1))


async def test_review_events_report_a_new_handoff_and_a_keep(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    async with logged_in_local(home) as web:
        page = (await web.get("/review")).text
        total = int(re.search(r'<span id="total">(\d+)</span>', page).group(1))  # type: ignore[union-attr]
        async with web.stream("GET", events_url(page)) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert stream.headers["cache-control"] == "no-store"
            events = Events(stream)
            assert await events.until("review") == {"pending": total, "new": 0}
            (name,) = await add_pending(home, "live-new-1")
            assert await events.until("review", new=1) == {"pending": total + 1, "new": 1}
            kept = await web.post("/review", data={"csrf": csrf_of(page), "op": "keep", "id": name})
            assert kept.status_code == 303
            assert await events.until("review", new=0) == {"pending": total, "new": 0}


async def test_sessions_events_report_a_session_newer_than_the_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    async with logged_in_local(home) as web:
        page = (await web.get("/sessions")).text
        assert 'id="live"' in page and "/sessions/events?after=" in page
        async with web.stream("GET", events_url(page)) as stream:
            events = Events(stream)
            assert await events.until("sessions") == {"new": 0}
            src = home / "claude" / "projects" / "-srv-later"
            src.mkdir(parents=True)
            lines = claude_lines("web-later-1", [("a later question", "a later answer")], day="2026-11-30")
            (src / "web-later-1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            async with await Eywa.open(memory_settings(home)) as eywa:
                await eywa.ingest([src], use_llm=False)
            assert await events.until("sessions", new=1) == {"new": 1}


async def test_a_stream_outlives_the_page_deadline_and_ends_at_logout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    web_settings = WebSettings(local=True, login_token="one-time-live")
    settings = ServiceSettings(home=home, port=0, limits=Limits(rate_per_s=0, request_timeout_s=1), web=web_settings)
    store = LocalTenantStore(memory_settings(home))
    async with serve_app(settings, store) as url, httpx.AsyncClient(base_url=url, timeout=60) as web:
        await web.get("/login?token=one-time-live")
        csrf = csrf_of((await web.get("/review")).text)
        async with web.stream("GET", "/review/events") as stream:
            events = Events(stream)
            await events.until("review")
            await events.comments_at_least(3)  # 2 polls of 2 s later: well past the 1 s deadline
            assert (await web.post("/logout", data={"csrf": csrf})).status_code == 303
            assert await events.until("end") == {"reason": "logged out"}


async def test_the_event_streams_need_a_login(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    async with running_local(home) as srv, srv.client() as web:
        for path in ("/review/events", "/sessions/events"):
            refused = await web.get(path)
            assert refused.status_code == 303 and refused.headers["location"].startswith("/login?next=")
