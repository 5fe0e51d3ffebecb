"""Stopping the gateway: running requests may finish for a while, then each ends in our shape.

A :class:`Drain` is told of every HTTP request (:meth:`Drain.middleware`, the gateway's
outermost layer) and of every wait a request makes on its turn (:meth:`Drain.watch`,
:meth:`Drain.pull`); the server (:mod:`deepseek_eyes.gateway.server`) hands it SIGTERM and
SIGINT (:meth:`Drain.signals`) and waits on it (:meth:`Drain.settle`).

The stop is readiness-first. At the first SIGTERM ``/readyz`` answers 503
``GATEWAY_SHUTTING_DOWN`` at once, while every other request is still served, for
``gateway.drain_delay`` seconds: long enough for a load balancer's health checks to take
the process out of its rotation, so no request it sends meets a closed socket or a 503.
Then the gateway stops taking work: the listening sockets close (a new connection is
refused by the operating system, not answered) and a request that reaches the app
afterwards, on a connection that was already open, is answered 503
``GATEWAY_SHUTTING_DOWN``. Requests already running go on for ``gateway.drain_timeout``
seconds, and the process exits as soon as the last one ends. When the deadline passes, or
at once at a second signal, every request still running is *cut*: a stream sends an SSE
error event ``GATEWAY_SHUTTING_DOWN`` and ``data: [DONE]``, a whole answer is a 503 with
its session header, and the turn's iterator is closed before the process goes on to close
the runtime and the data directory.

Decisions a newcomer would otherwise undo:

* **The cut cancels a request's own scopes, never its task.** What a request waits on
  (the upstream, a slot, a tool) is cancelled; the request itself carries on and answers.
  uvicorn's ``timeout_graceful_shutdown`` cancels the tasks instead, so a client got a
  chunked body cut short and the turn's iterator was never closed; it is not used.
* **A scope never spans a ``yield``.** anyio forbids a cancel scope across a stream
  generator's ``yield``, so a stream enters one per pull (:meth:`Drain.pull`) and checks
  for the cut before each pull: a stream cut while it was sending pulls nothing more.
* **What a cut turn sees.** Cut while it waits (on the upstream, a tool), it gets a
  cancellation at that await, and anyio's cancellation is level-triggered: every later
  await in its frames is cancelled too until they are left, unless shielded. Cut while it
  is suspended at a ``yield``, it gets ``GeneratorExit`` from ``aclose()``. Either is a
  turn closed before its answer; the app then closes the iterator under a shield.
* **The delay only when something watches ``/readyz``.** A gateway whose ``/readyz`` no
  one asked in the last :data:`WATCHED_S` seconds has no balancer to tell, and SIGINT is a
  person at a terminal: both stop taking work at once, as a single machine expects. A
  second signal during the delay stops at once too.
* **Everything after the first signal is bounded.** ``drain_delay`` (at most), then
  ``drain_timeout``, then :data:`CUT_GRACE_S` for the cut requests' endings to go out; the
  server then cancels and awaits what still runs (a client that reads nothing), so no task
  is left pending. Signals after the second change nothing: the stop is already as fast as
  it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

import anyio
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from deepseek_eyes.errors import GatewayError
from deepseek_eyes.stages import stage

__all__ = ["CUT_GRACE_S", "READINESS_PATH", "WATCHED_S", "Drain", "shutting_down"]

T = TypeVar("T")

#: After the cut, how long the cut requests have to send their endings.
CUT_GRACE_S = 2.0
_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: The path a balancer probes: answered 503 from the first signal on.
READINESS_PATH = "/readyz"
#: A ``/readyz`` asked within this many seconds means a balancer watches this process.
WATCHED_S = 60.0


class _HttpStaged:
    """A cancel scope whose own entry and exit (anyio's bookkeeping, some microseconds a
    wait) count as the ``http`` stage; otherwise the scope itself."""

    __slots__ = ("_scope",)

    def __init__(self, scope: anyio.CancelScope) -> None:
        self._scope = scope

    def __enter__(self) -> anyio.CancelScope:
        with stage("http"):
            return self._scope.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        with stage("http"):
            return bool(self._scope.__exit__(kind, exc, tb))


def shutting_down() -> GatewayError:
    """``GATEWAY_SHUTTING_DOWN`` (the app adds the session header when it knows one)."""
    return GatewayError("the gateway is shutting down; send the request again once it is "
                        "back", code="GATEWAY_SHUTTING_DOWN")


class Drain:
    """The gateway's stop: begun at the first signal, cut at the deadline or the second.

    Args:
        timeout: seconds running requests may go on once the stop has begun.
        delay: seconds between a SIGTERM and the begin, while ``/readyz`` already fails
            and everything else is served (only when ``/readyz`` was asked lately).
        notice: told a sentence at the signal, the begin and the cut (default: nothing).
    """

    def __init__(self, timeout: float, *, delay: float = 0.0,
                 notice: Callable[[str], None] | None = None) -> None:
        self.timeout = timeout
        self.delay = delay
        self._notice = notice
        self._leaving = False  # /readyz fails: set at the first signal
        self._probed_at: float | None = None  # time.monotonic() of the last /readyz
        self._pending_begin: asyncio.TimerHandle | None = None
        self._begun = False
        self._cut = False
        self._deadline = 0.0  # time.monotonic() at which the running requests are cut
        self._running = 0
        self._scopes: set[anyio.CancelScope] = set()
        self._on_begin: list[Callable[[], None]] = []
        self._wake = asyncio.Event()  # set whenever a request ends, and at the begin and cut

    @property
    def leaving(self) -> bool:
        """Whether ``/readyz`` fails: from the first signal on (the begin may still wait)."""
        return self._leaving or self._begun

    @property
    def draining(self) -> bool:
        """Whether the stop has begun (no new request is taken)."""
        return self._begun

    @property
    def is_cut(self) -> bool:
        """Whether the running requests have been told to end now."""
        return self._cut

    @property
    def running(self) -> int:
        """Requests that entered the app and have not ended."""
        return self._running

    # -- the stop ----------------------------------------------------------------------------

    def on_begin(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` at the begin (at once when it has begun)."""
        self._on_begin.append(callback)
        if self._begun:
            callback()

    def signal(self, number: int = signal.SIGTERM) -> None:
        """A stop signal: the first leaves the rotation (:meth:`leave`; SIGINT, a person at a
        terminal, begins at once), the second cuts, later ones do nothing."""
        if not self._leaving and not self._begun:
            if number == signal.SIGINT:
                self.begin()
            else:
                self.leave()
        elif not self._cut:
            self.cut()

    def watched(self) -> bool:
        """Whether a balancer asked ``/readyz`` within :data:`WATCHED_S` seconds."""
        return (self._probed_at is not None
                and time.monotonic() - self._probed_at < WATCHED_S)

    def leave(self) -> None:
        """Fail ``/readyz`` from now on and begin after ``delay`` seconds; at once when the
        delay is 0 or nothing watches ``/readyz`` (:meth:`watched`). Needs a running loop
        for the wait."""
        if self._leaving or self._begun:
            return
        self._leaving = True
        if self.delay <= 0 or not self.watched():
            self.begin()
            return
        self._say(f"stopping: /readyz answers 503 now; still serving for {self.delay:g}s so "
                  "the load balancer moves on (a second signal stops at once)")
        self._pending_begin = asyncio.get_running_loop().call_later(self.delay, self.begin)

    def begin(self) -> None:
        """Take no new request; the running ones have ``timeout`` seconds from now."""
        if self._begun:
            return
        if self._pending_begin is not None:
            self._pending_begin.cancel()
            self._pending_begin = None
        self._begun = True
        self._leaving = True
        self._deadline = time.monotonic() + self.timeout
        self._say(f"stopping; {self._running} running request(s) have {self.timeout:g}s to "
                  "finish (a second signal ends them now)")
        for callback in self._on_begin:
            callback()
        self._wake.set()

    def cut(self) -> None:
        """End every running request now: each wait it is in is cancelled, and so is any it
        starts later."""
        if self._cut:
            return
        self.begin()
        self._cut = True
        if self._running:
            self._say(f"ending {self._running} running request(s) with GATEWAY_SHUTTING_DOWN")
        for scope in list(self._scopes):
            scope.cancel()
        self._wake.set()

    async def settle(self) -> None:
        """Begin (if not yet), wait for the running requests until the deadline or the cut,
        cut those left, and give their endings :data:`CUT_GRACE_S`. Returns once no request
        runs, or when the grace is over."""
        self.begin()
        await self._until(lambda: self._running == 0 or self._cut,
                          self._deadline - time.monotonic())
        if self._running:
            self.cut()
        await self._until(lambda: self._running == 0, CUT_GRACE_S)

    async def _until(self, done: Callable[[], bool], timeout: float) -> None:
        with anyio.move_on_after(max(0.0, timeout)):
            while True:
                self._wake.clear()
                if done():
                    return
                await self._wake.wait()

    def _say(self, sentence: str) -> None:
        """Tell the notice ``sentence``. One that cannot be written (standard error closed,
        or nobody reading it any more: EPIPE) changes nothing of the stop: it raised out of
        :meth:`begin` before the server was told, and the gateway served on."""
        if self._notice is not None:
            with contextlib.suppress(OSError, ValueError):  # ValueError: a closed file
                self._notice(sentence)

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """While the block runs, SIGTERM and SIGINT call :meth:`signal` (in the running loop).
        Outside the main thread nothing is installed (signals only reach that one)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        replaced: dict[int, Any] = {}  # where the loop cannot (Windows): the handlers before
        for number in _SIGNALS:
            try:
                loop.add_signal_handler(number, self.signal, number)
            except NotImplementedError:
                replaced[number] = signal.signal(
                    number, lambda got, _: loop.call_soon_threadsafe(self.signal, got))
        try:
            yield
        finally:
            for number in _SIGNALS:
                if number in replaced:
                    signal.signal(number, replaced[number])
                else:
                    loop.remove_signal_handler(number)

    # -- the requests ------------------------------------------------------------------------

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Run one wait of a request so that the cut ends it. Never across a ``yield``.

        Raises:
            GatewayError: ``GATEWAY_SHUTTING_DOWN`` when the cut came during the wait (or
                before it: the wait is then cancelled at its first await). Whatever else
                the cancelled wait raised is its cause.
        """
        scope = anyio.CancelScope()
        failure: Exception | None = None
        with _HttpStaged(scope):
            if self._cut:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield
            except Exception as exc:
                if not scope.cancel_called:
                    raise
                failure = exc  # what the cancelled wait turned into: the cut is the cause
            finally:
                self._scopes.discard(scope)
        if scope.cancelled_caught or failure is not None:
            raise shutting_down() from failure

    async def pull(self, iterator: AsyncIterator[T]) -> T | None:
        """The next item of ``iterator`` (None at its end), under :meth:`watch`.

        Raises:
            GatewayError: ``GATEWAY_SHUTTING_DOWN`` at the cut; after it, before pulling.
        """
        if self._cut:
            raise shutting_down()
        item: T | None = None
        with self.watch():
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                item = None
        return item

    def middleware(self, app: ASGIApp, refusal: Callable[[], Response]) -> ASGIApp:
        """``app`` with every HTTP request counted while it runs; once the stop has begun, a
        new request gets ``refusal()`` (the 503) instead, and so does ``/readyz`` from the
        first signal on. Each ``/readyz`` is noted (:meth:`watched`)."""

        async def drained(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            probe = scope.get("path") == READINESS_PATH
            if probe:
                self._probed_at = time.monotonic()
            if self._begun or (probe and self._leaving):
                await refusal()(scope, receive, send)
                return
            self._running += 1
            try:
                await app(scope, receive, send)
            finally:
                self._running -= 1
                self._wake.set()

        return drained
