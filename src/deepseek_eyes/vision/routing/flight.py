"""Single flight: concurrent calls for the same work share one execution.

Ten requests for the same new image used to run ten decodes and ten route calls (for the
local engine, one after another behind its lock). :class:`SingleFlight` keys each unit of
work by what determines its result; while one execution of a key is in flight, later callers
with that key wait for it instead of starting another. Nothing is remembered once the work
ends: a finished result is the evidence cache's business, not this module's.

Two decisions a newcomer would otherwise undo:

* **The work runs in a task of its own, not in the first caller's.** If it ran inline, the
  first caller's cancellation (a client that hung up, a caller's timeout) would cancel the
  work every waiter depends on, and the waiters would have to start over — for the local
  engine only after the abandoned OCR thread finished anyway. As a task owned by the flight
  it outlives any one caller; it is cancelled only when *every* caller has gone, which keeps
  the old behaviour of a lone caller (cancelling it stops its route call) and never spends
  a provider call nobody waits for. A caller joining after that cancellation starts afresh.
* **Every caller gets its own copy of a failure.** Callers add to ``exc.details`` (the
  bridge, the router's attempts); one shared exception object would carry one caller's
  additions into another's report. The original stays with the task; each caller gets a
  shallow copy with a deep copy of ``details``, the same cause and the same traceback.

The flight is asyncio-only (the runtime and the gateway run on asyncio; anyio's cancel
scopes cancel a waiting caller like any other asyncio task) and belongs to one event loop.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["FlightOutcome", "SingleFlight", "copy_error"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    """One acquisition in flight and how many callers wait on it."""

    task: asyncio.Task[T]
    callers: int = 0


@dataclass(frozen=True)
class FlightOutcome(Generic[T]):
    """How one caller's wait ended: ``joined`` is False for the caller that started the
    work and True for every caller that found it already in flight."""

    task: asyncio.Task[T] = field(repr=False)
    joined: bool
    waited_ms: float

    def result(self) -> T:
        """The shared result, or a fresh copy of the shared failure.

        Raises:
            BaseException: a copy of whatever the work raised (see the module docstring).
        """
        if self.task.cancelled():
            raise asyncio.CancelledError
        exc = self.task.exception()
        if exc is not None:
            raise copy_error(exc)
        return self.task.result()


class SingleFlight(Generic[K, T]):
    """At most one execution per key at a time; concurrent callers share its outcome."""

    def __init__(self) -> None:
        self._flights: dict[K, _Flight[T]] = {}

    async def run(
        self, key: K, work: Callable[[], Coroutine[Any, Any, T]]
    ) -> FlightOutcome[T]:
        """Run ``work()`` for ``key`` unless it is already running; wait for the outcome.

        ``work`` is called only by the caller that starts the flight. The outcome's
        :meth:`~FlightOutcome.result` gives the value or raises a copy of the failure.

        Raises:
            asyncio.CancelledError: this caller was cancelled; the work goes on for the
                others, and is cancelled only when no caller is left.
        """
        flight = self._flights.get(key)
        joined = flight is not None
        if flight is None:
            flight = _Flight(asyncio.get_running_loop().create_task(work()))
            self._flights[key] = flight
            flight.task.add_done_callback(lambda task: self._landed(key, task))
        flight.callers += 1
        started = time.perf_counter()
        try:
            # asyncio.wait neither cancels the task when this caller is cancelled (as
            # awaiting it would) nor raises its exception (each caller gets a copy).
            await asyncio.wait((flight.task,))
        except asyncio.CancelledError:
            flight.callers -= 1
            if flight.callers == 0 and not flight.task.done():
                if self._flights.get(key) is flight:
                    del self._flights[key]  # a later caller must not join a cancelled task
                flight.task.cancel()
            raise
        flight.callers -= 1
        return FlightOutcome(flight.task, joined, (time.perf_counter() - started) * 1000)

    def _landed(self, key: K, task: asyncio.Task[T]) -> None:
        current = self._flights.get(key)
        if current is not None and current.task is task:
            del self._flights[key]
        if not task.cancelled():
            task.exception()  # retrieved here: a failure nobody waited for is not "lost"


def copy_error(exc: BaseException) -> BaseException:
    """A copy of ``exc`` a caller may change freely: its own ``details`` (deep-copied), the
    original's cause, context and traceback. An exception that cannot be copied is
    returned as it is."""
    try:
        clone = copy.copy(exc)
    except Exception:  # an exception class whose constructor its args cannot rebuild
        return exc
    if isinstance(clone, DeepSeekEyesError) and isinstance(exc, DeepSeekEyesError):
        clone.details = copy.deepcopy(exc.details)
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        clone.__notes__ = list(notes)
    clone.__cause__ = exc.__cause__
    clone.__context__ = exc.__context__
    clone.__suppress_context__ = exc.__suppress_context__
    return clone.with_traceback(exc.__traceback__)
