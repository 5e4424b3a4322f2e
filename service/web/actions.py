"""The review page's changes: keep, forget, correct, as the chat's buttons do; and keep or forget several
selected cards at once.

``op``: ``keep`` | ``ask-forget`` (the confirm step, changes nothing) | ``forget`` | ``correct`` (``text``).
The handoffs are ``id`` (one card's form) or the ``sel-N`` checkboxes of the bulk form (their names differ
because a form here is read into a dict: one value a name). Each handoff is kept or forgotten on its own;
one that is no longer in memory is named in the answer, the others are done.
"""

from __future__ import annotations

from starlette.responses import Response

from memory import SessionNotFoundError
from memory.handoffs import ReviewError, correct, keep
from service.routes_write import forget_session  # the API's own forget: spooled uploads go too
from service.web.core import WebCall, WebError
from service.web.review_view import REVIEW_PAGE, ReviewPlace, back_to, confirm_forget, render_review
from service.webhooks import webhooks_of

__all__ = ["review_action"]

GONE = "That handoff is no longer in memory."
MAX_SELECTED = 5 * REVIEW_PAGE


def _selected(form: dict[str, str]) -> list[str]:
    one = form.get("id", "")
    if one:
        return [one]
    ids = [v[:500] for k, v in form.items() if k.startswith("sel-") and v]
    return list(dict.fromkeys(ids))[:MAX_SELECTED]


async def review_action(call: WebCall) -> Response:
    """Back to the card after the one acted on, with what was done (see service.web.review_view)."""
    op = call.form.get("op", "")
    place = ReviewPlace.of_form(call.form)
    ids = _selected(call.form)
    if op not in ("keep", "ask-forget", "forget", "correct"):
        raise WebError("unknown review action", status=400)
    if not ids:
        if "id" in call.form:
            raise WebError("which handoff? the form names none", status=400)
        return back_to(place, error="Select one or more handoffs first.")
    if op == "ask-forget":
        return await confirm_forget(call, place, ids)
    if op == "correct":
        return await _correct(call, place, ids[0])
    eywa = await call.tenant.eywa()
    done: list[str] = []
    missed: list[str] = []
    for sid in ids:
        if op == "keep":
            (done if await keep(eywa, sid, by=call.login.who) else missed).append(sid)
            continue
        try:
            await forget_session(call.tenant, sid, hooks=webhooks_of(call.request.app), by=call.login.who)
        except SessionNotFoundError:
            missed.append(sid)
        else:
            done.append(sid)
    word = "kept" if op == "keep" else "forgotten"
    if len(ids) == 1:
        return back_to(place, place.next, **({"done": word} if done else {"error": GONE}))
    return back_to(
        place,
        done=word if done else "",
        count=str(len(done)),
        missed="\n".join(missed),
        error="" if done else "None of the selected handoffs is in memory any more.",
    )


async def _correct(call: WebCall, place: ReviewPlace, session_id: str) -> Response:
    """Store a correction; when it is refused, the page again with the text typed and the reason, at its card."""
    text = call.form.get("text", "")
    eywa = await call.tenant.eywa()
    try:
        await correct(eywa, session_id, text, scratch=call.tenant.spool_dir / "tmp", by=call.login.who)
    except SessionNotFoundError:
        return back_to(place, place.next, error=GONE)
    except ReviewError as exc:
        if place.back.startswith("/sessions/"):
            return back_to(place, error=exc.reason[:250])
        return await render_review(call, place, draft=(session_id, text, exc.reason[:250]), status=400)
    return back_to(place, place.next, done="corrected")
