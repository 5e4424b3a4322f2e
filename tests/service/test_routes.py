"""The REST routes of one tenant through a real server and a real httpx client."""

from __future__ import annotations

import io
import tarfile

from tests.service.conftest import Server, transcript_bytes


async def _upload(srv: Server, key: str, name: str, data: bytes) -> dict[str, object]:
    async with srv.client(key) as c:
        r = await c.post("/v1/transcripts", params={"name": name}, content=data)
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()
    return body


async def test_get_answers_the_grounding_as_json_and_as_quoted_text(service: Server) -> None:
    key = service.keys["alice"]
    await _upload(service, key, "a/s1.jsonl", transcript_bytes("s1", "zebra", "quokka"))
    await _upload(service, key, "a/s2.jsonl", transcript_bytes("s2", "walrus", "penguin", day="2026-03-03"))
    async with service.client(key) as c:
        r = await c.get("/v1/get", params={"q": "zebra", "as_of": "2026-03-10T00:00:00Z"})
        text = await c.get("/v1/get", params={"q": "zebra", "format": "text", "as_of": "2026-03-10T00:00:00Z"})
        explained = await c.get("/v1/get", params={"q": "zebra", "explain": "1", "as_of": "2026-03-10T00:00:00Z"})
    assert r.status_code == 200
    results = r.json()
    assert results[0]["session_id"] == "s1"
    assert set(results[0]) == {"session_id", "score", "date", "headline", "projects", "kind"}
    assert text.headers["content-type"].startswith("text/markdown")
    assert "[[RECALLED" in text.text and "zebra" in text.text
    assert "explain" in explained.json()[0]


async def test_query_parameters_are_checked(service: Server) -> None:
    async with service.client(service.keys["alice"]) as c:
        for params in (
            {"days_back": "0"},
            {"days_back": "nan"},
            {"max": "6"},
            {"max": "x"},
            {"as_of": "yesterday"},
            {"format": "xml"},
        ):
            r = await c.get("/v1/get", params=params)
            assert r.status_code == 400, params
            assert r.json()["error"]["code"] == "bad_request"
        assert (await c.get("/v1/search")).status_code == 400  # q is required
        assert (await c.get("/v1/handoffs", params={"cursor": "!!"})).status_code == 400


async def test_search_finds_a_detail_said_in_a_session(service: Server) -> None:
    key = service.keys["alice"]
    await _upload(service, key, "s1.jsonl", transcript_bytes("s1", "ECONNRESET", "backoff"))
    async with service.client(key) as c:
        r = await c.get("/v1/search", params={"q": "ECONNRESET", "limit": "5"})
    hits = r.json()
    assert [h["session_id"] for h in hits] == ["s1"]
    assert set(hits[0]) == {"session_id", "kind", "parent_id", "snippet", "score"}


async def test_a_session_is_shown_as_markdown_or_handoff_and_ids_like_paths_are_only_ids(service: Server) -> None:
    key = service.keys["alice"]
    await _upload(service, key, "s1.jsonl", transcript_bytes("s1", "zebra"))
    async with service.client(key) as c:
        markdown = await c.get("/v1/sessions/s1")
        handoff = await c.get("/v1/sessions/s1", params={"format": "handoff"})
        assert markdown.status_code == 200 and "zebra" in markdown.text
        assert handoff.text.startswith("---\n") and "session_id: s1" in handoff.text
        # Percent-encoded, so no client folds the dots away: the route gets the id as it is, and it is only an id.
        for odd in (
            "..%2F..%2Fservice.db",
            "%2E%2E/%2E%2E/service.db",
            "a/agent-b",
            "s1%2F%2E%2E%2Fs1",
            "%2Fetc%2Fpasswd",
        ):
            r = await c.get(f"/v1/sessions/{odd}")
            assert r.status_code == 404, odd
            assert r.json()["error"]["message"].startswith("no session or handoff with id"), odd
        r = await c.delete("/v1/sessions/%2E%2E%2F%2E%2E%2Ftenants%2Fbob")
        assert r.status_code == 404 and "no session" in r.json()["error"]["message"]


async def test_handoffs_are_listed_newest_first_with_date_bounds_and_pages(service: Server) -> None:
    key = service.keys["alice"]
    for i in range(5):
        await _upload(service, key, f"s{i}.jsonl", transcript_bytes(f"s{i}", "topic", day=f"2026-03-0{i + 1}"))
    async with service.client(key) as c:
        first = (await c.get("/v1/handoffs", params={"limit": "2"})).json()
        second = (await c.get("/v1/handoffs", params={"limit": "2", "cursor": first["next_cursor"]})).json()
        third = (await c.get("/v1/handoffs", params={"limit": "2", "cursor": second["next_cursor"]})).json()
        bounded = (
            await c.get("/v1/handoffs", params={"since": "2026-03-02T00:00:00Z", "until": "2026-03-04T00:00:00Z"})
        ).json()
        project = (await c.get("/v1/handoffs", params={"project": "no-such-project"})).json()
    pages = [h["session_id"] for page in (first, second, third) for h in page["handoffs"]]
    assert pages == ["s4", "s3", "s2", "s1", "s0"]
    assert third["next_cursor"] is None
    assert [h["session_id"] for h in bounded["handoffs"]] == ["s2", "s1"]
    assert project["handoffs"] == []


HANDOFF = """---
session_id: imported-1
date: 2026-02-01
headline: Chose PostgreSQL for the ledger
projects: [ledger]
keywords: [postgresql, ledger]
---

# Chose PostgreSQL for the ledger

## What happened

We compared SQLite and PostgreSQL for the ledger and picked PostgreSQL.
"""


async def test_a_handoff_is_imported_and_recalled_by_its_own_text(service: Server) -> None:
    async with service.client(service.keys["alice"]) as c:
        r = await c.post("/v1/handoffs", content=HANDOFF.encode())
        assert r.status_code == 200, r.text
        assert r.json()["session_id"] == "imported-1"
        got = await c.get("/v1/get", params={"q": "postgresql ledger", "as_of": "2026-02-02T00:00:00Z"})
        assert [x["session_id"] for x in got.json()] == ["imported-1"]
        shown = await c.get("/v1/sessions/imported-1")
        assert shown.status_code == 404 and "format=handoff" in shown.json()["error"]["message"]
        named = await c.post(
            "/v1/handoffs",
            params={"name": "2026/01/05/from-name.md"},
            content=HANDOFF.replace("session_id: imported-1\n", "").replace("date: 2026-02-01\n", "").encode(),
        )
        assert named.json()["session_id"] == "from-name"
        bad = await c.post("/v1/handoffs", content=b"# no frontmatter\n")
        assert bad.status_code == 400 and "frontmatter" in bad.json()["error"]["message"]
        assert (await c.post("/v1/handoffs", content=b"\xff\xfe---")).status_code == 400
        await c.delete("/v1/sessions/imported-1")
        again = await c.post("/v1/handoffs", content=HANDOFF.encode())
        assert again.status_code == 409


async def test_forget_is_sticky_and_removes_the_spooled_transcript(service: Server) -> None:
    key = service.keys["alice"]
    data = transcript_bytes("s1", "zebra")
    await _upload(service, key, "proj/s1.jsonl", data)
    spooled = list((service.home / "tenants" / "alice" / "spool" / "transcripts").rglob("*.jsonl"))
    assert len(spooled) == 1
    async with service.client(key) as c:
        r = await c.delete("/v1/sessions/s1")
        assert r.json() == {"forgotten": ["s1"]}
        assert not spooled[0].exists()
        assert (await c.delete("/v1/sessions/s1")).status_code == 404
        again = await _upload(service, key, "proj/s1.jsonl", data)
        assert again["sessions"] == []
        assert (await c.get("/v1/get", params={"q": "zebra"})).json() == []
        assert (await c.get("/v1/search", params={"q": "zebra"})).json() == []


async def test_a_script_runs_all_or_nothing_and_reports_its_error_line(service: Server) -> None:
    async with service.client(service.keys["alice"]) as c:
        ok = await c.post("/v1/script", json={"script": "remember ed user Fact predicate editor object Helix"})
        assert ok.status_code == 200 and ok.json() == {"output": "ed"}
        failed = await c.post("/v1/script", json={"script": "remember x user Fact predicate p object o\nnosuch"})
        assert failed.status_code == 422
        assert failed.json()["error"]["code"] == "script_error" and failed.json()["error"]["line"] == 2
        recall = await c.post("/v1/script", json={"script": "recall all", "as_of": "2026-12-01T00:00:00Z"})
        assert "Helix" in recall.json()["output"] and "{id x " not in recall.json()["output"]
        for bad in (b"[]", b"{", b'{"script": 3}', b'{"script": ""}'):
            r = await c.post("/v1/script", content=bad, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, bad


async def test_stats_count_the_tenants_memory(service: Server) -> None:
    key = service.keys["alice"]
    await _upload(service, key, "s1.jsonl", transcript_bytes("s1", "zebra"))
    async with service.client(key) as c:
        await c.post("/v1/script", json={"script": "remember ed user Fact predicate editor object Helix"})
        stats = (await c.get("/v1/stats")).json()
    assert stats["tenant"] == "alice"
    assert stats["sessions"] == {"main": 1} and stats["handoffs"] == 1
    assert stats["facts"]["memories"] == 1
    assert "database" not in stats and str(service.home) not in str(stats)


async def test_export_is_a_gzip_tar_of_handoffs_facts_snapshot_and_events(service: Server) -> None:
    key = service.keys["alice"]
    await _upload(service, key, "s1.jsonl", transcript_bytes("s1", "zebra"))
    async with service.client(key) as c:
        await c.post("/v1/script", json={"script": "remember ed user Fact predicate editor object Helix"})
        r = await c.get("/v1/export")
    assert r.status_code == 200 and r.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        names = tar.getnames()
        snapshot = tar.extractfile("facts/snapshot.tcl")
        assert snapshot is not None and b"Helix" in snapshot.read()
    assert "handoffs/2026/03/02/s1.md" in names
    assert any(n.startswith("facts/events/") and n.endswith(".jsonl") for n in names)
    assert not list((service.home / "tenants" / "alice" / "spool" / "tmp").glob("export-*"))


async def test_errors_are_json_for_unknown_routes_and_methods(service: Server) -> None:
    async with service.client(service.keys["alice"]) as c:
        missing = await c.get("/v2/nothing")
        wrong = await c.put("/v1/get")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


async def test_the_openapi_document_names_every_route(service: Server) -> None:
    async with service.client(service.keys["alice:read"]) as c:
        doc = (await c.get("/v1/openapi.json")).json()
    assert doc["openapi"].startswith("3.")
    for path in ("/v1/transcripts", "/v1/handoffs", "/v1/get", "/v1/search", "/v1/sessions/{id}", "/v1/script"):
        assert path in doc["paths"], path
    assert {"/v1/export", "/v1/stats", "/healthz", "/metrics", "/mcp", "/v1/register"} <= set(doc["paths"])
    assert set(doc["components"]["securitySchemes"]) == {"apiKey", "bearer"}
