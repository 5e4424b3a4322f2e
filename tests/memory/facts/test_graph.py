"""The facts graph as drawn for the page and the chat: the edges the `graph` command walks, at most 40 nodes
drawn and the rest counted, a layout that is the same every time, and labels that are text, never markup."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from PIL import Image

from memory.facts.graph import build_graph, layout, to_svg
from memory.facts.graph_image import graph_png
from memory.facts.model import Memory, State

NOW = 1_800_000_000_000


def fact(mid: str, subject: str, obj: str, *, state: State = State.ACTIVE) -> Memory:
    fields: dict[str, str | float] = {"predicate": "said", "object": obj, "confidence": 1.0}
    return Memory(mid, subject, "Fact", fields, NOW - 1000, NOW - 1000, NOW - 1000, state=state)


def link(source: str, target: str, kind: str) -> Memory:
    fields: dict[str, str | float] = {"target": target, "kind": kind, "strength": 1.0}
    return Memory(f"{source}~{kind}~{target}", source, "Relationship", fields, NOW, NOW, NOW, via_link=True)


def test_a_big_graph_draws_forty_nodes_and_counts_the_rest() -> None:
    memories = [fact(f"f{i}", "user", f"thing {i}") for i in range(100)]
    graph = build_graph(memories, root="user", now_ms=NOW)
    assert len(graph.nodes) == 40 and graph.hidden_nodes == 61  # user + 100 values, 40 drawn
    assert graph.hidden_edges == 61 and len(graph.edges) == 39
    assert "61 more nodes" in to_svg(graph)


def test_the_walk_follows_links_to_depth_and_leaves_archived_memories_out() -> None:
    memories = [
        link("user", "eywa", "works-on"),
        fact("deploy", "eywa", "fly"),
        fact("old", "user", "gone", state=State.ARCHIVED),
        fact("far", "fly", "too far"),
    ]
    graph = build_graph(memories, root="user", depth=2, now_ms=NOW)
    assert {n.key for n in graph.nodes} == {"user", "eywa", "deploy"}
    assert {(e.source, e.label, e.target) for e in graph.edges} == {
        ("user", "works-on", "eywa"),
        ("eywa", "said", "deploy"),
    }
    assert next(n for n in graph.nodes if n.key == "deploy").label == "fly"  # a fact's node shows its object


def test_the_layout_is_deterministic_and_inside_the_unit_square() -> None:
    graph = build_graph([fact(f"f{i}", f"s{i % 5}", f"v{i}") for i in range(30)], now_ms=NOW)
    first, second = layout(graph), layout(graph)
    assert first == second
    assert all(0.0 <= x <= 1.0 and 0.0 <= y <= 1.0 for x, y in first.values())


def test_svg_labels_are_escaped_text() -> None:
    hostile = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    svg = to_svg(build_graph([fact("x", "user", hostile)], root="user", now_ms=NOW))
    root = ET.fromstring(svg)  # well-formed XML: nothing broke out of a text node or an attribute
    tags = {el.tag.split("}")[1] for el in root.iter()}
    assert tags <= {"svg", "title", "rect", "defs", "marker", "path", "line", "text", "circle"}
    assert "<script" not in svg and "<img" not in svg


def test_the_png_is_phone_sized_and_drawn() -> None:
    graph = build_graph([link("user", "eywa", "works-on"), fact("deploy", "eywa", "fly")], now_ms=NOW)
    image = Image.open(io.BytesIO(graph_png(graph, title="Facts graph")))
    assert image.size == (1280, 1280)
    colours = {c for _, c in image.convert("RGB").getcolors(1 << 20) or []}
    assert (47, 111, 223) in colours  # a concept's node
    empty = Image.open(io.BytesIO(graph_png(build_graph([], now_ms=NOW))))
    assert empty.size == (1280, 1280)
