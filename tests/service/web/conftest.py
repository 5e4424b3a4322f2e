"""The memory pages under test: a real uvicorn on a free 127.0.0.1 port (the service with its tenants, or
``--local`` over one memory home), real httpx clients that keep cookies as a browser does, and memory
seeded with hostile text: every handoff, transcript line and fact carries script and HTML payloads."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from memory.facade import Eywa
from memory.facts.api import FactsApi
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from memory.settings import MemorySettings
from service.app import build_app
from service.settings import Limits, ServiceSettings
from service.tenants import TenantStore
from service.web.local import LocalTenantStore
from service.web.settings import WebSettings
from tests.service.conftest import claude_lines, serving

__all__ = [
    "BOT_TOKEN",
    "OWNER_ID",
    "PAYLOADS",
    "LocalServer",
    "csrf_of",
    "memory_settings",
    "running_local",
    "seed_memory",
]

BOT_TOKEN = "123456:TEST-TOKEN-for-the-mini-app"
OWNER_ID = 4242
# Each would set window.__pwned (or open a dialog) if it ever ran: the browser tests look for both.
PAYLOADS = (
    "<script>window.__pwned=1</script>",
    "<img src=x onerror=window.__pwned=1>",
    '"><svg onload=window.__pwned=1>',
    "[click me](javascript:window.__pwned=1)",
    "<a href=\"javascript:alert('pwned')\">link</a>",
    "{{7*7}} {% raw %}",
)
HOSTILE = " ".join(PAYLOADS)


def memory_settings(home: Path) -> MemorySettings:
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def seed_memory(home: Path, *, big_transcript_bytes: int = 0) -> dict[str, str]:
    """Sessions (a main one with a subagent, a Codex rollout linked to it), handoffs and facts, all hostile.

    Returns the ids: main, subagent, codex, imported (a handoff without a transcript), big (when asked)."""
    settings = memory_settings(home)
    src = home / "claude" / "projects" / "-srv-app"
    src.mkdir(parents=True, exist_ok=True)
    main = "web-main-1"
    turns = [(f"fix the zeppelin exporter {HOSTILE}", f"done: zeppelin fixed {HOSTILE}") for _ in range(3)]
    (src / f"{main}.jsonl").write_text("\n".join(claude_lines(main, turns)) + "\n", encoding="utf-8")
    sub = src / main / "subagents"
    sub.mkdir(parents=True)
    agent = "agent-a1"
    lines = [json.loads(x) for x in claude_lines(main, [("look into the exporter tests", "the tests pass")])]
    for line in lines:
        line["isSidechain"] = True
        line["agentId"] = "a1"
    (sub / f"{agent}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    ids = {"main": main, "subagent": f"{main}/{agent}"}
    if big_transcript_bytes:  # long turns (said text is kept whole, unlike tool output), so its markdown is big
        big = "web-big-1"
        words = "the exporter streams rows to the warehouse and retries on timeouts " * 40
        n = max(1, big_transcript_bytes // (2 * len(words)))
        said = [(f"turn {i}: {words} {HOSTILE}", f"answer {i}: {words}") for i in range(n)]
        (src / f"{big}.jsonl").write_text("\n".join(claude_lines(big, said)) + "\n", encoding="utf-8")
        ids["big"] = big
    codex = Path(__file__).parents[2] / "memory" / "fixtures" / "codex"
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([src, codex], use_llm=False)
        rollout = await eywa.db.read(
            lambda conn: conn.execute("SELECT session_id FROM sessions WHERE kind = 'codex' ORDER BY 1").fetchone()
        )
        ids["codex"] = str(rollout[0])
        await eywa.link(ids["codex"], parent_id=main)  # as the relay links the rollouts a session caused
        imported = Handoff(
            session_id="web-imported-1",
            date="2026-03-01T09:00:00+00:00",
            headline=f"Imported {HOSTILE}",
            projects=["billing"],
            keywords=["invoice"],
            substance=2,
            what_happened=[f"Switched the invoices {HOSTILE}"],
        )
        folder = home / "seed-import"
        folder.mkdir()
        (folder / "h.md").write_text(to_markdown(imported), encoding="utf-8")
        await eywa.import_dir(folder)
        # An imported handoff is 'kept'; this one waits for review like a fresh one.
        async with eywa.db.write() as conn:
            await conn.execute("UPDATE handoffs SET review = 'pending' WHERE session_id = ?", (imported.session_id,))
    ids["imported"] = imported.session_id
    facts = await FactsApi.from_settings(settings)
    try:
        script = (
            "remember coffee user Fact predicate drinks object {V60 " + "<img src=x onerror=window.__pwned=1>" + "}\n"
            "remember editor user Fact predicate uses object Helix confidence 0.9\n"
            "link user eywa works-on\n"
            "remember deploy eywa Fact predicate deploys-to object fly\n"
        )
        result = await facts.run_script(script, provenance="test")
        assert result.ok, result.error
    finally:
        await facts.close()
    return ids


@dataclass(slots=True)
class LocalServer:
    url: str
    home: Path
    token: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=60, follow_redirects=False)


@asynccontextmanager
async def serve_app(settings: ServiceSettings, store: TenantStore) -> AsyncIterator[str]:
    async def open_store() -> TenantStore:
        return store

    async with serving(build_app(settings, open_store)) as url:
        yield url


@asynccontextmanager
async def running_local(home: Path, *, telegram: bool = True) -> AsyncIterator[LocalServer]:
    """`macupos serve --local` over ``home``: the pages alone, a one-time link, Telegram login for OWNER_ID."""
    token = "one-time-" + home.name
    web = WebSettings(
        local=True,
        login_token=token,
        telegram_token=BOT_TOKEN if telegram else "",
        telegram_users=frozenset({OWNER_ID}) if telegram else frozenset(),
    )
    settings = ServiceSettings(home=home, port=0, limits=Limits(rate_per_s=0), web=web)
    async with serve_app(settings, LocalTenantStore(memory_settings(home))) as url:
        yield LocalServer(url, home, token)
