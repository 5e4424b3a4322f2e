"""The server-wide budget for transcript ingests running at once, in bytes of transcript.

An ingest's memory grows with its transcript (parsed entries, the rendered markdown, its full-text index:
a few times the file's size), and every tenant's ingests share one machine (each in a process of its own,
service/ingest_process.py). So an upload is admitted only
while the bytes being ingested, its own included, stay within ``Limits.ingest_budget_bytes``; past it the
answer is 503 with a ``Retry-After``, and nothing of the upload is kept. An upload is always admitted when
no other ingest runs, so one larger than the whole budget (but within the body cap) still goes in.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.requests import Request

from service.calls import service_of
from service.errors import ServiceUnavailable
from service.settings import MB

__all__ = ["IngestBudget", "declared_bytes", "ingest_budget"]

_STATE_KEY = "ingest_budget"
_INGEST_BYTES_PER_S = 4 * MB  # about what one ingest gets through on a loaded core: for Retry-After
_RETRY_MAX_S = 60


class IngestBudget:
    """Bytes of transcript being ingested now, against a limit (0: no limit). Used on the event loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0  # bytes of the ingests running now
        self.running = 0
        self.refused = 0  # uploads answered 503 so far

    def fits(self, size: int) -> bool:
        return self.limit <= 0 or self.running == 0 or self.in_flight + size <= self.limit

    def retry_after(self) -> str:
        """Seconds until the ingests running now are likely done (what a 503 asks the client to wait)."""
        return str(max(1, min(_RETRY_MAX_S, math.ceil(self.in_flight / _INGEST_BYTES_PER_S))))

    def check(self, size: int) -> None:
        """ServiceUnavailable (503, Retry-After) when ``size`` more bytes would not fit now."""
        if not self.fits(size):
            self.refused += 1
            raise ServiceUnavailable(
                "the server is ingesting as much as it can hold at once; try again shortly",
                headers={"Retry-After": self.retry_after()},
                code="ingest_busy",
            )

    @asynccontextmanager
    async def hold(self, size: int, discard: Path | None = None) -> AsyncIterator[None]:
        """The ingest of ``size`` bytes, admitted or refused (503, after removing ``discard``: the spooled
        body); the bytes are held until the block ends, which is when the ingest's work has ended."""
        try:
            self.check(size)
        except ServiceUnavailable:
            if discard is not None:
                await asyncio.to_thread(discard.unlink, True)
            raise
        self.in_flight += size
        self.running += 1
        try:
            yield
        finally:
            self.in_flight -= size
            self.running -= 1


def ingest_budget(request: Request) -> IngestBudget:
    """The app's one budget, made on first use from its settings (the event loop is single-threaded)."""
    state = request.app.state
    budget = getattr(state, _STATE_KEY, None)
    if not isinstance(budget, IngestBudget):
        budget = IngestBudget(service_of(request).settings.limits.ingest_budget_bytes)
        setattr(state, _STATE_KEY, budget)
    return budget


def declared_bytes(request: Request) -> int:
    """The body's size as its Content-Length says (gzip: the compressed size, a lower bound); 0 unknown."""
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isdigit() else 0
