"""Is a connected server still there? Each transport and revision is asked what it offers.

The stateless ``2026-07-28`` revision removed ``ping``, so one ping for every server cannot
work: ``mcp-server-time`` answers it "method not found", and reading that as death made the
server go ready → failed → ready every heartbeat, withdrew its tools each time and killed
the calls in flight. Instead:

* **stdio** — the child's stdout ending (it exited, crashed or closed it) is seen at once,
  passively, by a :class:`StreamWatch` on the transport's read stream. On the stateless
  revision that is the only check: an idle child costs nothing to leave alone.
* **handshake revisions** (``2024-11-05`` … ``2025-11-25``) — an idle server is pinged. A
  "method not found" is an answer: the server is alive, and is not pinged again.
* **2026-07-28 without a watched stream** (Streamable HTTP, in-process) — an idle server is
  asked ``server/discover``, the one cheap request the revision keeps (a list call would
  page through the whole catalog). A real request that fails at the transport wakes the
  check at once, so the next real request tells. (The SDK's Streamable HTTP client ends the
  whole connection when a request cannot reach the server at all, so a refused connection
  is gone at once, whichever request met it.)

Two rules keep a check from doing harm. It never runs while a request is in flight, and any
reply counts as a beat: a server busy with a long call is alive, and ``call_timeout`` alone
bounds that call. And only :data:`MISSES_ALLOWED` unanswered checks in a row, the stream
ending, or the transport reporting itself closed mean the server is gone: one slow answer
is a hiccup, not a reason to withdraw its tools.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ObjectReceiveStream

from deepseek_eyes.errors import DeepSeekEyesError, McpError

if TYPE_CHECKING:  # the SDK loads with the first connection (issue 41: not in a bare gateway)
    from mcp import Client

__all__ = ["MISSES_ALLOWED", "Activity", "Heartbeat", "StreamWatch"]

#: Unanswered liveness checks in a row that mean the server is gone.
MISSES_ALLOWED = 3


@dataclass
class Activity:
    """Requests in flight on one server and when it last answered (monotonic seconds).

    It outlives a connection: it belongs to the server's state, so a call that started on
    one connection still counts down when it ends.
    """

    in_flight: int = 0
    last_heard: float = -math.inf
    misses: int = 0
    #: Set when a check should run now instead of at the next interval.
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def heard(self) -> None:
        self.last_heard = time.monotonic()
        self.misses = 0

    def request(self) -> AbstractContextManager[None]:
        """Count one request; a reply of any kind is a beat, a transport failure a wake-up.

        A request that timed out says nothing about the server (a tool may be slow; the
        call's own timeout is the bound), so it neither beats nor wakes: the SDK's
        ``REQUEST_TIMEOUT`` and a ``TimeoutError`` from a bound inside the block alike. A
        cancellation says nothing either.
        """
        return _Request(self)

    def _ended(self, exc: BaseException | None) -> None:
        """What one request's end (``exc``: how it failed) tells of the server."""
        self.in_flight -= 1
        if exc is None:
            self.heard()
            return
        # A failed request came over a connection, so the SDK is loaded: no cost here.
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(exc, MCPError):
            if exc.code == CONNECTION_CLOSED:
                self.wake.set()
            elif exc.code != REQUEST_TIMEOUT:
                self.heard()  # an error reply is still a reply
        elif isinstance(exc, DeepSeekEyesError):
            self.heard()  # our own verdict on a reply, such as a rejected catalog
        elif isinstance(exc, Exception) and not isinstance(exc, TimeoutError):
            self.wake.set()


class _Request:
    """The block of :meth:`Activity.request`. A class, not a ``@contextmanager``: every
    call enters one, and a generator with its wrapper cost more than the counting."""

    __slots__ = ("_activity",)

    def __init__(self, activity: Activity) -> None:
        self._activity = activity

    def __enter__(self) -> None:
        self._activity.in_flight += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._activity._ended(exc)


class StreamWatch:
    """Notices the end of a transport's read stream — for stdio, that the child is gone —
    and, with ``on_fault``, each message the transport could not parse (an exception value
    on the stream; see :mod:`deepseek_eyes.mcp_host.faults`).

    Only the other side ending counts (``EndOfStream``); our own teardown closes the stream
    from this side (``ClosedResourceError``) and is not reported.
    """

    def __init__(self, on_end: Callable[[], None],
                 on_fault: Callable[[], None] | None = None) -> None:
        self.attached = False
        self.ended = False
        self._on_end = on_end
        self.on_fault = on_fault

    @asynccontextmanager
    async def around(
        self, transport: AbstractAsyncContextManager[tuple[Any, Any]]
    ) -> AsyncIterator[tuple[Any, Any]]:
        """The transport's streams, its read stream watched."""
        async with transport as (read, write):
            self.attached = True
            yield _WatchedStream(read, self), write

    def note_end(self) -> None:
        if not self.ended:
            self.ended = True
            self._on_end()


class _WatchedStream(ObjectReceiveStream[Any]):
    def __init__(self, inner: Any, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch

    @property
    def last_context(self) -> Any:  # the dispatcher reads it where a transport offers it
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            self._watch.note_end()
            raise
        if isinstance(item, Exception) and self._watch.on_fault is not None:
            self._watch.on_fault()
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()


class Heartbeat:
    """One connection's liveness loop (see the module docstring for what it asks whom)."""

    def __init__(self, client: Client, activity: Activity, *, interval: float,
                 timeout: float, watch: StreamWatch | None) -> None:
        self._client = client
        self._activity = activity
        self._interval = interval
        self._timeout = timeout
        self._watch = watch if watch is not None and watch.attached else None
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        modern = client.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        #: The request an idle server is asked, or ``None`` where only passive signs count.
        self.check: str | None
        if not modern:
            self.check = "ping"
        else:
            self.check = None if self._watch is not None else "server/discover"

    async def run(self) -> None:
        """Watch until the server is gone; never returns otherwise.

        Raises:
            McpError: ``MCP_CONNECTION_LOST``.
        """
        act = self._activity
        act.wake.clear()  # a wake-up left by an earlier connection is not news about this one
        act.misses = 0
        watch = self._watch
        while watch is None or not watch.ended:
            with anyio.move_on_after(self._interval):
                await act.wake.wait()
            woken = act.wake.is_set()
            act.wake.clear()
            if watch is not None and watch.ended:
                break
            if act.in_flight or self.check is None:
                continue  # busy is not dead: the call's own timeout bounds it
            if not woken and time.monotonic() - act.last_heard < self._interval:
                continue  # it answered something within the interval
            await self._beat()
        raise _lost("the server's output ended (its process exited)", "EndOfStream")

    async def _beat(self) -> None:
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED, METHOD_NOT_FOUND, REQUEST_TIMEOUT

        act = self._activity
        session = self._client.session
        try:
            with anyio.fail_after(self._timeout):
                if self.check == "ping":
                    await session.send_ping()
                else:
                    await session.send_discover(self._client.protocol_version)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise _lost("the server's connection closed", "MCPError") from exc
            if exc.code == METHOD_NOT_FOUND:
                self.check = None  # it answered, so it is alive; it just has no such method
            if exc.code != REQUEST_TIMEOUT:
                act.heard()
                return
            self._miss(exc)
        except Exception as exc:
            self._miss(exc)
        else:
            act.heard()

    def _miss(self, exc: Exception) -> None:
        act = self._activity
        act.misses += 1
        if act.misses >= MISSES_ALLOWED:
            raise _lost(f"{act.misses} liveness checks in a row went unanswered",
                        type(exc).__name__) from exc


def _lost(message: str, cause: str) -> McpError:
    return McpError(message, code="MCP_CONNECTION_LOST", details={"cause": cause})
