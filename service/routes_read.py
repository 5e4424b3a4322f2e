"""The read routes of a tenant's memory: grounding, detail recall, one session, the handoff list, counts."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from memory.storage import HandoffRow
from service.calls import Call, brief, endpoint
from service.errors import BadRequest, NotFound
from service.params import instant_param, int_param, positive_float_param, text_param

__all__ = [
    "facts_tier_route",
    "get_route",
    "handoffs_route",
    "search_route",
    "session_route",
    "stats_route",
]

MARKDOWN = "text/markdown; charset=utf-8"


@endpoint("/v1/get")
async def get_route(request: Request, call: Call) -> Response:
    query = text_param(request, "q")
    project = text_param(request, "project") or None
    days_back = positive_float_param(request, "days_back")
    max_k = int_param(request, "max", 5, 1, 5)
    as_of = instant_param(request, "as_of")
    branch = text_param(request, "branch") or None
    explain = text_param(request, "explain") in {"1", "true", "yes"}
    form = text_param(request, "format", "json")
    if form not in {"json", "text"}:
        raise BadRequest("format must be json or text")
    eywa = await call.tenant.eywa()
    g = await eywa.get(query, project=project, days_back=days_back, max_handoffs=max_k, as_of=as_of, branch=branch)
    if form == "text":  # the quoted grounding text, as `macupos memory get` prints it
        return PlainTextResponse(g.text, media_type=MARKDOWN)
    return JSONResponse([r.as_json(explain) for r in g.results])


@endpoint("/v1/search")
async def search_route(request: Request, call: Call) -> Response:
    query = text_param(request, "q", required=True)
    limit = int_param(request, "limit", 10, 1, 100)
    eywa = await call.tenant.eywa()
    hits = await eywa.search(query, limit)
    return JSONResponse([asdict(h) for h in hits])


@endpoint("/v1/sessions/{id}")
async def session_route(request: Request, call: Call) -> Response:
    session_id = request.path_params["id"]
    form = text_param(request, "format", "markdown")
    if form not in {"markdown", "handoff"}:
        raise BadRequest("format must be markdown or handoff")
    view = await (await call.tenant.eywa()).show(session_id)
    if form == "handoff":
        if view.handoff is None:
            raise NotFound(f"session {brief(session_id)} has no handoff yet")
        return PlainTextResponse(view.handoff.markdown, media_type=MARKDOWN)
    if view.session is None:
        raise NotFound(f"{brief(session_id)} was imported as a handoff only; ask for format=handoff")
    return PlainTextResponse(view.session.markdown, media_type=MARKDOWN)


def _cursor(row: HandoffRow) -> str:
    return base64.urlsafe_b64encode(json.dumps([row.ts, row.session_id]).encode()).decode().rstrip("=")


def _after(raw: str) -> tuple[float, str] | None:
    if not raw:
        return None
    try:
        ts, sid = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        return float(ts), str(sid)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise BadRequest("cursor is not one this server gave") from None


@endpoint("/v1/handoffs")
async def handoffs_route(request: Request, call: Call) -> Response:
    """Newest first; `since` (inclusive) and `until` (exclusive) bound the handoff time; `cursor` pages on."""
    page = int_param(request, "limit", 50, 1, call.service.settings.limits.handoffs_page_max)
    eywa = await call.tenant.eywa()
    rows = await eywa.list_handoffs(
        limit=page + 1,
        project=text_param(request, "project") or None,
        since=instant_param(request, "since"),
        until=instant_param(request, "until"),
        after=_after(text_param(request, "cursor")),
    )
    more = len(rows) > page
    rows = rows[:page]
    return JSONResponse(
        {"handoffs": [r.listing() for r in rows], "next_cursor": _cursor(rows[-1]) if more and rows else None}
    )


@endpoint("/v1/stats")
async def stats_route(request: Request, call: Call) -> Response:
    eywa = await call.tenant.eywa()
    stats = await eywa.stats()
    stats.pop("database", None)  # a server path: not the tenant's business
    facts = await call.tenant.facts()
    return JSONResponse({"tenant": call.tenant.name, **stats, "facts": await facts.world()})


@endpoint("/v1/facts/tier")
async def facts_tier_route(request: Request, call: Call) -> Response:
    """The facts injection tier a session starts with (`macupos memory facts show`): at most 12 lines."""
    as_of = instant_param(request, "as_of")
    facts = await call.tenant.facts()
    return JSONResponse({"lines": await facts.tiered_injection(as_of)})
