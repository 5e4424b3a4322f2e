"""Property: five tenants upload, get, search, show, forget, script, list and export at random, at the same
time, through one server whose tenant LRU holds only two of them; no tenant ever sees another's session ids,
text or counts, and each sees exactly its own."""

from __future__ import annotations

import asyncio
import io
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.settings import Limits
from tests.service.conftest import Server, running_service, transcript_bytes

TENANTS = [f"tenant-{i}" for i in range(5)]
SESSIONS = ["s-a", "s-b", "s-c", "notes v1"]  # shared by all tenants: the same id must stay apart
MARKERS = 4


def marker(tenant: int, slot: int) -> str:
    return f"mk{'abcde'[tenant]}{'qrst'[slot]}zz"  # one word the tokenizer keeps, unique to its tenant


ALL_MARKERS = {marker(t, m): t for t in range(len(TENANTS)) for m in range(MARKERS)}

tenant_ix = st.integers(0, len(TENANTS) - 1)
session_ix = st.integers(0, len(SESSIONS) - 1)
marker_ix = st.integers(0, MARKERS - 1)
probe = st.sampled_from(sorted(ALL_MARKERS))
OPS = st.one_of(
    st.tuples(st.just("upload"), tenant_ix, session_ix, marker_ix),
    st.tuples(st.just("get"), tenant_ix, probe),
    st.tuples(st.just("search"), tenant_ix, probe),
    st.tuples(st.just("mcp_search"), tenant_ix, probe),
    st.tuples(st.just("show"), tenant_ix, session_ix),
    st.tuples(st.just("forget"), tenant_ix, session_ix),
    st.tuples(st.just("remember"), tenant_ix, marker_ix),
    st.tuples(st.just("recall"), tenant_ix),
    st.tuples(st.just("list"), tenant_ix),
    st.tuples(st.just("stats"), tenant_ix),
    st.tuples(st.just("export"), tenant_ix),
)


@dataclass
class Model:
    tenant: int
    live: dict[str, str] = field(default_factory=dict)  # session id -> the marker its content names
    forgotten: set[str] = field(default_factory=set)
    facts: set[str] = field(default_factory=set)

    def check_text(self, text: str) -> None:
        """Another tenant's words never appear; session ids shown are this tenant's live ones."""
        foreign = [m for m, t in ALL_MARKERS.items() if t != self.tenant and m in text]
        assert foreign == [], (self.tenant, foreign)

    def check_ids(self, ids: list[str]) -> None:
        assert set(ids) <= set(self.live), (self.tenant, ids, self.live)


async def _mcp_search(c: httpx.AsyncClient, query: str) -> str:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "eywa_search", "arguments": {"query": query}},
    }
    r = await c.post("/mcp", json=call, headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    return "".join(part.get("text", "") for part in r.json()["result"]["content"])


async def _step(c: httpx.AsyncClient, m: Model, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "upload":
        sid, word = SESSIONS[op[2]], marker(m.tenant, op[3])
        r = await c.post("/v1/transcripts", params={"name": f"{sid}.jsonl"}, content=transcript_bytes(sid, word))
        assert r.status_code == 200, r.text
        if sid in m.forgotten:
            assert r.json()["sessions"] == []
        else:
            assert r.json()["sessions"] == [sid]
            m.live[sid] = word
    elif kind == "get":
        r = await c.get("/v1/get", params={"q": op[2], "days_back": "100000", "as_of": "2026-03-03T00:00:00Z"})
        m.check_text(r.text)
        ids = [x["session_id"] for x in r.json()]
        m.check_ids(ids)
        if ALL_MARKERS[op[2]] == m.tenant and op[2] in m.live.values():
            assert ids and m.live[ids[0]] == op[2]
    elif kind in {"search", "mcp_search"}:
        if kind == "search":
            r = await c.get("/v1/search", params={"q": op[2]})
            text, ids = r.text, [h["session_id"] for h in r.json()]
        else:
            text = (await _mcp_search(c, op[2])).replace(f"matches {op[2]!r}", "")  # its own query echoed
            ids = [line[3:] for line in text.splitlines() if line.startswith("## ")]
        m.check_text(text)
        m.check_ids(ids)
        assert sorted(ids) == sorted(s for s, w in m.live.items() if w == op[2])
    elif kind == "show":
        sid = SESSIONS[op[2]]
        r = await c.get(f"/v1/sessions/{sid}")
        m.check_text(r.text)
        assert r.status_code == (200 if sid in m.live else 404)
        if sid in m.live:
            assert m.live[sid] in r.text
    elif kind == "forget":
        sid = SESSIONS[op[2]]
        r = await c.delete(f"/v1/sessions/{sid}")
        assert r.status_code == (200 if sid in m.live else 404), r.text
        if sid in m.live:
            del m.live[sid]
            m.forgotten.add(sid)
    elif kind == "remember":
        word = marker(m.tenant, op[2])
        script = f"catch {{remember fact-{word} user Fact predicate likes object {word}}}"
        assert (await c.post("/v1/script", json={"script": script})).status_code == 200
        m.facts.add(word)
    elif kind == "recall":
        out = (await c.post("/v1/script", json={"script": "recall all"})).json()["output"]
        m.check_text(out)
        assert all(w in out for w in m.facts)
    elif kind == "list":
        r = await c.get("/v1/handoffs", params={"limit": "500"})
        m.check_text(r.text)
        assert sorted(h["session_id"] for h in r.json()["handoffs"]) == sorted(m.live)
    elif kind == "stats":
        stats = (await c.get("/v1/stats")).json()
        assert sum(stats["sessions"].values()) == len(m.live)
        assert stats["forgotten"] == len(m.forgotten) and stats["facts"]["memories"] == len(m.facts)
    elif kind == "export":
        r = await c.get("/v1/export")
        with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
            texts = [f.read().decode() for x in tar.getmembers() if (f := tar.extractfile(x)) is not None]
            handoffs = [x.name for x in tar.getmembers() if x.name.startswith("handoffs/")]
        for text in texts:
            m.check_text(text)
        assert len(handoffs) == len(m.live)


async def run_program(srv: Server, program: list[tuple[Any, ...]]) -> None:
    """Each tenant's steps of ``program`` in order, the tenants side by side; then every model checked."""
    models = [Model(i) for i in range(len(TENANTS))]
    keys = [await srv.add_key(name) for name in TENANTS]

    async def tenant_runs(i: int) -> None:
        async with srv.client(keys[i]) as c:
            for op in program:
                if op[1] == i:
                    await _step(c, models[i], op)

    await asyncio.gather(*(tenant_runs(i) for i in range(len(TENANTS))))
    await _final_check(srv, keys, models)


async def _run(home: Path, program: list[tuple[Any, ...]]) -> None:
    async with running_service(home, limits=Limits(rate_per_s=0, max_open_tenants=2)) as srv:
        await run_program(srv, program)


async def _final_check(srv: Server, keys: list[str], models: list[Model]) -> None:
    for key, m in zip(keys, models, strict=True):
        async with srv.client(key) as c:
            for op in [("list", m.tenant), ("stats", m.tenant), ("recall", m.tenant), ("export", m.tenant)]:
                await _step(c, m, op)
            for word in ALL_MARKERS:
                await _step(c, m, ("search", m.tenant, word))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=st.lists(OPS, min_size=10, max_size=40))
def test_no_tenant_ever_sees_another_tenants_sessions_text_or_counts(program: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_run(Path(tmp) / "home", program))
