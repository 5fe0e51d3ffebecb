"""Where one request's time goes, by stage, so a slowdown shows where it happened.

A request that wants its time split opens a :class:`StageClock` (``with StageClock() as
clock``); code at every layer names the stage it runs with ``with stage("store"):``. Time is
*exclusive*: a stage entered inside another one pauses the outer one, so the stages add up
to at most the clock's total, and what no stage claims is the code between stages (and
the event loop's own bookkeeping). The stages:

``http``
    the HTTP layer every server shares: the outer ASGI layers, the security checks and
    the body received whole, the framework's routing to a handler and its sending of the
    answer (handed over: :func:`hand_to`), a turn's concurrency slot taken, the drain's
    watch over each wait set up and taken down, and a stream's response started
``parse``
    the request body parsed and checked, a front's format translated (the gateway)
``admission``
    images decoded, checked and stored (the vision bridge's intake)
``vision``
    evidence acquired for images: cache lookups, route calls, the schema gate
``store``
    the database: queries, and write transactions with what runs inside them; a model
    call booked (its usage and audit rows queued for the next write)
``prepare``
    the turn's own work before a model call: the history matched against its session,
    reasoning restored, the model-facing view built and fitted to the history budget
``upstream``
    the text model's HTTP call (sending, waiting, reading the answer, a stream's chunks
    one by one) and its latency metric
``answer``
    the answer after the model call: the turn's result assembled, its history noted for
    the next request, the client's JSON (or a front's translation) encoded; a front's
    stream of the turn's events made (up to its first event, what the turn's own stages
    do not claim)
``seal``
    the signed checkpoint of the audit chain

A layer that hands the request on to code it does not own, whose work is of one stage (the
gateway's outer ASGI layers, then a web framework's routing up to our handler: ``http``),
calls :func:`hand_to`: the time until the next stage starts counts as that stage, not as
nobody's.

Without an open clock, marking a stage costs one context-variable lookup. Work handed to
another thread (``anyio.to_thread``) is not split: the waiting stage keeps that time. Work
that runs concurrently on the event loop (parallel tool calls) is split only roughly, by
who entered a stage last. The gateway reports a clock as a ``Server-Timing`` header when
``gateway.server_timing`` is on; ``bench/conversation.py`` reads it.
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar, Token
from types import TracebackType

__all__ = ["STAGES", "StageClock", "hand_to", "stage"]

STAGES = ("http", "parse", "admission", "vision", "store", "prepare", "upstream", "answer", "seal")

_current: ContextVar[StageClock | None] = ContextVar("deepseekeyes_stage_clock", default=None)


class StageClock:
    """Exclusive time per stage for the code running in this context, on this thread."""

    def __init__(self) -> None:
        self.totals = dict.fromkeys(STAGES, 0.0)
        self.started = time.perf_counter()
        self.ended: float | None = None
        self._thread = threading.get_ident()
        self._stack: list[str] = []
        self._mark = self.started
        #: The stage the time until the next one starts counts as (see hand): None, nobody's.
        self._handed: str | None = None
        self._token: Token[StageClock | None] | None = None

    def __enter__(self) -> StageClock:
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if self._token is not None:
            _current.reset(self._token)
            self._token = None

    def stop(self) -> None:
        """End the clock (idempotent): its total stops growing, and so does every stage's.
        The stage running (or handed the time) at the stop gets its time up to it: a stream
        stops the clock at its response's start, inside the stage that starts it."""
        if self.ended is None:
            self.ended = now = time.perf_counter()
            self._count_to(now)
            self._mark = now

    def hand(self, name: str) -> None:
        """Count the time from now until the next stage starts (or the clock stops) as
        ``name``; only between stages, on the clock's own thread."""
        if self.ended is None and not self._stack \
                and threading.get_ident() == self._thread:
            self._mark = time.perf_counter()
            self._handed = name

    @property
    def total(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    def enter(self, name: str) -> bool:
        """Start ``name``; False (and nothing counted) off the clock's own thread or after
        it stopped."""
        if self.ended is not None or threading.get_ident() != self._thread:
            return False
        now = time.perf_counter()
        self._count_to(now)
        self._stack.append(name)
        self._mark = now
        return True

    def _count_to(self, now: float) -> None:
        """The time since the last mark to the stage running, or else to the one it was
        handed to (whose hand ends here)."""
        if self._stack:
            self.totals[self._stack[-1]] += now - self._mark
        elif self._handed is not None:
            self.totals[self._handed] += now - self._mark
            self._handed = None

    def leave(self) -> None:
        now = self.ended if self.ended is not None else time.perf_counter()
        name = self._stack.pop()
        self.totals[name] += now - self._mark
        self._mark = now

    def server_timing(self) -> str:
        """The ``Server-Timing`` header value: each stage that took time, then ``total``
        (milliseconds, as the header's ``dur`` is)."""
        parts = [f"{name};dur={seconds * 1000:.3f}" for name, seconds in self.totals.items()
                 if seconds > 0]
        parts.append(f"total;dur={self.total * 1000:.3f}")
        return ", ".join(parts)


def hand_to(name: str) -> None:
    """On the open clock, if any: the time until the next stage starts counts as ``name``
    (see :meth:`StageClock.hand`)."""
    clock = _current.get()
    if clock is not None:
        clock.hand(name)


class stage:  # lower case: used like a function, ``with stage("store"):``
    """Count the block's time to ``name`` on the open clock, if any."""

    __slots__ = ("_clock", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._clock: StageClock | None = None

    def __enter__(self) -> None:
        clock = _current.get()
        if clock is not None and clock.enter(self._name):
            self._clock = clock

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._clock is not None:
            self._clock.leave()
            self._clock = None
