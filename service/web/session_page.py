"""One session's page: its handoff (with the review buttons) and its transcript, a page at a time."""

from __future__ import annotations

from starlette.responses import Response

from service.web.core import WebCall, WebError, query_int
from service.web.markdown import handoff_parts, render_markdown

__all__ = ["session_page"]


async def session_page(call: WebCall) -> Response:
    session_id = call.request.path_params["id"]
    at = query_int(call.request, "at", 0, 0, 1 << 40)
    eywa = await call.tenant.eywa()
    meta = await eywa.session_row(session_id)  # without its transcript: a page of it is read below
    handoff = await eywa.handoff(session_id)
    if meta is None and handoff is None:
        raise WebError(f"no session or handoff with id {session_id!r}", status=404)
    parent_id = meta.parent_id if meta else (handoff.parent_id if handoff else "")
    front, body = handoff_parts(handoff.markdown) if handoff else ("", "")
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
