"""One session's page: its handoff (with the review buttons) and its transcript, a page of turns at a time.

Addresses: ``?turn=N`` is the page that starts at turn N (``#turn-N`` its heading, a permalink that survives
the session growing: turns are numbered from the start); a turn longer than a page is read in parts,
``?turn=N&part=K``. The old byte addresses, ``?at=B``, open the page that starts at the turn (or part)
holding byte B. ``?format=json`` or ``csv`` exports the session: its handoff and its turns, one row each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from memory.handoffs import forgotten
from service.web.core import WebCall, WebError, query, query_int
from service.web.exports import export_response
from service.web.markdown import handoff_parts, render_markdown
from service.web.transcript_view import Page, page_bounds, parse_page, subagent_links

if TYPE_CHECKING:
    from memory import Eywa
    from memory.storage import Child, HandoffRow, TurnIndex

__all__ = ["session_page"]

OUTLINE = 60  # turns listed around the page's own: a 10 MB session has thousands, a page lists a screenful
_MAX = 1 << 40


async def session_page(call: WebCall) -> Response:
    session_id = call.request.path_params["id"]
    eywa = await call.tenant.eywa()
    meta = await eywa.session_row(session_id)  # without its transcript: a page of it is read below
    handoff = await eywa.handoff(session_id)
    if meta is None and handoff is None:
        gone = await forgotten(eywa, session_id)
        if gone is not None:  # memory's record of who forgot it, and when
            by = f" by {gone.by}" if gone.by else ""
            raise WebError(f"{session_id!r} was forgotten{by} at {gone.at[:16].replace('T', ' ')} UTC", status=404)
        raise WebError(f"no session or handoff with id {session_id!r}", status=404)
    fmt = query(call.request, "format", "", 10)
    if fmt:
        return await _export(eywa, session_id, handoff, fmt, has_transcript=meta is not None)
    parent_id = meta.parent_id if meta else (handoff.parent_id if handoff else "")
    front, body = handoff_parts(handoff.markdown) if handoff else ("", "")
    children = await eywa.children(session_id)
    transcript = await _transcript(call, eywa, session_id, children) if meta else {}
    return call.render(
        "session.html",
        nav="sessions",
        session_id=session_id,
        meta=meta,
        handoff=handoff,
        frontmatter=front,
        handoff_html=render_markdown(body) if handoff else "",
        parent_id=parent_id,
        children=children,
        **{"page": None, **transcript},  # a handoff without a transcript: no pages of it
    )


async def _transcript(call: WebCall, eywa: Eywa, session_id: str, children: list[Child]) -> dict[str, Any]:
    params = call.request.query_params
    turn = query_int(call.request, "turn", 0, 0, _MAX)
    part = query_int(call.request, "part", 0, 0, _MAX)
    at = query_int(call.request, "at", -1, 0, _MAX) if "at" in params and "turn" not in params else -1
    chosen: list[Page] = []

    def pick(index: TurnIndex) -> tuple[int, int]:
        first, k = turn, part
        if at >= 0:  # an old byte address: the turn (or the part of a long one) that holds the byte
            held = index.turn_at(at)
            first, k = held.n, sum(1 for p in held.parts if p <= at)
        chosen.append(page_bounds(index, first, k))
        return chosen[0].start, chosen[0].end

    read = await eywa.transcript_turns(session_id, pick)
    if read is None:  # the row went between the two reads
        return {}
    index, page = read.index, chosen[0]
    pieces = parse_page(read.text, read.start, index, subagent_links(index, children), page.part)
    last = index.turn_at(max(page.start, page.end - 1)).n
    count = len(index.turns) - 1
    lo = max(1, min(page.first - OUTLINE // 3, count - OUTLINE + 1))
    return {
        "page": page,
        "pieces": pieces,
        "index": index,
        "turns": count,
        "last_turn": last,
        "outline": index.turns[lo : lo + OUTLINE],
        "outline_before": lo - 1,
        "outline_after": max(0, count - (lo + OUTLINE - 1)),
    }


async def _export(
    eywa: Eywa, session_id: str, handoff: HandoffRow | None, fmt: str, *, has_transcript: bool
) -> Response:
    """The handoff and every turn, whole: an export is the session, not a page of it."""
    rows: list[dict[str, Any]] = []
    if handoff is not None:
        rows.append({"session_id": session_id, "turn": None, "heading": "Handoff", "text": handoff.markdown})
    read = await eywa.transcript_turns(session_id, lambda index: (0, index.total)) if has_transcript else None
    if read is not None:
        data = read.text.encode("utf-8")
        for t in read.index.turns:
            if t.end > t.start:
                text = data[t.start : t.end].decode("utf-8", errors="replace").strip("\n")
                rows.append({"session_id": session_id, "turn": t.n, "heading": t.label, "text": text})
    return export_response(rows, fmt, f"session-{session_id}")
