"""The deliverer: a task of the app's lifespan that tries each due delivery of the log, signed, and records
what came of it.

Each try is a POST of the delivery's stored body (the exact bytes signed), with ``X-Macupos-Event``,
``X-Macupos-Delivery`` and ``X-Macupos-Signature-256``, to the webhook's URL and nowhere else: redirects are
not followed (a 3xx is a failed try) and no proxy from the environment is used. A 2xx delivers it; anything
else (or no answer within ``timeout_s``) tries again after ``backoff_s``, doubled after each failure up to
``backoff_max_s``, until ``attempts`` tries are spent and it is marked failed. Only the receiver's status is
kept, never its body. A delivery is at least once: a receiver told apart repeats by ``X-Macupos-Delivery``.

Every wait is bounded: a try by ``timeout_s``, each statement of the log by the same, the loop's sleep by
``poll_s`` (or the next due try, or a wake-up when an event is written), and :meth:`Deliverer.close`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import httpx

from memory import MemoryStoreError
from service.errors import ServiceError
from service.settings import WebhookSettings
from service.webhooks.sign import SIGNATURE_HEADER, sign
from service.webhooks.store import DeliveryStatus, Due, WebhookStore

__all__ = ["Deliverer", "backoff_s"]

logger = logging.getLogger(__name__)

_PRUNE_EVERY_S = 3600.0
_CLOSE_S = 5.0


def backoff_s(settings: WebhookSettings, tries: int) -> float:
    """The wait after the ``tries``-th failed try (1 s, 2 s, 4 s … capped, with the defaults)."""
    return float(min(settings.backoff_max_s, settings.backoff_s * 2 ** min(tries - 1, 60)))


class Deliverer:
    def __init__(
        self, store: WebhookStore, settings: WebhookSettings, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._tries: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self._pruned_at = float("-inf")

    def start(self) -> None:
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,  # no proxy or certificate bundle from the environment: the registered URL only
            timeout=self.settings.timeout_s,
            headers={"User-Agent": "macupos-webhooks/1"},
        )
        self._task = asyncio.create_task(self._run(), name="webhook deliverer")

    def wake(self) -> None:
        """A delivery was written: look now rather than at the next poll."""
        self._wake.set()

    async def close(self) -> None:
        """Stop taking deliveries; tries in flight get a few seconds, then are cancelled (their deliveries
        stay pending in the log and are tried again after the restart)."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                async with asyncio.timeout(_CLOSE_S):
                    await asyncio.shield(self._task)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        tries = list(self._tries)
        if tries:
            _, late = await asyncio.wait(tries, timeout=_CLOSE_S)
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    async def _run(self) -> None:
        s = self.settings
        while not self._closing:
            self._wake.clear()
            try:
                async with asyncio.timeout(s.timeout_s):
                    await self._take_due()
                    await self._prune()
                    wait = await self._until_next()
            except (ServiceError, MemoryStoreError, TimeoutError) as exc:  # the database away for now: later
                logger.warning("webhook deliverer: the delivery log failed: %s", type(exc).__name__)
                wait = s.poll_s
            except Exception:  # a bug must not end the deliverer for good
                logger.exception("webhook deliverer: the delivery log failed")
                wait = s.poll_s
            if self._closing:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _take_due(self) -> None:
        free = self.settings.concurrency - len(self._tries)
        if free <= 0:
            return
        # Held past the try's own bound: no other deliverer takes it meanwhile, and one a crash cut short
        # comes due again on its own.
        hold = self.settings.timeout_s * 2 + 5
        for due in await self.store.claim(self.clock(), hold, free):
            task = asyncio.create_task(self._try(due), name=f"webhook delivery {due.delivery_id}")
            self._tries.add(task)
            task.add_done_callback(self._tries.discard)

    async def _prune(self) -> None:
        now = time.monotonic()
        if now - self._pruned_at < _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        gone = await self.store.prune(self.clock() - self.settings.keep_days * 86400)
        if gone:
            logger.info("webhook deliverer: pruned %d old deliveries from the log", gone)

    async def _until_next(self) -> float:
        if len(self._tries) >= self.settings.concurrency:
            return self.settings.poll_s  # a finished try wakes the loop
        due = await self.store.next_due()
        if due is None:
            return self.settings.poll_s
        return max(0.0, min(self.settings.poll_s, due - self.clock()))

    async def _try(self, due: Due) -> None:
        s = self.settings
        body = due.body.encode()
        headers = {
            "Content-Type": "application/json",
            "X-Macupos-Event": due.event,
            "X-Macupos-Delivery": due.delivery_id,
            SIGNATURE_HEADER: sign(due.secret, body),
        }
        http_status: int | None = None
        error = ""
        assert self._client is not None
        try:
            async with asyncio.timeout(s.timeout_s):
                # Streamed and not read: only the status is kept, whatever the receiver sends back.
                async with self._client.stream("POST", due.url, content=body, headers=headers) as answer:
                    http_status = answer.status_code
            if not 200 <= http_status < 300:
                error = f"the receiver answered {http_status}"
        except TimeoutError:
            error = f"no answer within {s.timeout_s:g} s"
        except httpx.HTTPError as exc:
            error = f"could not deliver ({type(exc).__name__})"
        tries = due.attempts + 1
        status: DeliveryStatus
        now = self.clock()
        if not error:
            status, next_at = "delivered", now
        elif tries >= s.attempts:
            status, next_at = "failed", now
        else:
            status, next_at = "pending", now + backoff_s(s, tries)
        if error:  # the webhook and delivery ids only: the URL may hold a token of the tenant's
            logger.info("webhook %s delivery %s try %d: %s", due.webhook_id, due.delivery_id, tries, error)
        try:
            async with asyncio.timeout(s.timeout_s):
                await self.store.finish(
                    due.delivery_id, status, http_status=http_status, error=error, next_at=next_at, now=now
                )
        except (ServiceError, MemoryStoreError, TimeoutError) as exc:  # the claim runs out: it is tried again
            logger.warning("webhook delivery %s: its outcome was not recorded: %s", due.delivery_id, type(exc).__name__)
        except Exception:
            logger.exception("webhook delivery %s: its outcome was not recorded", due.delivery_id)
        self._wake.set()
