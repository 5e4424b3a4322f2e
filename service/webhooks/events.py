"""Where the memory's changes become webhook events; each a call of the route that made the change.

- ``session.ingested``: an uploaded transcript's sessions that are new or changed (``POST /v1/transcripts``;
  a file sent again unchanged makes none). ``data``: ``{"session_id", "change": "new"|"updated"}``.
- ``handoff.ready``: a handoff written, by the extraction that follows an ingest (one for each new or changed
  session of the upload that has a handoff once it ran) or uploaded (``POST /v1/handoffs``). ``data``: the
  handoff as ``GET /v1/handoffs`` lists it, and ``"via": "ingest"|"upload"``.
- ``session.forgotten``: ``DELETE /v1/sessions/{id}`` and the pages' Forget. ``data``:
  ``{"session_id", "forgotten": [every id that went, its subagents too]}``.

The data is the memory's own (redacted on the way in); an upload's name, which may hold a token, never goes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory import Eywa
from service.webhooks.hub import Webhooks

__all__ = ["forgotten", "handoff_uploaded", "ingested"]


async def ingested(
    hooks: Webhooks | None,
    tenant: str,
    eywa: Eywa,
    sessions: Sequence[str],
    counted: Mapping[str, str],
    handoffs_extracted: int,
) -> None:
    if hooks is None:
        return
    changed = [sid for sid in sessions if counted.get(sid) in ("new", "updated")]
    for sid in changed:
        await hooks.emit(tenant, "session.ingested", {"session_id": sid, "change": counted[sid]})
    if handoffs_extracted <= 0:
        return
    for sid in changed:
        row = await eywa.handoff(sid)
        if row is not None:
            await hooks.emit(tenant, "handoff.ready", {**row.listing(), "via": "ingest"})


async def handoff_uploaded(hooks: Webhooks | None, tenant: str, eywa: Eywa, session_id: str) -> None:
    if hooks is None:
        return
    row = await eywa.handoff(session_id)
    if row is not None:
        await hooks.emit(tenant, "handoff.ready", {**row.listing(), "via": "upload"})


async def forgotten(hooks: Webhooks | None, tenant: str, session_id: str, removed: Sequence[str]) -> None:
    if hooks is not None and removed:
        await hooks.emit(tenant, "session.forgotten", {"session_id": session_id, "forgotten": list(removed)})
