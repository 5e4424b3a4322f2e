"""The pages that read: search (the grounding with its explanation), sessions, one session, the review
queue, facts and their graph, cost, stats."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from starlette.responses import Response

from memory import SessionKind
from memory.facts import Memory, build_graph, component_types, to_svg
from memory.facts import effective as effective_decay
from memory.handoffs import count_pending, pending
from service.web.core import WebCall, WebError, query, query_int
from service.web.markdown import render_markdown

__all__ = [
    "cost_page",
    "fact_edit_page",
    "facts_page",
    "graph_svg",
    "review_page",
    "search_page",
    "session_page",
    "sessions_page",
    "stats_page",
]

SESSIONS_PAGE = 50
REVIEW_PAGE = 20
FACTS_PAGE = 100


def _handoff_parts(markdown: str) -> tuple[str, str]:
    """(frontmatter, body) of a handoff file: the body is rendered, the frontmatter shown as it is."""
    if markdown.startswith("---\n"):
        end = markdown.find("\n---", 4)
        if end > 0:
            return markdown[4:end], markdown[end + 4 :].lstrip("\n")
    return "", markdown


def _days_back(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value > 0 else None


async def search_page(call: WebCall) -> Response:
    r = call.request
    q = query(r, "q")
    project = query(r, "project", limit=200)
    days = query(r, "days_back", limit=20)
    k = query_int(r, "max", 5, 1, 5)
    results: list[dict[str, Any]] = []
    if q or project:
        eywa = await call.tenant.eywa()
        g = await eywa.get(q, project=project or None, days_back=_days_back(days), max_handoffs=k)
        for res in g.results:
            md = g.markdowns.get(res.session_id, "")
            results.append(
                {
                    "r": res,
                    "explain": asdict(res.explanation),
                    "body": render_markdown(_handoff_parts(md)[1]) if md else "",
                }
            )
    return call.render("search.html", nav="search", q=q, project=project, days_back=days, max=k, results=results)


async def sessions_page(call: WebCall) -> Response:
    r = call.request
    kind = query(r, "kind", limit=20)
    if kind not in ("", *SessionKind):
        kind = ""
    filters = {
        "project": query(r, "project", limit=200),
        "kind": kind,
        "since": query(r, "since", limit=10),
        "until": query(r, "until", limit=10),
    }
    page = query_int(r, "page", 1, 1, 100_000)
    eywa = await call.tenant.eywa()
    rows = await eywa.list_sessions(**filters, limit=SESSIONS_PAGE + 1, offset=(page - 1) * SESSIONS_PAGE)
    more = len(rows) > SESSIONS_PAGE
    return call.render(
        "sessions.html", nav="sessions", rows=rows[:SESSIONS_PAGE], filters=filters, page=page, more=more
    )


async def session_page(call: WebCall) -> Response:
    session_id = call.request.path_params["id"]
    at = query_int(call.request, "at", 0, 0, 1 << 40)
    eywa = await call.tenant.eywa()
    meta = await eywa.session_row(session_id)  # without its transcript: a page of it is read below
    handoff = await eywa.handoff(session_id)
    if meta is None and handoff is None:
        raise WebError(f"no session or handoff with id {session_id!r}", status=404)
    parent_id = meta.parent_id if meta else (handoff.parent_id if handoff else "")
    front, body = _handoff_parts(handoff.markdown) if handoff else ("", "")
    part = await eywa.transcript_slice(session_id, at) if meta else None
    return call.render(
        "session.html",
        nav="sessions",
        session_id=session_id,
        meta=meta,
        handoff=handoff,
        frontmatter=front,
        handoff_html=render_markdown(body) if handoff else "",
        parent_id=parent_id,
        children=await eywa.children(session_id),
        part=part,
        transcript_html=render_markdown(part.text) if part else "",
    )


async def review_page(call: WebCall) -> Response:
    r = call.request
    page = query_int(r, "page", 1, 1, 100_000)
    project = query(r, "project", limit=200)
    eywa = await call.tenant.eywa()
    rows = await pending(eywa, limit=REVIEW_PAGE + 1, offset=(page - 1) * REVIEW_PAGE, project=project or None)
    cards = []
    for h in rows[:REVIEW_PAGE]:
        cards.append({"h": h, "html": render_markdown(_handoff_parts(h.markdown)[1])})
    return call.render(
        "review.html",
        nav="review",
        cards=cards,
        total=await count_pending(eywa, project=project or None),
        page=page,
        more=len(rows) > REVIEW_PAGE,
        project=project,
        done=query(r, "done", limit=20),
        error=query(r, "error", limit=300),
    )


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


async def cost_page(call: WebCall) -> Response:
    eywa = await call.tenant.eywa()
    ledger = await eywa.cost_view()
    settings = eywa.settings
    today = await eywa.memory_spent_today() if ledger.engines else 0.0
    return call.render(
        "cost.html",
        nav="cost",
        ledger=ledger,
        today=today,
        budget=settings.memory_daily_budget_usd,
        timezone=settings.timezone,
    )


async def stats_page(call: WebCall) -> Response:
    eywa = await call.tenant.eywa()
    stats = await eywa.stats()
    if not call.web.settings.local:
        stats.pop("database", None)  # a server path: not a tenant's business
    facts = await call.tenant.facts()
    return call.render(
        "stats.html",
        nav="stats",
        stats=stats,
        world=await facts.world(),
        pending=await count_pending(eywa),
        tenant=call.tenant.name,
    )
