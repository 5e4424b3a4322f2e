"""The review page's changes: keep, forget, correct, as the chat's buttons do."""

from __future__ import annotations

from starlette.responses import Response

from memory import SessionNotFoundError
from memory.handoffs import ReviewError, correct, keep
from service.routes_write import forget_session  # the API's own forget: spooled uploads go too
from service.web.core import WebCall, WebError, local_path, redirect

__all__ = ["review_action"]


async def review_action(call: WebCall) -> Response:
    """``op`` keep | forget | correct (with ``text``) on handoff ``id``; back to the queue with what was done."""
    op = call.form.get("op", "")
    session_id = call.form.get("id", "")
    back = local_path(call.form.get("back", "/review"), "/review")
    back = back if back == "/review" or back.startswith("/sessions/") else "/review"
    if not session_id:
        raise WebError("which handoff? the form names none", status=400)
    eywa = await call.tenant.eywa()
    if op == "keep":
        if not await keep(eywa, session_id):
            return redirect(back, {"error": "That handoff is no longer in memory."})
        return redirect(back, {"done": "kept"})
    if op == "forget":
        try:
            await forget_session(call.tenant, session_id)
        except SessionNotFoundError:
            return redirect(back, {"error": "That handoff is no longer in memory."})
        return redirect("/review" if back.startswith("/sessions/") else back, {"done": "forgotten"})
    if op == "correct":
        try:
            await correct(eywa, session_id, call.form.get("text", ""), scratch=call.tenant.spool_dir / "tmp")
        except SessionNotFoundError:
            return redirect(back, {"error": "That handoff is no longer in memory."})
        except ReviewError as exc:
            return redirect(back, {"error": exc.reason[:250]})
        return redirect(back, {"done": "corrected"})
    raise WebError("unknown review action", status=400)
