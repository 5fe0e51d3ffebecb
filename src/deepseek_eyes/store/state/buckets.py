"""The token bucket every rate limit counts with, in this process.

One bucket per client key: ``per_minute`` requests a minute on average, bursts of a sixth
of that (at least 10). It is the serving layer's
:class:`~deepseek_eyes.serving.security.RateLimiter` and, while the shared state cannot be
reached under ``store.state_unavailable = "local"``, what a replica counts with meanwhile.
The Redis limiter (:mod:`.limits`) runs the same arithmetic in one script, so a client sees
the same limits, ``Retry-After`` included, from one process or from several.

The table holds at most ``max_clients`` buckets, least recently used evicted first: a flood
of new addresses cannot grow memory without bound.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["MAX_CLIENTS", "TokenBuckets", "bucket_capacity"]

MAX_CLIENTS = 4096


def bucket_capacity(per_minute: int) -> float:
    """A bucket's burst: a sixth of the minute's allowance, at least 10."""
    return max(10.0, per_minute / 6.0)


class TokenBuckets:
    """A token bucket per client: ``per_minute`` requests, bursts of a sixth of that."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic,
                 *, max_clients: int = MAX_CLIENTS) -> None:
        self.rate = per_minute / 60.0
        self.capacity = bucket_capacity(per_minute)
        self.clock = clock
        self._max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, client: str) -> float:
        """0 when the request may proceed, else the seconds to wait."""
        now = self.clock()
        tokens, last = self._buckets.pop(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self._max_clients:
            self._buckets.popitem(last=False)
        return wait
