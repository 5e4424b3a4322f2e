"""The review queue as a page, in its three states: the list (with what was just done, or a correction that
failed kept in its card), and the confirm step before a Forget (one handoff or several selected).

Forget asks before it acts rather than offering an undo: forgetting removes the session, its subagents and
their uploaded files for good (service.routes_write.forget_session), so an undo would need a second,
delayed delete path; a confirm is one more tap on a short page, and works without JavaScript. Every change
returns to the card after the one acted on (``#h-<id>``), not to the top of a long page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from starlette.responses import RedirectResponse, Response

from memory import SessionNotFoundError
from memory.handoffs import count_pending, pending, queue_state
from service.web.core import WebCall, local_path, query, query_int
from service.web.markdown import handoff_parts, render_markdown

__all__ = ["REVIEW_PAGE", "ReviewPlace", "back_to", "confirm_forget", "render_review", "review_url"]

REVIEW_PAGE = 20
DONE = {
    "kept": "Kept.",
    "forgotten": "Forgotten: removed from memory.",
    "corrected": "Correction stored with the handoff; future sessions will see it.",
}


@dataclass(frozen=True, slots=True)
class ReviewPlace:
    """Where on the queue a change was made: its filter, its page, the card to show after it, and the page
    it came from (the queue, or one session's page)."""

    project: str = ""
    page: int = 1
    next: str = ""
    back: str = "/review"

    @classmethod
    def of_query(cls, call: WebCall) -> ReviewPlace:
        r = call.request
        return cls(query(r, "project", limit=200), query_int(r, "page", 1, 1, 100_000))

    @classmethod
    def of_form(cls, form: dict[str, str]) -> ReviewPlace:
        try:
            page = min(100_000, max(1, int(form.get("page", "1"))))
        except ValueError:
            page = 1
        back = local_path(form.get("back", "/review"), "/review")
        back = back if back == "/review" or back.startswith("/sessions/") else "/review"
        return cls(form.get("project", "")[:200], page, form.get("next", "")[:500], back)

    def hidden(self) -> dict[str, str]:
        """The fields a form on the page carries so the answer comes back here."""
        return {"project": self.project, "page": str(self.page), "back": self.back}


def review_url(place: ReviewPlace, anchor: str = "", **params: str) -> str:
    """The queue with ``params`` (done, error, …), its filter and page, at card ``anchor`` (a session id)."""
    pairs = [(k, v) for k, v in params.items() if v]
    if place.project:
        pairs.append(("project", place.project))
    if place.page > 1:
        pairs.append(("page", str(place.page)))
    url = "/review" + ("?" + urlencode(pairs, quote_via=quote) if pairs else "")
    return url + (f"#h-{quote(anchor, safe='')}" if anchor else "")


def back_to(place: ReviewPlace, anchor: str = "", **params: str) -> RedirectResponse:
    """After a change: back where it was made (the queue at the next card, or the session's page)."""
    if place.back.startswith("/sessions/") and params.get("done") != "forgotten":
        pairs = [(k, v) for k, v in params.items() if v]
        return RedirectResponse(place.back + ("?" + urlencode(pairs, quote_via=quote) if pairs else ""), 303)
    if place.back.startswith("/sessions/"):  # that session is gone: the queue is where the person goes next
        return RedirectResponse(review_url(ReviewPlace(), "", **params), 303)
    return RedirectResponse(review_url(place, anchor, **params), 303)


async def render_review(
    call: WebCall,
    place: ReviewPlace,
    *,
    done: str = "",
    error: str = "",
    count: int = 0,
    missed: str = "",
    draft: tuple[str, str, str] | None = None,
    status: int = 200,
) -> Response:
    """The queue's page. ``draft`` = (session id, text typed, why it was refused): that card's correction
    box shows the text again with the reason, and takes the focus (so the browser scrolls to it)."""
    eywa = await call.tenant.eywa()
    project = place.project or None
    rows = await pending(eywa, limit=REVIEW_PAGE + 1, offset=(place.page - 1) * REVIEW_PAGE, project=project)
    shown = rows[:REVIEW_PAGE]
    cards: list[dict[str, Any]] = []
    for i, h in enumerate(shown):
        after = shown[i + 1] if i + 1 < len(shown) else (shown[i - 1] if i else None)
        cards.append(
            {
                "h": h,
                "html": render_markdown(handoff_parts(h.markdown)[1]),
                "next": after.session_id if after else "",
                "draft": draft[1] if draft and draft[0] == h.session_id else "",
                "error": draft[2] if draft and draft[0] == h.session_id else "",
            }
        )
    if draft and not any(c["error"] for c in cards):
        error = error or draft[2]  # its card is no longer on this page: say why at the top
    state = await queue_state(eywa, project=place.project or None)
    message = DONE.get(done, "Done.") if done else ""
    if done and count > 1:
        message = f"{'Kept' if done == 'kept' else 'Forgotten'}: {count} handoffs."
    if done in DONE and call.login.who:  # this login made the change it was sent back from
        message += f" Decided by {call.login.who}."
    return call.render(
        "review.html",
        status=status,
        nav="review",
        cards=cards,
        total=await count_pending(eywa, project=project),
        newest=repr(state.newest_ts),  # exact: the newest shown must not count as new
        page=place.page,
        more=len(rows) > REVIEW_PAGE,
        project=place.project,
        place=place,
        done=message,
        missed=[m for m in missed.split("\n") if m][:50],
        error=error,
        confirm=[],
    )


async def confirm_forget(call: WebCall, place: ReviewPlace, ids: list[str]) -> Response:
    """The step before a Forget: what will go, a "Yes, forget" that posts, and a way back to the card."""
    eywa = await call.tenant.eywa()
    items: list[dict[str, str]] = []
    for sid in ids:
        try:
            view = await eywa.show(sid, transcript=False)
        except SessionNotFoundError:
            continue
        h = view.handoff
        items.append(
            {
                "id": sid,
                "headline": (h.headline if h else "") or (view.session.title if view.session else "") or sid,
                "date": (h.date if h else "")[:16],
                "children": str(len(view.subagents)),
            }
        )
    if not items:
        return back_to(place, place.next, error="That handoff is no longer in memory.")
    cancel = place.back if place.back.startswith("/sessions/") else review_url(place, ids[0] if ids else "")
    return call.render(
        "review.html",
        nav="review",
        confirm=items,
        cancel=cancel,
        place=place,
        total=0,
        project=place.project,
    )
