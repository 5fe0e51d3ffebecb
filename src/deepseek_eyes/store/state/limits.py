"""Rate limits exact across replicas: one token bucket per client key, kept in Redis.

Several gateway replicas behind a balancer must allow a key ``per_minute`` requests in
total, not ``per_minute`` each (LiteLLM's proxy users found their limits multiplied by the
replica count until the buckets moved to Redis). :class:`RedisRateLimiter` keeps each
bucket in one Redis hash and updates it in one Lua script, so a check is atomic however
many replicas ask at once, and it reads the time from Redis (``TIME``), so the replicas'
clocks need not agree. The arithmetic is :class:`~.buckets.TokenBuckets`' own: a client
sees the same limits and the same ``Retry-After`` from one process or from several.

While Redis cannot be reached (:mod:`.connection`: a timeout, a refusal, a wrong
password), ``store.state_unavailable`` decides: ``"local"`` counts in this replica's own
buckets meanwhile (the limit holds per replica, so at most N times the total with N
replicas), ``"fail_closed"`` raises the connection's error, which the security layer
answers with 503 and its code.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from deepseek_eyes.errors import StoreError
from deepseek_eyes.settings.store import StateUnavailable
from deepseek_eyes.store.state.buckets import TokenBuckets, bucket_capacity
from deepseek_eyes.store.state.connection import RedisConnection

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["KEY_PREFIX", "Limiter", "RedisRateLimiter"]

#: Every key this package writes starts with this.
KEY_PREFIX = "deepseek-eyes:"

# KEYS[1] the bucket; ARGV[1] tokens per millisecond, ARGV[2] the capacity. Returns the
# milliseconds to wait as a string ("0": allowed), since Lua numbers reach the client as
# truncated integers. The bucket expires once it would be full again: an idle client
# costs nothing.
_BUCKET_SCRIPT = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + tonumber(now_parts[2]) / 1000
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(stored[1])
local at = tonumber(stored[2])
if tokens == nil or at == nil then
  tokens = capacity
  at = now
end
if now > at then
  tokens = math.min(capacity, tokens + (now - at) * rate)
  at = now
end
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'at', string.format('%.17g', at))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate) + 1000)
return string.format('%.17g', wait)
"""


class Limiter(Protocol):
    """What the security layer counts requests with: ``allow`` answers 0 (go on) or the
    seconds to wait, at once (this process's buckets) or awaited (a shared store)."""

    @property
    def rate(self) -> float: ...

    def allow(self, client: str) -> float | Awaitable[float]: ...


class RedisRateLimiter:
    """``per_minute`` requests a client key may make across every replica sharing Redis.

    ``namespace`` keeps two limiters' buckets apart (the gateway's per-key one and its
    per-address one for callers without the key)."""

    def __init__(self, connection: RedisConnection, per_minute: int, *, namespace: str,
                 unavailable: StateUnavailable,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = bucket_capacity(per_minute)
        self.clock = clock
        self.unavailable = unavailable
        self._connection = connection
        self._prefix = f"{KEY_PREFIX}rate:{namespace}:{per_minute}:"
        self._args = (repr(self.rate / 1000.0), repr(self.capacity))
        self._local = TokenBuckets(per_minute, clock)  # the fallback under "local"
        self._script: tuple[Redis, Any] | None = None

    async def allow(self, client: str) -> float:
        """0 when the request may proceed, else the seconds to wait.

        Raises:
            StoreError: ``STORE_STATE_UNAVAILABLE`` or ``STORE_STATE_AUTH_FAILED`` while
                the shared state cannot be reached, under ``"fail_closed"`` only.
        """
        key = self._prefix + client

        async def check(redis: Redis) -> Any:
            return await self._bucket_script(redis)(keys=[key], args=list(self._args))

        try:
            waited = await self._connection.run(check)
        except StoreError:
            if self.unavailable == "fail_closed":
                raise
            return self._local.allow(client)
        return float(waited) / 1000.0

    def _bucket_script(self, redis: Redis) -> Any:
        """The registered script (EVALSHA, and EVAL again after a Redis restart flushed
        its script cache), per client object."""
        if self._script is None or self._script[0] is not redis:
            self._script = (redis, redis.register_script(_BUCKET_SCRIPT))
        return self._script[1]
