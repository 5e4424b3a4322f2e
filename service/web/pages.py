"""The pages that read: search (the grounding with its explanation), the sessions list, the review queue,
cost, stats. One session's page is service/web/session_page.py; the facts pages are facts_pages.py."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.responses import Response

from memory import SessionKind
from memory.handoffs import count_pending, pending
from service.web.core import WebCall, query, query_int
from service.web.markdown import handoff_parts, render_markdown

__all__ = ["cost_page", "review_page", "search_page", "sessions_page", "stats_page"]

SESSIONS_PAGE = 50
REVIEW_PAGE = 20


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
                    "body": render_markdown(handoff_parts(md)[1]) if md else "",
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


async def review_page(call: WebCall) -> Response:
    r = call.request
    page = query_int(r, "page", 1, 1, 100_000)
    project = query(r, "project", limit=200)
    eywa = await call.tenant.eywa()
    rows = await pending(eywa, limit=REVIEW_PAGE + 1, offset=(page - 1) * REVIEW_PAGE, project=project or None)
    cards = []
    for h in rows[:REVIEW_PAGE]:
        cards.append({"h": h, "html": render_markdown(handoff_parts(h.markdown)[1])})
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
