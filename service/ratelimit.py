"""Token buckets, one per key (or client address): ``rate`` requests a second, bursts up to ``burst``."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RateLimiter"]


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

    def take(self, name: str) -> float:
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        tokens, at = self._buckets.pop(name, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[name] = (tokens, now)
        while len(self._buckets) > self.max_names:
            self._buckets.popitem(last=False)
        return wait

    @staticmethod
    def retry_after(wait: float) -> str:
        """The Retry-After header value: whole seconds, at least 1."""
        return str(max(1, math.ceil(wait)))
