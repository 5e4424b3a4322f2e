"""The facts page over real HTTP (`serve --local`): cards with labelled cells on a narrow screen, Forget asked
first, forms that keep what was typed when the engine refuses it, actions that come back to their view and
place, exports of what the filters choose, and the graph's data: every node placed in its box and linked to
its memory. Hostile fact text stays text through all of them."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import AsyncIterator
from html import unescape
from pathlib import Path

import httpx
import pytest

from memory.facts import FactsGraph, GraphEdge, GraphNode
from service.web.facts_graph import fill_layout
from tests.service.web.conftest import HOSTILE, LocalServer, csrf_of, running_local, seed_memory
from tests.service.web.local_pages import assert_no_markup


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A logged-in client of `serve --local` over the hostile seed, and its CSRF token."""
    home = tmp_path / "home"
    await seed_memory(home)
    srv: LocalServer
    async with running_local(home) as srv, srv.client() as client:
        assert (await client.get(f"/login?token={srv.token}")).status_code == 303
        yield client, csrf_of((await client.get("/facts")).text)


def rows_of(html: str) -> list[str]:
    return re.findall(r'<tr id="fact-([^"]+)"', html)


async def test_memories_are_cards_with_labelled_cells_and_two_full_size_actions(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, _ = web
    page = (await client.get("/facts")).text
    assert '<table id="facts" class="cards">' in page
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    cells = re.findall(r"<td[^>]*>", body)
    assert cells and all("data-label=" in c for c in cells), [c for c in cells if "data-label" not in c]
    row = body.split('<tr id="fact-editor"', 1)[1].split("</tr>", 1)[0]
    assert 'data-label="object" class="object">Helix<' in row
    edit = re.search(r'<a class="button small quiet edit" href="([^"]+)"', row)
    forget = re.search(r'<a class="button small danger quiet forget" href="([^"]+)"', row)
    assert edit and forget, row
    assert "forget=1" in unescape(forget.group(1))  # a question first, not a POST in the row
    assert 'value="forget"' not in page


async def test_forget_asks_first_and_comes_back_to_the_next_row_of_the_same_view(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, _ = web
    page = (await client.get("/facts?q=user")).text
    ids = rows_of(page)
    assert "coffee" in ids and len(ids) >= 2
    link = re.search(r'<tr id="fact-coffee".*?class="button small danger quiet forget" href="([^"]+)"', page, re.S)
    assert link
    ask = await client.get(unescape(link.group(1)))
    assert ask.status_code == 200 and "Forget <code>coffee</code>?" in ask.text
    assert_no_markup(ask.text)
    assert "V60 &lt;img src=x onerror=window.__pwned=1&gt;" in ask.text  # what would be forgotten, as text
    keep = re.search(r'<a class="button quiet" href="([^"]+)" id="keep">', ask.text)
    assert keep and unescape(keep.group(1)) == "/facts?q=user#fact-coffee"
    assert "coffee" in rows_of((await client.get("/facts?q=user")).text)  # asking forgot nothing
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', ask.text))
    near = form["near"]
    assert near in ids and near != "coffee"
    gone = await client.post("/facts", data={k: unescape(v) for k, v in form.items()} | {"op": "forget"})
    assert gone.status_code == 303
    assert gone.headers["location"] == f"/facts?q=user&done=forget#fact-{near}"
    after = (await client.get(gone.headers["location"])).text
    assert "coffee" not in rows_of(after) and "Forgotten." in after


async def test_a_refused_remember_shows_the_form_again_with_what_was_typed_and_why(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, token = web
    typed = {"op": "remember", "type": "Fact", "id": "coffee", "subject": "user", "csrf": token, "back": "q=user"}
    typed |= {"f_predicate": "drinks", "f_object": f"tea {HOSTILE}"}
    refused = await client.post("/facts", data=typed)
    assert refused.status_code == 422
    page = refused.text
    assert_no_markup(page)
    assert re.search(r'<p class="error" id="error" role="alert">Not remembered: [^<]*already exists', page)
    form = page.split('<details id="remember-Fact" open>', 1)[1].split("</form>", 1)[0]
    assert 'name="id" value="coffee"' in form and 'name="f_predicate" value="drinks"' in form
    value = re.search(r'name="f_object" value="([^"]*)"', form)
    assert value and unescape(value.group(1)) == f"tea {HOSTILE}"  # every character kept, escaped
    assert 'name="q" value="user"' in page  # the view it was sent from
    unknown = await client.post("/facts", data=typed | {"type": "Nonsense"})
    assert unknown.status_code == 400 and "Nonsense" in unknown.text
    too_long = await client.post("/facts", data=typed | {"id": "fresh", "f_object": "x" * 4001})
    assert too_long.status_code == 400 and "longer than 4000" in too_long.text
    assert 'name="id" value="fresh"' in too_long.text


async def test_a_refused_edit_shows_the_edit_form_again_with_what_was_typed(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, token = web
    edit = await client.get("/facts/edit?id=editor&back=q%3Duser")
    assert edit.status_code == 200 and 'name="back" value="q=user"' in edit.text
    typed = {"op": "edit", "id": "editor", "subject": "two words", "f_predicate": "uses", "csrf": token}
    refused = await client.post("/facts", data=typed | {"f_object": "Zed <b>", "back": "q=user"})
    assert refused.status_code == 422
    assert "Not saved:" in refused.text and "without spaces" in refused.text
    assert 'name="subject" value="two words"' in refused.text
    assert 'name="f_object" value="Zed &lt;b&gt;"' in refused.text
    assert "Helix" in (await client.get("/facts?q=editor")).text  # both or neither: the memory is as it was


async def test_an_action_comes_back_to_its_view_and_to_the_place_it_was_made(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, token = web
    form = {"op": "remember", "type": "Fact", "id": "tea", "subject": "user", "csrf": token, "back": "q=user&page=1"}
    made = await client.post("/facts", data=form | {"f_predicate": "drinks", "f_object": "sencha"})
    assert made.headers["location"] == "/facts?q=user&done=remember&as=Fact#remember-Fact"
    landed = (await client.get(made.headers["location"])).text
    assert re.search(r'<details id="remember-Fact" open>\s*<summary>Fact</summary>\s*<p class="done" id="done"', landed)
    back = "q=user&state=Active&page=3"
    saved = await client.post(
        "/facts", data={"op": "edit", "id": "tea", "subject": "user", "f_predicate": "drinks", "f_object": "genmaicha",
                        "csrf": token, "back": back},
    )  # fmt: skip
    # Saved, it is the strongest memory again: the first page of the same filters, at its row.
    assert saved.headers["location"] == "/facts?q=user&state=Active&done=edit&id=tea#fact-tea"
    row = (await client.get(saved.headers["location"])).text.split('<tr id="fact-tea"', 1)[1].split("</tr>", 1)[0]
    assert row.startswith(' data-id="tea" class="changed"') and "Saved." in row and "genmaicha" in row
    link = "user~works-on~eywa"
    moved = await client.post(
        "/facts", data={"op": "edit", "id": link, "subject": "user", "f_target": "macupos", "f_kind": "works-on",
                        "csrf": token},
    )  # fmt: skip
    assert moved.headers["location"] == "/facts?done=edit&id=user~works-on~macupos#fact-user~works-on~macupos"


async def test_exports_carry_what_the_filters_choose_as_inert_json_and_csv(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, token = web
    for mid, value in (("hostile", HOSTILE), ("formula", '=HYPERLINK("http://x")')):
        form = {"op": "remember", "type": "Fact", "id": mid, "subject": "mallory", "csrf": token}
        assert (await client.post("/facts", data=form | {"f_predicate": "says", "f_object": value})).status_code == 303
    page = (await client.get("/facts?q=mallory")).text
    assert_no_markup(page)
    assert sorted(rows_of(page)) == ["formula", "hostile"]
    assert 'href="/facts?q=mallory&amp;format=json"' in page and 'href="/facts?q=mallory&amp;format=csv"' in page
    as_json = await client.get("/facts?q=mallory&page=7&format=json")  # every page of the filter, not one
    assert as_json.status_code == 200 and as_json.headers["content-type"].startswith("application/json")
    assert as_json.headers["content-disposition"] == 'attachment; filename="facts.json"'
    assert_no_markup(as_json.text)
    rows = {row["id"]: row for row in json.loads(as_json.text)}
    assert set(rows) == {"formula", "hostile"}
    assert rows["hostile"]["object"] == HOSTILE and rows["hostile"]["subject"] == "mallory"
    assert {"type", "predicate", "confidence", "decay", "state", "access_count", "created"} <= set(rows["hostile"])
    as_csv = await client.get("/facts?q=mallory&format=csv")
    assert as_csv.headers["content-disposition"] == 'attachment; filename="facts.csv"'
    table = {r["id"]: r for r in csv.DictReader(io.StringIO(as_csv.text.lstrip("\ufeff")))}
    assert table["formula"]["object"].startswith("'=")  # a spreadsheet shows it, does not run it
    assert table["hostile"]["object"] == HOSTILE
    only_rel = json.loads((await client.get("/facts?type=Relationship&format=json")).text)
    assert [r["id"] for r in only_rel] == ["user~works-on~eywa"] and only_rel[0]["kind"] == "works-on"


async def test_the_graph_data_places_every_node_in_the_box_and_links_it_to_its_memory(
    web: tuple[httpx.AsyncClient, str],
) -> None:
    client, _ = web
    answer = await client.get("/facts/graph.json?aspect=0.6")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert "<" not in answer.text and ">" not in answer.text  # markup characters escaped as \u003c
    data = json.loads(answer.text)
    nodes = {n["key"]: n for n in data["nodes"]}
    assert {"user", "coffee", "editor", "eywa", "deploy"} <= set(nodes)
    assert all(0 <= n["x"] <= 1 and 0 <= n["y"] <= 1 and 0 < n["room"] <= 1 for n in nodes.values())
    assert nodes["coffee"]["label"] == "V60 <img src=x onerror=wind…"  # the label, cut, as text
    assert nodes["coffee"]["href"] == "/facts?q=coffee#fact-coffee" and not nodes["coffee"]["concept"]
    assert nodes["user"]["href"] == "/facts?q=user&root=user#memories" and nodes["user"]["concept"]
    assert {"source": "user", "target": "eywa", "label": "works-on"} in data["edges"]
    rooted = json.loads((await client.get("/facts/graph.json?root=eywa")).text)
    assert rooted["root"] == "eywa" and {n["key"] for n in rooted["nodes"]} == {"eywa", "deploy"}
    lone = json.loads((await client.get("/facts/graph.json?root=nobody")).text)["nodes"]
    assert [(n["key"], n["x"], n["y"]) for n in lone] == [("nobody", 0.5, 0.5)]  # a bare root: the middle
    for bad in ("nan", "inf", "x", "-5"):
        assert (await client.get(f"/facts/graph.json?aspect={bad}")).status_code == 200


def test_an_unrooted_graph_with_many_parts_fills_its_box_rather_than_one_corner() -> None:
    # One big star and many small pairs: one force layout pushes the pairs to the edges and squeezes the
    # star; here every part gets a cell and the cells fill the box.
    graph = FactsGraph()
    graph.nodes = [GraphNode("hub", "hub", True)] + [GraphNode(f"f{i}", f"fact {i}", False) for i in range(12)]
    graph.edges = [GraphEdge("hub", f"f{i}", "has") for i in range(12)]
    for i in range(8):
        graph.nodes += [GraphNode(f"s{i}", f"s{i}", True), GraphNode(f"v{i}", f"value {i}", False)]
        graph.edges.append(GraphEdge(f"s{i}", f"v{i}", "is"))
    for aspect in (0.46, 1.0, 1.8):
        at = fill_layout(graph, aspect)
        assert set(at) == {n.key for n in graph.nodes}
        xs, ys = [p[0] for p in at.values()], [p[1] for p in at.values()]
        assert {p[2] for p in at.values()} <= {"left", "right", "above", "below"}
        assert min(xs) >= 0 and max(xs) <= 1 and min(ys) >= 0 and max(ys) <= 1
        assert max(xs) - min(xs) >= 0.7 and max(ys) - min(ys) >= 0.7, (aspect, at)
        quadrants = {(p[0] > 0.5, p[1] > 0.5) for p in at.values()}
        assert len(quadrants) == 4, (aspect, quadrants)
        # No two nodes on one spot: at 390 px wide every pair is at least ~14 px apart.
        points = sorted(at.values())
        gaps = [
            math.dist((a[0] * aspect, a[1]), (b[0] * aspect, b[1])) for i, a in enumerate(points) for b in points[:i]
        ]
        assert min(gaps) >= 0.035, (aspect, min(gaps))
