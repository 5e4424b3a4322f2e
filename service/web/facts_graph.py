"""The facts graph on the page: its data for static/graph.js (``/facts/graph.json``: nodes placed to fill the
box they are drawn in, each with the page it opens) and the SVG a browser without the script shows.

Why a layout here rather than memory.facts' own: that one runs one force layout over everything, so
unconnected parts push each other to the edges and the bounding box of a few far-flung pairs squeezes the
rest into a corner; a phone's 390 px cannot spare that. Here each connected part is laid out alone, radially
around its hub (a facts graph is mostly stars: a subject and its memories), in a square cell whose area
follows its node count, and the cells are packed in rows and stretched to the box."""

from __future__ import annotations

import json
import math
import time
from collections import deque
from urllib.parse import quote, urlencode

from starlette.responses import Response

from memory.facts import FactsGraph, build_graph, to_svg
from service.web.core import WebCall, query, query_int

__all__ = ["fill_layout", "graph_json", "graph_svg", "node_href", "radial"]

Point = tuple[float, float]
# x, y, where its label goes ("right", "left", "above" or "below") and its part's cell's width: all fractions
# of the box, so a label above or below is cut to its own cell, not run into the next.
Placed = tuple[float, float, str, float]


def _components(graph: FactsGraph) -> list[list[str]]:
    """The connected parts (edges taken both ways), largest first, each in the order the graph reached it."""
    parent = {n.key: n.key for n in graph.nodes}

    def find(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for e in graph.edges:
        parent[find(e.source)] = find(e.target)
    groups: dict[str, list[str]] = {}
    for n in graph.nodes:
        groups.setdefault(find(n.key), []).append(n.key)
    return sorted(groups.values(), key=len, reverse=True)


def _label_side(r: float, angle: float) -> str:
    # Outwards, away from the edges into the node: beside it on a ring's sides, above or below at its ends.
    if r == 0:
        return "below"
    if abs(math.cos(angle)) > 0.35:
        return "right" if math.cos(angle) > 0 else "left"
    return "below" if math.sin(angle) > 0 else "above"


def radial(keys: list[str], edges: list[tuple[str, str]], hub: str = "") -> dict[str, Placed]:
    """One connected part in [0, 1]²: ``hub`` (else the best connected) in the middle, each ring one step
    further out, every node's sector of the circle as wide as the leaves below it."""
    adj: dict[str, list[str]] = {k: [] for k in keys}
    for a, b in edges:
        if a != b and a in adj and b in adj:
            adj[a].append(b)
            adj[b].append(a)
    if hub not in adj:
        hub = max(keys, key=lambda k: len(adj[k]))  # the first of the best connected: max keeps the first
    children: dict[str, list[str]] = {k: [] for k in keys}
    level = {hub: 0}
    queue = deque([hub])
    while queue:
        node = queue.popleft()
        for nxt in adj[node]:
            if nxt not in level:
                level[nxt] = level[node] + 1
                children[node].append(nxt)
                queue.append(nxt)
    weight: dict[str, int] = {}
    for node in sorted(level, key=lambda k: -level[k]):  # leaves first
        weight[node] = max(1, sum(weight[c] for c in children[node]))
    # Ring radii: each ring as far out from the last as its crowd needs (√ of its node count, plus one),
    # so a star's many leaves get a wide ring even when one of them has a child further out.
    counts = [0] * (max(level.values()) + 1)
    for depth in level.values():
        counts[depth] += 1
    radius = [0.0]
    for count in counts[1:]:
        radius.append(radius[-1] + math.sqrt(count) + 1)
    raw: dict[str, Point] = {}
    sides: dict[str, str] = {}
    sectors = [(hub, -math.pi / 2, 1.5 * math.pi)]  # the first child at the top
    while sectors:
        node, start, end = sectors.pop()
        r = radius[level[node]]
        mid = (start + end) / 2
        raw[node] = (r * math.cos(mid), r * math.sin(mid))
        sides[node] = _label_side(r, mid)
        at = start
        for child in children[node]:
            share = (end - start) * weight[child] / weight[node]
            sectors.append((child, at, at + share))
            at += share
    # The hub's label off its edges when they all go one way (a subject over its one memory): beside it.
    kids = [raw[c] for c in children[hub]]
    vx, vy = sum(p[0] for p in kids), sum(p[1] for p in kids)
    if kids and math.hypot(vx, vy) > 0.5 * len(kids) * radius[min(1, len(radius) - 1)]:
        sides[hub] = "left" if vx > abs(vy) else "right"
    # Fill the cell, centred; one axis stretched at most 1.5 times the other (a star may become an oval).
    xs, ys = [p[0] for p in raw.values()], [p[1] for p in raw.values()]
    wide, high = max(xs) - min(xs), max(ys) - min(ys)
    even = 1 / (max(wide, high) or 1.0)
    fx, fy = min(1 / wide if wide else even, 1.5 * even), min(1 / high if high else even, 1.5 * even)
    cx, cy = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
    return {k: (0.5 + (x - cx) * fx, 0.5 + (y - cy) * fy, sides[k], 1.0) for k, (x, y) in raw.items()}


def _shelves(sides: list[float], width: float) -> tuple[list[Point], float, float]:
    """Squares of ``sides`` (largest first) in rows left to right: (their corners, used width, height)."""
    corners: list[Point] = []
    x = y = row = used = 0.0
    for side in sides:
        if x > 0 and x + side > width + 1e-9:
            x, y, row = 0.0, y + row, 0.0
        corners.append((x, y))
        x += side
        row = max(row, side)
        used = max(used, x)
    return corners, used, y + row


def fill_layout(graph: FactsGraph, aspect: float = 1.0, root: str = "") -> dict[str, Placed]:
    """Every node's place in [0, 1]² of a box ``aspect`` times as wide as it is high, the box filled."""
    parts = _components(graph)
    if not parts:
        return {}
    sides = [math.sqrt(len(part)) for part in parts]
    # Try every row width (a row of the first 1, 2, … cells) and keep the packing the box holds largest.
    best: tuple[float, list[Point], float, float] = (0.0, [], 1.0, 1.0)
    for cols in range(1, len(parts) + 1):
        corners, used, height = _shelves(sides, sum(sides[:cols]))
        scale = min(aspect / used, 1 / height)
        if scale > best[0] + 1e-9:
            best = (scale, corners, used, height)
    scale, corners, used, height = best
    # Then stretch to the box, neither axis more than 1.6 times the other (a part keeps most of its shape).
    sx, sy = min(aspect / used, 1.6 * scale), min(1 / height, 1.6 * scale)
    ox, oy = (aspect - used * sx) / 2, (1 - height * sy) / 2
    out: dict[str, Placed] = {}
    for part, side, (cx, cy) in zip(parts, sides, corners, strict=True):
        keys = set(part)
        inner = radial(part, [(e.source, e.target) for e in graph.edges if e.source in keys], root)
        # Room in the cell for labels: beside the sides' nodes, more below (labels hang there) than above.
        left, top, bottom = (0.1, 0.12, 0.22) if len(part) > 1 else (0.5, 0.5, 0.5)  # a lone root: the middle
        for key, (x, y, label, _) in inner.items():
            px = ox + (cx + side * (left + x * (1 - 2 * left))) * sx
            py = oy + (cy + side * (top + y * (1 - top - bottom))) * sy
            out[key] = (round(px / aspect, 4), round(py, 4), label, round(side * sx / aspect, 4))
    return out


def node_href(key: str, concept: bool) -> str:
    """The page a node opens. A value node is a memory (its key is the memory's id): the facts page at its
    row. A concept (a subject, a link's end) is no memory: the memories that mention it, the graph rooted
    there."""
    if concept:
        return "/facts?" + urlencode({"q": key, "root": key}, quote_via=quote) + "#memories"
    return "/facts?" + urlencode({"q": key}, quote_via=quote) + "#" + quote(f"fact-{key}", safe="~-._")


def _graph_of(call: WebCall) -> tuple[str, int]:
    return query(call.request, "root", limit=200), query_int(call.request, "depth", 2, 1, 5)


async def graph_json(call: WebCall) -> Response:
    """The graph for static/graph.js. ``aspect`` is the box's width over its height (0.25 to 4)."""
    root, depth = _graph_of(call)
    try:
        aspect = min(4.0, max(0.25, float(query(call.request, "aspect", "1", limit=12))))
    except ValueError:
        aspect = 1.0
    if not math.isfinite(aspect):
        aspect = 1.0
    facts = await call.tenant.facts()
    graph = build_graph(await facts.all_memories(), root=root, depth=depth, now_ms=int(time.time() * 1000))
    at = fill_layout(graph, aspect, root)
    data = {
        "root": root,
        "nodes": [
            {"key": n.key, "label": n.label, "concept": n.concept, "href": node_href(n.key, n.concept)}
            | dict(zip(("x", "y", "side", "room"), at[n.key], strict=True))
            for n in graph.nodes
        ],
        "edges": [{"source": e.source, "target": e.target, "label": e.label} for e in graph.edges],
        "hidden_nodes": graph.hidden_nodes,
        "hidden_edges": graph.hidden_edges,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # Labels are hostile text: no markup character survives as such, even for a viewer that ignores the type.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Response(text, media_type="application/json", headers={"Cache-Control": "no-store"})


async def graph_svg(call: WebCall) -> Response:
    """The graph as one picture: what a browser without our script shows (its colours are its own)."""
    root, depth = _graph_of(call)
    facts = await call.tenant.facts()
    graph = build_graph(await facts.all_memories(), root=root, depth=depth, now_ms=int(time.time() * 1000))
    return Response(
        to_svg(graph),
        media_type="image/svg+xml",
        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"},
    )
