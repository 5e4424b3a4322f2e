"""Exports of what a page shows (the search results, the sessions list) as JSON and CSV at the page's own
address plus ``format=``: attachments with their own content type (never HTML), hostile text kept as data,
and no CSV cell a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import httpx
import pytest

from memory.facade import Eywa
from memory.handoffs.format import to_markdown
from memory.models import Handoff
from service.web.core import WebError
from service.web.exports import csv_cell, export_response, to_csv
from tests.service.web.conftest import HOSTILE, memory_settings, seed_memory
from tests.service.web.local_pages import logged_in_local

FORMULA = '=HYPERLINK("http://evil.example","click")'


async def add_formula_handoff(home: Path) -> str:
    folder = home / "formula"
    folder.mkdir()
    h = Handoff(
        session_id="web-formula-1",
        date="2026-03-04T09:00:00+00:00",
        headline=FORMULA,
        projects=["+cmd|calc"],
        keywords=["zeppelin"],
        substance=2,
        what_happened=["@SUM(A1)"],
    )
    (folder / "h.md").write_text(to_markdown(h), encoding="utf-8")
    async with await Eywa.open(memory_settings(home)) as eywa:
        await eywa.import_dir(folder)
    return h.session_id


def assert_attachment(response: httpx.Response, kind: str, name: str) -> None:
    assert response.status_code == 200, response.text[:300]
    assert response.headers["content-type"].startswith(kind)
    assert response.headers["content-disposition"] == f'attachment; filename="{name}"'
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
    if kind == "application/json":  # even a viewer that sniffs finds no markup (a CSV is text: its type holds it)
        assert "<script" not in response.text and "<img" not in response.text


def rows_of_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


def test_a_cell_that_starts_like_a_formula_gets_an_apostrophe_and_numbers_stay_numbers() -> None:
    for text in ("=1+1", "+1", "-2", "@SUM(A1)", "\t=x", "\r=x"):
        assert csv_cell(text) == "'" + text
    assert csv_cell(-2) == "-2" and csv_cell(0.5) == "0.5" and csv_cell(True) == "true"
    assert csv_cell(["=a", "b"]) == "'=a; b" and csv_cell(["b", "=a"]) == "b; =a"  # only a cell's start counts
    assert csv_cell(None) == "" and csv_cell("plain") == "plain"
    assert to_csv([{"a": 1}, {"b": "=x"}]) == "a,b\r\n1,\r\n,'=x\r\n"


def test_an_unknown_export_format_is_refused() -> None:
    with pytest.raises(WebError):
        export_response([], "html", "x")


async def test_search_results_export_as_json_and_csv_at_the_page_address(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    formula_id = await add_formula_handoff(home)
    async with logged_in_local(home) as web:
        params = {"q": "zeppelin", "max": "5"}
        page = (await web.get("/search", params=params)).text
        assert 'href="/search?q=zeppelin&amp;max=5&amp;format=json"' in page
        assert 'href="/search?q=zeppelin&amp;max=5&amp;format=csv"' in page
        got = await web.get("/search", params={**params, "format": "json"})
        assert_attachment(got, "application/json", "search.json")
        rows = json.loads(got.text)
        assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
        by_id = {r["session_id"]: r for r in rows}
        assert ids["main"] in by_id and by_id[ids["main"]]["matched"] is True
        assert HOSTILE.split(" ")[0] in by_id[ids["main"]]["headline"]  # as stored, data not markup
        assert by_id[formula_id]["headline"] == FORMULA  # JSON keeps the text exactly
        assert {"score", "content", "recency", "terms", "url"} <= set(by_id[ids["main"]])
        got = await web.get("/search", params={**params, "format": "csv"})
        assert_attachment(got, "text/csv", "search.csv")
        table = {r["session_id"]: r for r in rows_of_csv(got.text)}
        assert table[formula_id]["headline"] == "'" + FORMULA
        assert table[formula_id]["projects"] == "'+cmd|calc"
        assert table[ids["main"]]["matched"] == "true"


async def test_the_sessions_list_exports_the_page_shown_with_its_filters(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with logged_in_local(home) as web:
        page = (await web.get("/sessions", params={"kind": "main"})).text
        assert 'href="/sessions?kind=main&amp;format=csv"' in page
        got = await web.get("/sessions", params={"kind": "main", "format": "json"})
        assert_attachment(got, "application/json", "sessions.json")
        rows = json.loads(got.text)
        listed = {r["session_id"] for r in rows}
        assert ids["main"] in listed and ids["codex"] not in listed  # the filter holds
        assert all(r["kind"] == "main" for r in rows)
        got = await web.get("/sessions", params={"format": "csv"})
        assert_attachment(got, "text/csv", "sessions.csv")
        table = rows_of_csv(got.text)
        assert {r["session_id"] for r in table} >= {ids["main"], ids["imported"]}
        assert all(not r["headline"].startswith(("=", "+", "-", "@")) for r in table)
        unknown = await web.get("/sessions", params={"format": "html"})
        assert unknown.headers["content-type"].startswith("text/html")  # the page itself
