"""The facts pages: the memories (filtered, strongest first), one memory's edit form, and their graph."""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import Response

from memory.facts import Memory, build_graph, component_types, to_svg
from memory.facts import effective as effective_decay
from service.web.core import WebCall, WebError, query, query_int

__all__ = ["fact_edit_page", "facts_page", "graph_json", "graph_svg"]

FACTS_PAGE = 100


def _fact_row(m: Memory, now_ms: int, half_life_ms: float) -> dict[str, Any]:
    return {
        "m": m,
        "fields": [(name, m.field_text(name)) for name in m.fields],
        "decay": effective_decay(m.ts_ms, m.access_count, now_ms, half_life_ms),
        "created": time.strftime("%Y-%m-%d", time.gmtime(m.created_ms / 1000)),
    }


def _matches(m: Memory, text: str) -> bool:
    words = [m.id, m.subject, m.ctype, *(m.field_text(k) for k in m.fields)]
    return text in " ".join(words).casefold()


async def facts_page(call: WebCall) -> Response:
    r = call.request
    text = query(r, "q", limit=200).casefold().strip()
    ctype = query(r, "type", limit=40)
    state = query(r, "state", limit=20)
    root = query(r, "root", limit=200)
    page = query_int(r, "page", 1, 1, 100_000)
    facts = await call.tenant.facts()
    now_ms = int(time.time() * 1000)
    memories = await facts.all_memories()
    chosen = [
        m
        for m in memories
        if (not ctype or m.ctype == ctype) and (not state or m.state.value == state) and (not text or _matches(m, text))
    ]
    chosen.sort(key=lambda m: -effective_decay(m.ts_ms, m.access_count, now_ms, facts.engine.half_life_ms))
    shown = chosen[(page - 1) * FACTS_PAGE : page * FACTS_PAGE]
    graph = build_graph(memories, root=root, now_ms=now_ms)
    return call.render(
        "facts.html",
        nav="facts",
        rows=[_fact_row(m, now_ms, facts.engine.half_life_ms) for m in shown],
        total=len(chosen),
        page=page,
        more=len(chosen) > page * FACTS_PAGE,
        q=query(r, "q", limit=200),
        ctype=ctype,
        state=state,
        root=root,
        graph=graph,
        types=[(t.name, [f.name for f in t.fields]) for t in component_types()],
        world=await facts.world(),
        done=query(r, "done", limit=20),
        error=query(r, "error", limit=300),
    )


async def fact_edit_page(call: WebCall) -> Response:
    mid = query(call.request, "id", limit=300)
    facts = await call.tenant.facts()
    m = await facts.get(mid)
    if m is None:
        raise WebError(f"no memory with id {mid!r}", status=404)
    fields = [(f.name, m.field_text(f.name)) for t in component_types() if t.name == m.ctype for f in t.fields]
    return call.render("fact_edit.html", nav="facts", m=m, fields=fields, error="")


async def graph_svg(call: WebCall) -> Response:
    root = query(call.request, "root", limit=200)
    depth = query_int(call.request, "depth", 2, 1, 5)
    facts = await call.tenant.facts()
    graph = build_graph(await facts.all_memories(), root=root, depth=depth, now_ms=int(time.time() * 1000))
    return Response(
        to_svg(graph),
        media_type="image/svg+xml",
        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"},
    )


async def graph_json(call: WebCall) -> Response:
    raise WebError("the graph's data is not served yet", status=404)
