"""The connection to Redis: imported late, bounded in time, its failures as our codes.

Every command a replica sends to the shared state passes :meth:`RedisConnection.run`,
which holds the three rules a newcomer would otherwise bend:

* **Bounded.** A command, connecting included, takes at most ``store.state_timeout``; the
  client's own retries are off (a retry loop inside a request's limiter check would
  multiply the wait). A Redis that does not answer in time is ``STORE_STATE_UNAVAILABLE``.
* **A pause after a failure.** Once a command has failed, the next ones fail at once with
  the same code for ``retry_after`` seconds (1 s) instead of each waiting out the timeout
  against a dead or black-holed server; then one command tries again. An outage is logged
  once, with its code and the target's display form (never a password), and so is the
  recovery.
* **One client per event loop.** ``redis.asyncio`` binds its connections to the loop that
  opened them; a CLI command and a gateway each run one loop, a test may run several, so
  the client is made in the running loop on first use and again in a new one.

The ``redis`` package is imported only here and only when a ``redis://`` URL is configured:
``serve`` on the local backend never loads it (tests/gateway/test_import_weight.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from deepseek_eyes.errors import StoreError
from deepseek_eyes.settings.store import StateTarget

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RETRY_AFTER_S", "RedisConnection", "require_redis"]

T = TypeVar("T")
_log = logging.getLogger(__name__)

#: After a failed command, further commands fail at once for this long, then one tries.
RETRY_AFTER_S = 1.0


def require_redis() -> None:
    """Raises:
        StoreError: ``STORE_STATE_BACKEND_MISSING`` when the ``redis`` package is absent."""
    try:
        import redis.asyncio  # noqa: F401 - the check is the import
    except ImportError:
        raise StoreError(
            "store.state_url names Redis but the redis package is not installed "
            "(pip install 'deepseek-eyes[scale]')", code="STORE_STATE_BACKEND_MISSING",
        ) from None


class RedisConnection:
    """Commands to one Redis database, each bounded by ``timeout`` seconds."""

    def __init__(self, target: StateTarget, *, password: str | None, timeout: float,
                 retry_after: float = RETRY_AFTER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        require_redis()
        self.target = target
        self.timeout = timeout
        self._password = password
        self._retry_after = retry_after
        self._clock = clock
        self._client: tuple[asyncio.AbstractEventLoop, Redis] | None = None
        self._down: StoreError | None = None  # the failure that stands until _down_until
        self._down_until = 0.0

    @property
    def display(self) -> str:
        return self.target.display()

    @property
    def down(self) -> bool:
        """Whether the last command failed (and the pause after it may still run)."""
        return self._down is not None

    def client(self) -> Redis:
        """The running loop's client (made on first use in that loop)."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._client[0] is loop:
            return self._client[1]
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        target = self.target
        client = Redis(
            host=target.host, port=target.port, db=target.db, username=target.username,
            password=self._password, ssl=target.tls, socket_timeout=self.timeout,
            socket_connect_timeout=self.timeout, retry=Retry(NoBackoff(), 0),
            health_check_interval=0, client_name="deepseek-eyes",
        )
        self._client = (loop, client)
        return client

    async def run(self, command: Callable[[Redis], Awaitable[T]]) -> T:
        """``command`` on the client, within the timeout.

        Raises:
            StoreError: ``STORE_STATE_UNAVAILABLE`` (no answer in time, refused, reset,
                an error reply) or ``STORE_STATE_AUTH_FAILED`` (the password or user was
                refused); during the pause after a failure, that failure again at once.
        """
        if self._down is not None and self._clock() < self._down_until:
            raise StoreError(self._down.message, code=self._down.code,
                             details=dict(self._down.details))
        try:
            async with asyncio.timeout(self.timeout):
                result = await command(self.client())
        except Exception as exc:
            error = self._error(exc)
            if error is None:
                raise
            self._failed(error)
            raise error from None
        if self._down is not None:
            _log.warning("shared state %s answers again", self.display)
            self._down = None
        return result

    async def ping(self) -> None:
        """One round trip.

        Raises:
            StoreError: as :meth:`run`.
        """
        async def ping(client: Redis) -> Any:
            return await client.ping()
        await self.run(ping)

    async def aclose(self) -> None:
        """Close the running loop's client (one made in another loop is dropped)."""
        current, self._client = self._client, None
        if current is not None and current[0] is asyncio.get_running_loop():
            await current[1].aclose()

    def _failed(self, error: StoreError) -> None:
        if self._down is None or self._down.code != error.code:
            # The message names the target by its display form and the kind of failure,
            # never the exception's text (a server's reply could echo what we sent).
            _log.warning("shared state %s: %s (%s)", self.display, error.message, error.code)
        self._down = error
        self._down_until = self._clock() + self._retry_after

    def _error(self, exc: Exception) -> StoreError | None:
        """Our error for a failed command; None for one that is not Redis's (a bug)."""
        from redis import exceptions as redis_errors

        where = {"state": self.display}
        if isinstance(exc, redis_errors.AuthenticationError | redis_errors.AuthorizationError
                      | redis_errors.NoPermissionError) or (
                isinstance(exc, redis_errors.ResponseError)
                and str(exc).startswith(("NOAUTH", "WRONGPASS"))):
            return StoreError("the shared state refused the password or user",
                              code="STORE_STATE_AUTH_FAILED", details=where)
        if isinstance(exc, TimeoutError | redis_errors.TimeoutError):
            return StoreError(f"the shared state did not answer within {self.timeout:g}s",
                              code="STORE_STATE_UNAVAILABLE",
                              details={**where, "reason": "timeout"})
        if isinstance(exc, redis_errors.RedisError | OSError):
            return StoreError("the shared state cannot be reached or refused the command",
                              code="STORE_STATE_UNAVAILABLE",
                              details={**where, "reason": type(exc).__name__})
        return None
