"""Single-flight leases across replicas: who does a unit of work now, with a fencing token.

Ten requests for one new image spread over three replicas must make one vision call.
Each process already runs one execution per key (the router's in-process single flight);
the lease decides which *process* runs it. A lease is one Redis key set only when absent
(``SET NX`` semantics, in a script with the fencing counter) with a time to live: the
holder renews it every third of that while it works, and a holder that dies stops
renewing, so its lease lapses and another replica takes the work over. Each grant takes
the next number of a per-key counter, the fencing token: a later holder always has a
larger one, so a write that carries it can be told apart from a stale holder's (the
attempts log records it beside the acquisition). A token is at least Redis's clock in
milliseconds, so it keeps growing when the counter is lost (a Redis restarted without
persistence, a counter that outlived its day): the database that checks tokens
(:mod:`deepseek_eyes.store.fences`) never sees a new holder with a smaller one.

Renewal and release compare the stored value with the holder's own (one script each): a
holder whose lease lapsed and passed to another can neither extend nor delete the new
holder's. A holder whose work failed leaves the failure's code behind for a few seconds
(:meth:`RedisLeases.release`), so the replicas that waited get that code at once instead
of each repeating a call that just failed, as callers within one process share a failure.

:class:`LocalLeases` is the single-process backend: every lease is granted (the
in-process single flight already runs one execution), nothing is shared.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from deepseek_eyes.store.owner import owner
from deepseek_eyes.store.state.connection import RedisConnection
from deepseek_eyes.store.state.limits import KEY_PREFIX

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["FAILURE_TTL_S", "FlightLeases", "Lease", "LocalLeases", "RedisLeases",
           "lease_key"]

#: How long a failed holder's code stays for the replicas that waited on it.
FAILURE_TTL_S = 5.0
#: How long a key's fencing counter outlives its last grant (far beyond any lease).
_FENCE_TTL_MS = 24 * 3600 * 1000

# KEYS: lease, fence counter, failure. ARGV: holder, ttl ms, fence ttl ms.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local now = redis.call('TIME')
local floor = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if fence < floor then fence = floor end
redis.call('SET', KEYS[2], fence, 'PX', ARGV[3])
redis.call('SET', KEYS[1], fence .. ' ' .. ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[3])
return fence
"""
# KEYS: lease. ARGV: value, ttl ms.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS: lease, failure. ARGV: value, failure code ('' for none), failure ttl ms.
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) end
redis.call('DEL', KEYS[1])
return 1
"""


def lease_key(*parts: object) -> str:
    """A fixed-length key for the work ``parts`` name (hashes, a variant, route names)."""
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Lease:
    """A granted lease: the work's key, its fencing token and the holder's value."""

    key: str
    fence: int
    value: str


class FlightLeases(Protocol):
    """Who runs a unit of work now, across the processes that share this backend."""

    @property
    def shared(self) -> bool:
        """False: nothing is shared (every lease is granted at once)."""
        ...

    @property
    def ttl(self) -> float:
        """Seconds a lease lives unless renewed."""
        ...

    async def acquire(self, key: str) -> Lease | None:
        """The lease on ``key``, or None while another holds it."""
        ...

    async def renew(self, lease: Lease) -> bool:
        """Extend ``lease`` by :attr:`ttl`; False when it is no longer ours."""
        ...

    async def release(self, lease: Lease, *, failure: str | None = None) -> None:
        """Give ``lease`` up, leaving ``failure`` (a code) for the waiters."""
        ...

    async def held(self, key: str) -> bool:
        """Whether someone holds the lease on ``key`` now."""
        ...

    async def failure(self, key: str) -> str | None:
        """The code the last holder of ``key`` failed with, for a few seconds."""
        ...


class LocalLeases:
    """The single-process backend: every lease is granted; nothing to wait for."""

    # (noqa ARG002 below: the methods keep the protocol's signature, needing no argument)

    shared = False

    def __init__(self, ttl: float = 15.0) -> None:
        self.ttl = ttl
        self._fences = itertools.count(1)

    async def acquire(self, key: str) -> Lease | None:
        return Lease(key, next(self._fences), "local")

    async def renew(self, lease: Lease) -> bool:  # noqa: ARG002
        return True

    async def release(self, lease: Lease, *, failure: str | None = None) -> None:  # noqa: ARG002
        return None

    async def held(self, key: str) -> bool:  # noqa: ARG002
        return False

    async def failure(self, key: str) -> str | None:  # noqa: ARG002
        return None


class RedisLeases:
    """Leases in Redis, shared by every replica that names the same database.

    Raises (every method):
        StoreError: ``STORE_STATE_UNAVAILABLE`` or ``STORE_STATE_AUTH_FAILED`` (the
            caller decides what to do without the shared state: the router runs the work
            under its in-process flight alone).
    """

    shared = True

    def __init__(self, connection: RedisConnection, *, ttl: float) -> None:
        self.ttl = ttl
        self._connection = connection
        self._holder = f"{owner()}:{uuid.uuid4().hex[:12]}"
        self._scripts: tuple[Redis, dict[str, Any]] | None = None

    def _script(self, redis: Redis, name: str) -> Any:
        if self._scripts is None or self._scripts[0] is not redis:
            self._scripts = (redis, {
                "acquire": redis.register_script(_ACQUIRE),
                "renew": redis.register_script(_RENEW),
                "release": redis.register_script(_RELEASE)})
        return self._scripts[1][name]

    @staticmethod
    def _keys(key: str) -> tuple[str, str, str]:
        return (f"{KEY_PREFIX}lease:{key}", f"{KEY_PREFIX}fence:{key}",
                f"{KEY_PREFIX}failed:{key}")

    async def acquire(self, key: str) -> Lease | None:
        keys = self._keys(key)
        ttl_ms = max(1, round(self.ttl * 1000))

        async def grant(redis: Redis) -> Any:
            return await self._script(redis, "acquire")(
                keys=list(keys), args=[self._holder, ttl_ms, _FENCE_TTL_MS])

        fence = int(await self._connection.run(grant))
        if fence == 0:
            return None
        return Lease(key, fence, f"{fence} {self._holder}")

    async def renew(self, lease: Lease) -> bool:
        lease_name = self._keys(lease.key)[0]
        ttl_ms = max(1, round(self.ttl * 1000))

        async def extend(redis: Redis) -> Any:
            return await self._script(redis, "renew")(keys=[lease_name],
                                                      args=[lease.value, ttl_ms])

        return bool(int(await self._connection.run(extend)))

    async def release(self, lease: Lease, *, failure: str | None = None) -> None:
        lease_name, _, failed = self._keys(lease.key)

        async def give_up(redis: Redis) -> Any:
            return await self._script(redis, "release")(
                keys=[lease_name, failed],
                args=[lease.value, failure or "", round(FAILURE_TTL_S * 1000)])

        await self._connection.run(give_up)

    async def held(self, key: str) -> bool:
        lease_name = self._keys(key)[0]

        async def exists(redis: Redis) -> Any:
            return await redis.exists(lease_name)

        return bool(int(await self._connection.run(exists)))

    async def failure(self, key: str) -> str | None:
        failed = self._keys(key)[2]

        async def read(redis: Redis) -> Any:
            return await redis.get(failed)

        value = await self._connection.run(read)
        return value.decode("ascii") if isinstance(value, bytes) else None
