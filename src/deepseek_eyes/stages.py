"""Where one request's time goes, by stage, so a slowdown shows where it happened.

A request that wants its time split opens a :class:`StageClock` (``with StageClock() as
clock``); code at every layer names the stage it runs with ``with stage("store"):``. Time is
*exclusive*: a stage entered inside another one pauses the outer one, so the stages add up
to at most the clock's total, and what no stage claims is the caller's own work (HTTP
framing, routing, JSON of the answer). The stages:

``http``
    the HTTP layer every server shares: the security checks and the body received whole,
    a turn's concurrency slot taken, the drain's watch over each wait set up and taken
    down, and a stream's response started
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

__all__ = ["STAGES", "StageClock", "stage"]

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
        """End the clock (idempotent): its total stops growing."""
        if self.ended is None:
            self.ended = time.perf_counter()

    @property
    def total(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    def enter(self, name: str) -> bool:
        """Start ``name``; False (and nothing counted) off the clock's own thread or after
        it stopped."""
        if self.ended is not None or threading.get_ident() != self._thread:
            return False
        now = time.perf_counter()
        if self._stack:
            self.totals[self._stack[-1]] += now - self._mark
        self._stack.append(name)
        self._mark = now
        return True

    def leave(self) -> None:
        now = time.perf_counter()
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
