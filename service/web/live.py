"""Server-sent events that keep the Review and Sessions pages current without a reload."""

from __future__ import annotations

from starlette.responses import Response

from service.web.core import WebCall, WebError

__all__ = ["review_events", "sessions_events"]


async def review_events(call: WebCall) -> Response:
    raise WebError("live updates are not served yet", status=404)


async def sessions_events(call: WebCall) -> Response:
    raise WebError("live updates are not served yet", status=404)
