"""The pages that read: search (the grounding with its explanation), the sessions list, the review queue,
cost, stats. One session's page is service/web/session_page.py; the facts pages are facts_pages.py."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from urllib.parse import quote, urlencode

from starlette.responses import Response

from memory.handoffs import count_pending
from service.web.core import WebCall, query, query_int
from service.web.exports import EXPORT_FORMATS, export_response
from service.web.live import session_filters
from service.web.markdown import handoff_parts, render_markdown
from service.web.review_view import REVIEW_PAGE, ReviewPlace, render_review
from service.web.search_view import formula_html, is_match, result_row

__all__ = ["REVIEW_PAGE", "cost_page", "review_page", "search_page", "sessions_page", "stats_page"]

SESSIONS_PAGE = 50


def _days_back(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value > 0 else None


def _export_format(call: WebCall) -> str:
    """``?format=json|csv`` (anything else, the page itself)."""
    fmt = query(call.request, "format", limit=8).lower()
    return fmt if fmt in EXPORT_FORMATS else ""


def _permalink(path: str, params: dict[str, str], **extra: str) -> str:
    """The page's own address with its filters (and ``extra``): what an export link and a bookmark keep."""
    pairs = [(k, v) for k, v in {**params, **extra}.items() if v]
    return path + ("?" + urlencode(pairs, quote_via=quote) if pairs else "")


async def search_page(call: WebCall) -> Response:
    """The grounding for a query: what matched, then (apart) the recent handoffs that fill up to k without
    matching; ``?format=json|csv`` exports the same results."""
    r = call.request
    q = query(r, "q")
    project = query(r, "project", limit=200)
    days = query(r, "days_back", limit=20)
    k = query_int(r, "max", 5, 1, 5)
    fmt = _export_format(call)
    matched: list[dict[str, Any]] = []
    recent: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    if q or project:
        eywa = await call.tenant.eywa()
        g = await eywa.get(q, project=project or None, days_back=_days_back(days), max_handoffs=k)
        for rank, res in enumerate(g.results, 1):
            rows.append(result_row(rank, res))
            if fmt:
                continue
            md = g.markdowns.get(res.session_id, "")
            item = {
                "r": res,
                "rank": rank,
                "explain": asdict(res.explanation),
                "body": render_markdown(handoff_parts(md)[1]) if md else "",
            }
            (matched if is_match(res) else recent).append(item)
    params = {"q": q, "project": project, "days_back": days, "max": str(k)}
    if fmt:
        return export_response(rows, fmt, "search")
    return call.render(
        "search.html",
        nav="search",
        q=q,
        project=project,
        days_back=days,
        max=k,
        matched=matched,
        recent=recent,
        formula=formula_html(),
        json_url=_permalink("/search", params, format="json"),
        csv_url=_permalink("/search", params, format="csv"),
    )


async def sessions_page(call: WebCall) -> Response:
    """The sessions, newest first, a page of 50; ``?format=json|csv`` exports the page shown."""
    filters = session_filters(call)
    page = query_int(call.request, "page", 1, 1, 100_000)
    eywa = await call.tenant.eywa()
    rows = await eywa.list_sessions(**filters, limit=SESSIONS_PAGE + 1, offset=(page - 1) * SESSIONS_PAGE)
    more = len(rows) > SESSIONS_PAGE
    rows = rows[:SESSIONS_PAGE]
    fmt = _export_format(call)
    if fmt:
        listed = [{**asdict(s), "projects": list(s.projects), "url": "/sessions/" + s.session_id} for s in rows]
        return export_response(listed, fmt, "sessions" if page == 1 else f"sessions-page-{page}")
    if page == 1:
        newest = rows[0].at if rows else ""
    else:  # the live count is of sessions above the list's first page
        top = await eywa.list_sessions(**filters, limit=1, offset=0)
        newest = top[0].at if top else ""
    params = {**filters, "page": str(page) if page > 1 else ""}
    return call.render(
        "sessions.html",
        nav="sessions",
        rows=rows,
        filters=filters,
        page=page,
        more=more,
        newest=newest,
        events_url=_permalink("/sessions/events", {**filters, "after": newest}),
        first_url=_permalink("/sessions", filters),
        json_url=_permalink("/sessions", params, format="json"),
        csv_url=_permalink("/sessions", params, format="csv"),
    )


async def review_page(call: WebCall) -> Response:
    r = call.request
    return await render_review(
        call,
        ReviewPlace.of_query(call),
        done=query(r, "done", limit=20),
        error=query(r, "error", limit=300),
        count=query_int(r, "count", 0, 0, 10_000),
        missed=query(r, "missed", limit=5000),
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
