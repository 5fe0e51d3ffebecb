"""Single flight across replicas: one acquisition of an image however many processes ask.

The in-process :class:`~deepseek_eyes.vision.routing.flight.SingleFlight` stays in front:
one process asks for the lease once, whatever the number of its callers. Then the lease
(:mod:`deepseek_eyes.store.state.leases`) decides which process does the work:

* **The holder** runs it, renewing the lease every third of its lifetime while it works,
  and releases it when done; a failure leaves its code behind for the waiters. A holder
  that learns its lease passed on (a renewal finds another holder's value, or none
  answers before the lease would have expired) cancels its work at once
  (``VISION_FLIGHT_LEASE_LOST``, told to the caller's attempts log) and waits for the new
  holder's result instead. Learning it may come too late (a process paused past its
  lease resumes straight into its write), so the write that publishes the result checks
  the fencing token in the database, in its own transaction
  (:mod:`deepseek_eyes.store.fences`): a stale holder's result is never published after
  the new holder claimed the work.
* **The others wait** for the evidence to appear in the evidence cache (the database the
  replicas share) and answer from it, as a cache hit; when the lease is gone without
  evidence they read the holder's failure code and fail with it, or, when there is none
  (the holder died and its lease lapsed), one of them takes the lease and does the work:
  it is retried, never done twice at once.
* **Without the shared state** (Redis down, the local backend) the work runs under the
  in-process flight alone: at most one acquisition per replica, never a refused image.

Waiting polls (20 ms, doubling to 250 ms): the evidence arrives through the database,
which has no notification the replicas share, and a poll is one indexed read. The wait is
bounded by 20 lease lifetimes (``VISION_FLIGHT_TIMEOUT``); a holder that lives that long
is renewing, so working.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from deepseek_eyes.errors import (
    ERROR_CODES,
    DeepSeekEyesError,
    ImageError,
    StoreError,
    VisionError,
)
from deepseek_eyes.store.fences import lease_lost
from deepseek_eyes.store.state.leases import FlightLeases, Lease

__all__ = ["FLIGHT_WAIT_LEASES", "RemoteOutcome", "SharedFlight", "remote_failure"]

T = TypeVar("T")
_log = logging.getLogger(__name__)

#: A waiter gives up after this many lease lifetimes (``VISION_FLIGHT_TIMEOUT``).
FLIGHT_WAIT_LEASES = 20
_FIRST_POLL_S = 0.02
_LAST_POLL_S = 0.25


@dataclass(frozen=True)
class RemoteOutcome(Generic[T]):
    """How a shared flight ended for this process: ``value`` from its own work
    (``lease`` the one it held, None without shared state) or found after waiting on
    another holder (``waited_ms`` > 0, ``lease`` None)."""

    value: T
    lease: Lease | None
    waited_ms: float = 0.0


def remote_failure(code: str) -> DeepSeekEyesError:
    """The error a waiter raises for the code another replica's acquisition failed with,
    in that code's family."""
    message = f"the acquisition another replica ran for this image failed ({code})"
    details = {"flight": "remote"}
    if code not in ERROR_CODES:
        return VisionError(message, code="VISION_FAILOVER_EXHAUSTED", details=details)
    family = code.split("_", 1)[0]
    kind: type[DeepSeekEyesError] = {"IMAGE": ImageError, "STORE": StoreError}.get(
        family, VisionError if family == "VISION" else DeepSeekEyesError)
    return kind(message, code=code, details=details)


def _state_down(exc: StoreError) -> bool:
    """Whether ``exc`` says the shared state cannot be reached (not the database, nor a
    holder's failure code passed on)."""
    return exc.code.startswith("STORE_STATE_") and exc.details.get("flight") != "remote"


class SharedFlight:
    """Runs one unit of work per key across the processes sharing ``leases``."""

    def __init__(self, leases: FlightLeases,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._leases = leases
        self._clock = clock
        self._warned = False

    @property
    def shared(self) -> bool:
        return self._leases.shared

    async def run(self, key: str, work: Callable[[Lease | None], Awaitable[T]],
                  found: Callable[[], T | None], *,
                  lost: Callable[[DeepSeekEyesError], None] | None = None,
                  ) -> RemoteOutcome[T]:
        """``work`` here under the lease on ``key``, or the value ``found`` gives once
        another process's work is done.

        ``found`` is asked while waiting and once right after a lease is granted (a holder
        that finished just before this process asked leaves nothing to do). A holder that
        learns its lease passed on (``VISION_FLIGHT_LEASE_LOST``: renewal found another
        holder or could not renew before expiry, or the fenced write refused) has its work
        cancelled, tells ``lost`` (the attempts log), and waits for the new holder's result
        like any other waiter.

        Raises:
            DeepSeekEyesError: what ``work`` raised; for a waiter, the holder's failure
                code (:func:`remote_failure`), or ``VISION_FLIGHT_TIMEOUT``.
        """
        if not self._leases.shared:
            return RemoteOutcome(await work(None), None)
        started = self._clock()
        deadline = started + FLIGHT_WAIT_LEASES * self._leases.ttl
        while True:
            asked = self._clock()
            try:
                lease = await self._leases.acquire(key)
            except StoreError as exc:
                if not _state_down(exc):
                    raise
                return RemoteOutcome(await self._alone(exc, work), None)
            if lease is not None:
                value = found()
                if value is not None:
                    await self._release(lease, None)
                    return RemoteOutcome(value, None, (self._clock() - started) * 1000)
                try:
                    return RemoteOutcome(await self._hold(lease, work, asked), lease)
                except DeepSeekEyesError as exc:
                    if exc.details.get("flight") != "lost":
                        raise
                    if lost is not None:
                        lost(exc)
                    if self._clock() >= deadline:
                        raise
                    continue  # the new holder's result, once it is there
            try:
                value = await self._wait(key, found, deadline)
            except StoreError as exc:
                if not _state_down(exc):  # the database's own failure, a holder's code
                    raise
                return RemoteOutcome(await self._alone(exc, work), None)
            if value is not None:
                return RemoteOutcome(value, None, (self._clock() - started) * 1000)
            # The lease lapsed (its holder died) with no evidence: take it over.

    async def _alone(self, exc: StoreError, work: Callable[[Lease | None], Awaitable[T]]) -> T:
        if not self._warned:
            _log.warning("single flight without the shared state (%s): this process "
                         "acquires on its own until it answers again", exc.code)
            self._warned = True
        return await work(None)

    async def _hold(self, lease: Lease, work: Callable[[Lease | None], Awaitable[T]],
                    asked: float) -> T:
        """``work`` under ``lease`` (granted after ``asked``), cancelled with
        ``VISION_FLIGHT_LEASE_LOST`` as soon as the renewal learns the lease passed on."""
        loop = asyncio.get_running_loop()
        doing: asyncio.Future[T] = asyncio.ensure_future(work(lease))
        renewal = loop.create_task(self._renew(lease, asked))
        failure: str | None = None
        try:
            await asyncio.wait((doing, renewal), return_when=asyncio.FIRST_COMPLETED)
            if not doing.done():  # the renewal ended first: the lease is gone
                doing.cancel()
                with contextlib.suppress(asyncio.CancelledError, DeepSeekEyesError):
                    await doing
                raise lease_lost(lease.fence, renewal.result())
            return doing.result()
        except DeepSeekEyesError as exc:
            # A lost lease leaves no code behind: the waiters take the work over.
            failure = None if exc.details.get("flight") == "lost" else exc.code
            raise
        finally:
            for task in (doing, renewal):
                task.cancel()
            await asyncio.wait((doing, renewal))
            for task in (doing, renewal):
                if not task.cancelled():
                    task.exception()  # raised above already, or moot once cancelled
            # Released under a shield: a cancelled caller still frees the lease at once
            # rather than making the others wait out its lifetime. A lost lease is not
            # ours any more: the release compares and leaves the new holder's alone.
            await asyncio.shield(self._release(lease, failure))

    async def _renew(self, lease: Lease, asked: float) -> str:
        """Renew ``lease`` every third of its lifetime; return why it was lost: another
        holder's value found, or no renewal answered before it expired (counted from
        before the grant was asked for, so never later than Redis's own expiry)."""
        ttl = self._leases.ttl
        expires = asked + ttl
        while True:
            await asyncio.sleep(max(0.0, min(ttl / 3, expires - self._clock())))
            tried = self._clock()
            try:
                kept = await self._leases.renew(lease)
            except StoreError:
                if self._clock() >= expires:
                    return "no renewal before it expired"
                continue  # the state is down: retried until the lease would expire
            if not kept:
                return "another holder has it"
            expires = tried + ttl

    async def _release(self, lease: Lease, failure: str | None) -> None:
        with contextlib.suppress(StoreError):  # unreleased, it lapses by itself
            await self._leases.release(lease, failure=failure)

    async def _wait(self, key: str, found: Callable[[], T | None],
                    deadline: float) -> T | None:
        """The value once it appears; None once the lease is gone without one.

        Raises:
            DeepSeekEyesError: the holder's failure, or ``VISION_FLIGHT_TIMEOUT``.
            StoreError: the shared state stopped answering.
        """
        delay = _FIRST_POLL_S
        while True:
            value = found()
            if value is not None:
                return value
            if not await self._leases.held(key):
                code = await self._leases.failure(key)
                if code is not None:
                    raise remote_failure(code)
                return found()
            if self._clock() >= deadline:
                raise VisionError(
                    "another replica is still acquiring this image; try again",
                    code="VISION_FLIGHT_TIMEOUT", details={"flight": "remote"})
            await asyncio.sleep(delay)
            delay = min(_LAST_POLL_S, delay * 2)
