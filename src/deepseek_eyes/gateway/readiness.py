"""The gateway's readiness checks: the data directory and its database (SQLite, or the
PostgreSQL database of ``[store] database_url``), the upstream, the shared state.

Three checks, each named for what a later backend replaces (:mod:`deepseek_eyes.serving.
readiness` holds the registry, the bounds and the cache):

* ``database``: the data directory takes writes (not a read-only mount, room left on its
  file system), the database answers a read, and the store's write lock can be taken and
  released (``BEGIN IMMEDIATE``; queued log rows are written with it; on PostgreSQL, where
  a write transaction takes no lock until it needs one (store/postgres.py), the read is
  the check and queued rows are written), ``backend`` saying which. Run in a worker
  thread: the database is blocking.
* ``upstream``: the ``[llm]`` endpoint answers an HTTP request (``GET /models``, no retry,
  ``gateway.readiness_timeout``), its verdict kept ``gateway.readiness_upstream_ttl``
  seconds, so a balancer that probes every second makes one request in that time, and
  never a model call. Any answer counts as reachable except 401 and 403 (the key is
  refused: every turn would fail); a busy upstream (429, 5xx) is busy for every replica
  alike, and taking them all out of the balancer would turn a slowdown into an outage. A
  missing key (``LLM_CREDENTIAL_MISSING``) is not ready.
* ``shared_state``: with ``store.state_url = "local"`` the state replicas would share
  (rate limits, single-flight) lives in this process and route verdicts in its database,
  so the check always passes and says ``backend: "local"``. On Redis it is one ``PING``
  within ``gateway.readiness_timeout`` (verdict kept 1 s), ``backend: "redis"``; a failure
  is ``STORE_STATE_UNAVAILABLE`` or ``STORE_STATE_AUTH_FAILED``, and it makes the gateway
  not ready only under ``store.state_unavailable = "fail_closed"`` (requests are refused
  then anyway); under ``"local"`` the check is advisory: shown failed, still ready.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio

from deepseek_eyes.errors import GatewayError, LLMError, StoreError
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.serving.readiness import CachedCheck, Readiness
from deepseek_eyes.settings import GatewaySettings
from deepseek_eyes.store.failures import check_writable
from deepseek_eyes.store.state import SharedState

__all__ = ["MIN_FREE_BYTES", "DatabaseCheck", "LocalStateCheck", "SharedStateCheck",
           "UpstreamCheck", "gateway_readiness"]

#: Below this much room on the data directory's file system the gateway is not ready: a
#: turn writes its request, usage, audit and answer rows, and blobs for its images.
MIN_FREE_BYTES = 8 * 1024 * 1024
#: A database verdict is reused this long: a probe flood costs one check a second.
_DATABASE_TTL_S = 1.0
#: A shared-state verdict likewise: one PING a second however often the balancer probes.
_SHARED_STATE_TTL_S = 1.0


class DatabaseCheck:
    """The data directory and the store's database (SQLite in it, or PostgreSQL) take
    reads and writes."""

    name = "database"

    def __init__(self, home: DataHome, *, min_free_bytes: int = MIN_FREE_BYTES) -> None:
        self._home = home
        self._min_free = min_free_bytes

    async def __call__(self) -> None:
        await anyio.to_thread.run_sync(self.check)

    def check(self) -> None:
        """Raises:
            StoreError: ``STORE_READ_ONLY``, ``STORE_FULL``, ``STORE_READ_FAILED`` or
                ``STORE_WRITE_FAILED``."""
        root = self._home.root
        check_writable([root, *(root / f"eyes.db{end}" for end in ("", "-wal", "-shm"))],
                       "the data directory cannot be written")
        if _free_bytes(root) < self._min_free:
            raise StoreError("the data directory's file system is (nearly) full",
                             code="STORE_FULL")
        db = self._home.db
        db.query("SELECT MAX(seq) FROM chain")
        with db.transaction():  # BEGIN IMMEDIATE: the write lock, then an empty commit
            pass

    @property
    def backend(self) -> str:
        """``sqlite``, or ``postgresql`` when the store's tables are there: the same
        check (blobs stay in the data directory; the read, and an empty write
        transaction, which on PostgreSQL takes no lock), a server that cannot be reached
        failing it with ``STORE_DATABASE_UNAVAILABLE``."""
        return self._home.db.dialect


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError as exc:
        raise StoreError("the data directory's file system cannot be read",
                         code="STORE_READ_FAILED") from exc


class UpstreamCheck:
    """The ``[llm]`` endpoint answers, and does not refuse the key."""

    name = "upstream"

    def __init__(self, client: ChatClient, *, timeout: float,
                 credential_error: LLMError | None = None) -> None:
        self._client = client
        self._timeout = timeout
        self._credential_error = credential_error

    async def __call__(self) -> None:
        """Raises:
            LLMError: ``LLM_CREDENTIAL_MISSING``, ``LLM_UNAVAILABLE`` or ``LLM_TIMEOUT``.
            GatewayError: ``GATEWAY_UPSTREAM_KEY_REFUSED`` for a 401 or 403."""
        if self._credential_error is not None:
            raise self._credential_error
        status = await self._client.reach(self._timeout)
        if status in (401, 403):
            raise GatewayError(f"the upstream refused the [llm] key (HTTP {status})",
                               code="GATEWAY_UPSTREAM_KEY_REFUSED", details={"status": status})


class LocalStateCheck:
    """Shared state is this process's own: nothing to reach."""

    name = "shared_state"

    async def __call__(self) -> None:
        return None


class SharedStateCheck:
    """The shared state (Redis) answers one round trip."""

    name = "shared_state"

    def __init__(self, state: SharedState) -> None:
        self._state = state

    async def __call__(self) -> None:
        """Raises:
            StoreError: ``STORE_STATE_UNAVAILABLE`` or ``STORE_STATE_AUTH_FAILED``."""
        await self._state.ping()


def gateway_readiness(home: DataHome, client: ChatClient, settings: GatewaySettings, *,
                      credential_error: LLMError | None = None,
                      state: SharedState | None = None) -> Readiness:
    """The gateway's checks: database, upstream, shared state (``state``'s backend;
    local when None)."""
    timeout = settings.readiness_timeout
    shared = CachedCheck(LocalStateCheck(), ttl=3600.0, timeout=timeout, detail="local")
    if state is not None and state.backend != "local":
        shared = CachedCheck(SharedStateCheck(state), ttl=_SHARED_STATE_TTL_S,
                             failed_ttl=_SHARED_STATE_TTL_S, timeout=timeout,
                             detail=state.backend,
                             required=state.unavailable == "fail_closed")
    database = DatabaseCheck(home)
    return Readiness([
        CachedCheck(database, ttl=_DATABASE_TTL_S, timeout=timeout, detail=database.backend),
        CachedCheck(UpstreamCheck(client, timeout=timeout, credential_error=credential_error),
                    ttl=settings.readiness_upstream_ttl, timeout=timeout + 0.5),
        shared,
    ])
