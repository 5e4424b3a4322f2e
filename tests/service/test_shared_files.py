"""`macupos serve` shares a tenant's files with other processes and never loses a write it answered 2xx.

Real processes side by side: the server (and `serve --local`) as a subprocess, the CLI and plain sqlite3
beside it. The server's lock on the database is read from /proc/locks after every route, MCP call and page;
the soaks take writes for ROUNDS rounds while other processes open and close the same file, then kill -9
the server and start it again: every acknowledged write is there and SQLite's integrity check says ok.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.locks import holds_sqlite_lock
from tests.service.conftest import transcript_bytes
from tests.service.serve_proc import cli, serving
from tests.service.web.conftest import csrf_of
from tests.soak import ROUNDS, Beside, integrity, visible_rows

QUERY_TIME = "2026-03-05T00:00:00Z"


def _key(home: Path, tenant: str, scope: str = "write") -> str:
    made = cli(home, "serve", "keys", "create", "--tenant", tenant, "--scope", scope, "--json")
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["api_key"])


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()  # SIGKILL, as a power cut: no lifespan, no close
    proc.wait(timeout=30)


async def test_the_server_holds_its_lock_after_every_route_mcp_call_and_page(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = _key(home, "alice", "admin")  # admin: /metrics too
    db = home / "tenants" / "alice" / "memory.db"
    with serving(home, tmp_path / "serve.log") as (proc, url):

        def still_held(what: str) -> None:
            assert holds_sqlite_lock(proc.pid, db), f"the server lost its lock on {db} after {what}"

        async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": key}, timeout=60) as c:
            up = await c.post("/v1/transcripts", params={"name": "s1.jsonl"}, content=transcript_bytes("s1", "zebra"))
            assert up.status_code == 200, up.text
            still_held("POST /v1/transcripts")
            exported = await c.get("/v1/export")
            still_held("GET /v1/export")
            with tarfile.open(fileobj=io.BytesIO(exported.content)) as tar:
                handoff = next(m for m in tar.getmembers() if m.name.endswith(".md"))
                markdown = tar.extractfile(handoff).read()  # type: ignore[union-attr]
            calls: list[tuple[str, str, dict[str, object]]] = [
                ("POST", "/v1/transcripts", {"params": {"name": "s2.jsonl"}, "content": transcript_bytes("s2", "yak")}),
                ("POST", "/v1/handoffs", {"params": {"name": "s1.md"}, "content": markdown}),
                ("POST", "/v1/script", {"json": {"script": "remember ed user Fact predicate editor object Helix"}}),
                ("GET", "/v1/get", {"params": {"q": "zebra", "as_of": QUERY_TIME}}),
                ("GET", "/v1/search", {"params": {"q": "zebra"}}),
                ("GET", "/v1/sessions/s1", {}),
                ("GET", "/v1/handoffs", {}),
                ("GET", "/v1/stats", {}),
                ("GET", "/v1/facts/tier", {}),
                ("GET", "/v1/openapi.json", {}),
                ("GET", "/metrics", {}),
                ("DELETE", "/v1/sessions/s2", {}),
            ]
            for method, path, kw in calls:
                answer = await c.request(method, path, **kw)  # type: ignore[arg-type]
                assert answer.status_code == 200, f"{method} {path}: {answer.status_code} {answer.text}"
                still_held(f"{method} {path}")

        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            still_held("MCP initialize")
            for tool, args in (
                ("eywa_get", {"query": "zebra"}),
                ("eywa_search", {"query": "zebra"}),
                ("eywa_show", {"session_id": "s1"}),
                ("eywa_extract", {"session_id": "s1"}),
                ("memory", {"script": "remember tea user Fact predicate drinks object sencha"}),
            ):
                result = await session.call_tool(tool, args)
                assert not result.is_error, f"{tool}: {result.content}"
                still_held(f"MCP {tool}")

        async with httpx.AsyncClient(base_url=url, timeout=60, follow_redirects=False) as web:
            page = await web.get("/login")
            form_token = re.search(r'name="form_token" value="([^"]+)"', page.text)
            assert form_token
            login = await web.post("/login", data={"form_token": form_token.group(1), "api_key": key, "next": "/"})
            assert login.status_code == 303
            for path in ("/", "/search?q=zebra", "/sessions", "/sessions/s1", "/review", "/facts", "/cost", "/stats"):
                assert (await web.get(path)).status_code == 200, path
                still_held(f"GET {path}")
            csrf = csrf_of((await web.get("/review")).text)
            kept = await web.post("/review", data={"op": "keep", "id": "s1", "csrf": csrf})
            assert kept.status_code == 303
            still_held("POST /review")
            fact = await web.post("/facts", data={"op": "forget", "id": "tea", "csrf": csrf})
            assert fact.status_code == 303
            still_held("POST /facts")
    assert integrity(db) == "ok"


def test_writes_answered_2xx_survive_other_processes_on_the_file_and_a_kill(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = _key(home, "alice")
    tenant = home / "tenants" / "alice"
    beside = Beside(tenant, tmp_path / "beside")
    beside.scratch.mkdir()
    uploaded: list[str] = []
    remembered: list[str] = []
    log = tmp_path / "serve.log"
    with serving(home, log) as (proc, url), httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as c:
        first = c.post("/v1/stats")  # method not allowed: the tenant is not opened by a refused request
        assert first.status_code == 405
        for n in range(ROUNDS):
            if n:  # the tenant's file exists after the first write
                beside.start(n)
            if n % 2 == 0:
                sid = f"up-{n:04d}"
                answer = c.post("/v1/transcripts", params={"name": f"{sid}.jsonl"}, content=transcript_bytes(sid, "w"))
                uploaded.append(sid)
            else:
                mid = f"fact-{n:04d}"
                answer = c.post("/v1/script", json={"script": f"remember {mid} user Fact predicate n object {n}"})
                remembered.append(mid)
            assert answer.status_code == 200, f"round {n}: {answer.status_code} {answer.text}"
            if n:
                beside.finish()
            # Acknowledged means every other process reads it too, now, not after some restart.
            if n % 10 == 0 or n == ROUNDS - 1:
                assert holds_sqlite_lock(proc.pid, beside.db), f"round {n}: the server lost its lock"
                seen = visible_rows(beside.db, "SELECT session_id FROM sessions")
                assert set(uploaded) <= seen, f"round {n}: acknowledged uploads another process cannot read"
        _kill(proc)
    again = tmp_path / "serve-again.log"
    with serving(home, again) as (proc, url), httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as c:
        for sid in uploaded:
            assert c.get(f"/v1/sessions/{sid}").status_code == 200, sid
        facts = c.post("/v1/script", json={"script": "recall all"}).json()["output"]
        missing = [mid for mid in remembered if mid not in facts]
        assert missing == []
        assert c.get("/v1/stats").status_code == 200
    assert integrity(beside.db) == "ok"
    sessions = visible_rows(beside.db, "SELECT session_id FROM sessions")
    assert set(uploaded) | set(beside.ingested) <= sessions
    assert set(remembered) <= visible_rows(beside.db, "SELECT id FROM facts")
    for written in (log, again):
        assert not re.search(r"(GET|POST|DELETE) \S+ 5\d\d ", written.read_text(errors="replace"))


def test_serve_local_keeps_what_its_pages_said_was_done_beside_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    beside = Beside(home, tmp_path / "beside")
    beside.scratch.mkdir()
    log = tmp_path / "serve.log"
    kept: list[str] = []
    remembered: list[str] = []
    cli(home, "memory", "stats")  # the owner's memory exists before the pages are served, as in use
    with serving(home, log, "--local") as (proc, url):
        token = re.search(r"/login\?token=(\S+)", log.read_text(errors="replace"))
        assert token
        with httpx.Client(base_url=url, timeout=60) as web:
            assert web.get(f"/login?token={token.group(1)}").status_code == 303
            for n in range(1, ROUNDS + 1):
                beside.start(n)
                csrf = csrf_of(web.get("/facts").text)
                if n % 3 == 0 and beside.ingested:  # a handoff the CLI ingested, kept from the Review page
                    sid = beside.ingested[-1]
                    done = web.post("/review", data={"op": "keep", "id": sid, "csrf": csrf})
                    assert done.headers.get("location") == "/review?done=kept", f"round {n}: {done.text}"
                    kept.append(sid)
                else:
                    mid = f"fact-{n:04d}"
                    form = {"op": "remember", "type": "Fact", "id": mid, "subject": "user", "csrf": csrf}
                    done = web.post("/facts", data=form | {"f_predicate": "n", "f_object": str(n)})
                    assert done.headers.get("location") == "/facts?done=remember&as=Fact#remember-Fact", (
                        f"round {n}: {done.text}"
                    )
                    remembered.append(mid)
                beside.finish()
                if n % 10 == 0:
                    assert holds_sqlite_lock(proc.pid, beside.db), f"round {n}: serve --local lost its lock"
                    pending = visible_rows(beside.db, "SELECT session_id FROM handoffs WHERE review = 'pending'")
                    assert not pending & set(kept), f"round {n}: 'Kept.' yet pending for every other process"
        _kill(proc)
    assert integrity(beside.db) == "ok"
    assert set(remembered) <= visible_rows(beside.db, "SELECT id FROM facts")
    assert not visible_rows(beside.db, "SELECT session_id FROM handoffs WHERE review = 'pending'") & set(kept)
