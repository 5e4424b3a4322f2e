"""The facts graph, drawn by us: which edges (as the `graph` script command walks them), at most ~40 nodes
of them, a force-directed layout, and SVG. The PNG for the chat (memory/facts/graph_image.py) draws the same
layout, so the page and the phone show one picture. It lives with the facts, below both the memory pages
(service/web) and the bot's /graph, which draw it.

Why our own layout and not Graphviz: no system package and no subprocess on the bot's machine, the same
result everywhere, and at 40 nodes a Fruchterman–Reingold layout in numpy is a few milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

import numpy as np

from memory.facts.model import Memory, State

__all__ = ["MAX_NODES", "FactsGraph", "GraphEdge", "GraphNode", "build_graph", "layout", "to_svg"]

MAX_NODES = 40
MAX_EDGES = 500  # as the `graph` command
LABEL_CHARS = 28


@dataclass(frozen=True, slots=True)
class GraphNode:
    key: str
    label: str
    concept: bool  # a subject or a link end (an anchor), not a fact's value


@dataclass(frozen=True, slots=True)
class GraphEdge:
    source: str
    target: str
    label: str


@dataclass(slots=True)
class FactsGraph:
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    hidden_nodes: int = 0  # reachable but not drawn (past MAX_NODES)
    hidden_edges: int = 0

    @property
    def empty(self) -> bool:
        return not self.nodes


def short(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rank_key(m: Memory, now_ms: int) -> tuple[float, str]:
    # The engine's ranking (memory/facts/engine.py `ranked`): age over reinforcement, smallest first.
    return (max(0, now_ms - m.ts_ms) / (1 + 0.5 * m.access_count), m.id)


def _out(m: Memory) -> tuple[str, str, str, str]:
    """(from, label, to, to's label) of one memory, as the `graph` and `viz` commands draw it."""
    if m.target:
        return m.subject, m.field_text("kind") or m.ctype, m.target, m.target
    label = m.field_text("predicate") or m.ctype
    if m.ctype == "Fact":
        value = m.field_text("object")
    else:
        value = ", ".join(f"{k}: {m.field_text(k)}" for k in m.fields if m.field_text(k)) or m.id
    return m.subject, label, m.id, value


def build_graph(
    memories: Sequence[Memory], *, root: str = "", depth: int = 2, now_ms: int, max_nodes: int = MAX_NODES
) -> FactsGraph:
    """The edges ``graph ?root? ?depth?`` walks (Archived memories left out), cut to ``max_nodes`` nodes:
    the first reached are drawn, the rest counted."""
    live = sorted((m for m in memories if m.state != State.ARCHIVED), key=lambda m: _rank_key(m, now_ms))
    edges: list[tuple[str, str, str, str]] = []
    if not root:
        edges = [_out(m) for m in live[:MAX_EDGES]]
    else:
        by_subject: dict[str, list[Memory]] = {}
        for m in live:
            by_subject.setdefault(m.subject, []).append(m)
        seen = {root}
        queue = deque([(root, 0)])
        while queue and len(edges) < MAX_EDGES:
            node, level = queue.popleft()
            if level >= depth:
                continue
            for m in by_subject.get(node, []):
                edge = _out(m)
                edges.append(edge)
                if edge[2] not in seen:
                    seen.add(edge[2])
                    queue.append((edge[2], level + 1))
        edges = edges[:MAX_EDGES]
    graph = FactsGraph()
    labels: dict[str, GraphNode] = {}
    reached: list[str] = []
    concepts = {e[0] for e in edges} | {e[2] for e in edges if e[2] == e[3]}
    if root:
        reached.append(root)
        labels[root] = GraphNode(root, short(root), True)
    for source, _label, target, value in edges:
        for key, text in ((source, source), (target, value)):
            if key not in labels:
                labels[key] = GraphNode(key, short(text), key in concepts)
                reached.append(key)
    drawn = set(reached[:max_nodes])
    graph.nodes = [labels[k] for k in reached[:max_nodes]]
    graph.hidden_nodes = max(0, len(reached) - max_nodes)
    for source, label, target, _value in edges:
        if source in drawn and target in drawn:
            graph.edges.append(GraphEdge(source, target, short(label, 20)))
        else:
            graph.hidden_edges += 1
    return graph


def _seed(key: str) -> float:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") / 2**32


def layout(graph: FactsGraph) -> dict[str, tuple[float, float]]:
    """Positions in the unit square [0, 1]², the same for the same graph (kept for the last graphs drawn:
    the page, its image and a reload draw one graph several times)."""
    keys = tuple(n.key for n in graph.nodes)
    links = tuple((e.source, e.target) for e in graph.edges)
    return dict(zip(keys, _layout(keys, links), strict=True))


@functools.lru_cache(maxsize=64)
def _layout(keys: tuple[str, ...], edges: tuple[tuple[str, str], ...]) -> tuple[tuple[float, float], ...]:
    """Fruchterman–Reingold: every pair repels (ideal²/d), every edge attracts (d²/ideal), steps shrink as it
    cools. In numpy: 40 nodes × 120 rounds is a few milliseconds (a page's budget is 200)."""
    iterations = 120
    n = len(keys)
    if n == 0:
        return ()
    if n == 1:
        return ((0.5, 0.5),)
    index = {k: i for i, k in enumerate(keys)}
    # Start on a circle, in reached order (the root first), nudged by each name so ties break the same way.
    angle = 2 * np.pi * np.arange(n) / n
    pos = np.stack([0.5 + 0.4 * np.cos(angle), 0.5 + 0.4 * np.sin(angle)], axis=1)
    pos[:, 0] += 0.01 * np.array([_seed(k) for k in keys])
    links = np.array([(index[a], index[b]) for a, b in edges if a != b], dtype=int).reshape(-1, 2)
    ideal = 0.9 / math.sqrt(n)
    temp = 0.1
    for _ in range(iterations):
        delta = pos[:, None, :] - pos[None, :, :]  # (n, n, 2): i minus j
        d2 = np.maximum((delta**2).sum(axis=2), 1e-9)
        np.fill_diagonal(d2, np.inf)
        disp = (delta * (ideal * ideal / d2)[:, :, None]).sum(axis=1)
        if len(links):
            along = pos[links[:, 0]] - pos[links[:, 1]]
            pull = along * (np.sqrt((along**2).sum(axis=1)) / ideal)[:, None]
            np.add.at(disp, links[:, 0], -pull)
            np.add.at(disp, links[:, 1], pull)
        length = np.maximum(np.sqrt((disp**2).sum(axis=1)), 1e-9)
        pos += disp / length[:, None] * np.minimum(length, temp)[:, None]
        temp = max(0.002, temp * 0.96)
    # One scale for both axes (no stretching), centred in the unit square.
    low, high = pos.min(axis=0), pos.max(axis=0)
    span = float(max(high - low)) or 1.0
    centre = (high + low) / 2
    placed = 0.5 + (pos - centre) / span
    return tuple((float(x), float(y)) for x, y in placed)


def to_svg(graph: FactsGraph, *, size: int = 900) -> str:
    """The graph as a standalone SVG document (every label escaped; no script, no external reference)."""
    margin = 90
    positions = layout(graph)

    def at(key: str) -> tuple[float, float]:
        x, y = positions[key]
        return margin + x * (size - 2 * margin), margin + y * (size - 2 * margin)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" width="{size}" height="{size}"'
        ' font-family="sans-serif" role="img">',
        "<title>Facts graph</title>",
        f'<rect width="{size}" height="{size}" fill="#ffffff"/>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7"'
        ' orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#7a8699"/></marker></defs>',
    ]
    for e in graph.edges:
        (x1, y1), (x2, y2) = at(e.source), at(e.target)
        dx, dy = x2 - x1, y2 - y1
        d = math.hypot(dx, dy) or 1.0
        r = 12.0
        out.append(
            f'<line x1="{x1 + dx / d * r:.1f}" y1="{y1 + dy / d * r:.1f}" x2="{x2 - dx / d * r:.1f}"'
            f' y2="{y2 - dy / d * r:.1f}" stroke="#7a8699" stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
        out.append(
            f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 4:.1f}" font-size="13" fill="#55606e"'
            f' text-anchor="middle">{escape(e.label)}</text>'
        )
    for node in graph.nodes:
        x, y = at(node.key)
        fill = "#2f6fdf" if node.concept else "#f0a030"
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="10" fill="{fill}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{y + 28:.1f}" font-size="16" fill="#1c2430" text-anchor="middle">'
            f"{escape(node.label)}</text>"
        )
    if graph.hidden_nodes:
        out.append(
            f'<text x="{size / 2:.0f}" y="{size - 20}" font-size="16" fill="#55606e" text-anchor="middle">'
            f"{graph.hidden_nodes} more nodes and {graph.hidden_edges} more edges not drawn</text>"
        )
    out.append("</svg>")
    return "\n".join(out)
