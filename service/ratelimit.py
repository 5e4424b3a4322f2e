"""Token buckets, one per key (or client address): ``rate`` requests a second, bursts up to ``burst``.

A bucket's state after a request is what the `X-RateLimit-*` headers say (:class:`RateState`): the burst is
the limit, the whole tokens left are what remains, and the time until the bucket is full again is the reset.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateLimiter", "RateState"]


@dataclass(frozen=True, slots=True)
class RateState:
    """One bucket as a request left it: ``wait`` (0.0 when the request may go, else the seconds until one may)."""

    limit: int
    remaining: int
    reset_s: float  # until the bucket is full again
    wait: float = 0.0

    def headers(self) -> dict[str, str]:
        """The `X-RateLimit-*` headers (whole seconds, rounded up: a client that waits that long is never early)."""
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(math.ceil(round(self.reset_s, 6))),  # float dust must not add a second
        }


class RateLimiter:
    """``take(name)`` is 0.0 when a request may go, else the seconds until one may. A rate of 0 never limits.

    At most ``max_names`` buckets are kept (the least recently used go first), so a flood of new client
    addresses cannot grow it without bound; a dropped bucket comes back full, which only errs toward letting
    a rare caller through.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        max_names: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.max_names = max_names
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # name -> (tokens, at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, name: str) -> float:
        return self.acquire(name).wait if self.enabled else 0.0

    def acquire(self, name: str) -> RateState:
        """Spend one token of ``name``'s bucket when it has one; the bucket's state after (``wait`` > 0: refused)."""
        return self._update(name, spend=True)

    def peek(self, name: str) -> RateState:
        """``name``'s bucket as it is now, nothing spent (the answer to a request refused before its rate counts)."""
        return self._update(name, spend=False)

    def _update(self, name: str, *, spend: bool) -> RateState:
        if not self.enabled:
            return RateState(self.burst, self.burst, 0.0)
        now = self.clock()
        tokens, at = self._buckets.pop(name, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        wait = 0.0
        if spend:
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self.rate
        self._buckets[name] = (tokens, now)
        while len(self._buckets) > self.max_names:
            self._buckets.popitem(last=False)
        return RateState(self.burst, math.floor(tokens), (self.burst - tokens) / self.rate, wait)

    @staticmethod
    def retry_after(wait: float) -> str:
        """The Retry-After header value: whole seconds, at least 1."""
        return str(max(1, math.ceil(wait)))
