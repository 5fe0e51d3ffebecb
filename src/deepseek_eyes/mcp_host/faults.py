"""Messages a server sent that are not JSON-RPC: fatal to the requests waiting on it.

The SDK's stdio transport turns a stdout line it cannot parse into an exception value on
the read stream; the session hands it to the message handler and the request it may have
been the answer to waits until its timeout (a minute by default). A stdio server must
write only protocol messages to stdout (the MCP spec's rule; logs go to stderr), and once
a line is garbage nothing tells which request it answered. So each unparsable message
cancels, at once, every request in flight on that server (and a handshake in progress),
which fail with ``MCP_RESPONSE_INVALID``; requests sent later are unaffected (the stream
is line-framed, so the next line stands on its own). A message that arrives while nothing
waits is only counted (``invalid_messages`` in the status).

The Streamable HTTP transport already answers a request whose response body does not
parse with a JSON-RPC parse error of its own making;
:func:`~deepseek_eyes.mcp_host.connection.map_error` gives that the same code.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType

import anyio

from deepseek_eyes.errors import McpError

__all__ = ["ProtocolFaults", "invalid_response"]


def invalid_response() -> McpError:
    return McpError(
        "the server sent a message that is not valid JSON-RPC (a stdio server must write only "
        "protocol messages to stdout and log to stderr)", code="MCP_RESPONSE_INVALID")


class ProtocolFaults:
    """Counts unparsable messages and cancels the requests waiting when one arrives."""

    def __init__(self) -> None:
        self.count = 0
        self._waiting: set[anyio.CancelScope] = set()
        self._hit: set[anyio.CancelScope] = set()

    def note(self) -> None:
        """One unparsable message arrived: cancel everything waiting now."""
        self.count += 1
        for scope in self._waiting:
            self._hit.add(scope)
            scope.cancel()

    def watch(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` too on the next fault (until :meth:`release`)."""
        self._waiting.add(scope)

    def release(self, scope: anyio.CancelScope) -> bool:
        """Stop watching ``scope``; whether a fault cancelled it."""
        self._waiting.discard(scope)
        if scope in self._hit:
            self._hit.discard(scope)
            return True
        return False

    def guard(self, timeout: float | None = None) -> AbstractContextManager[None]:
        """Run a request; an unparsable message while it waits fails it at once, and with
        ``timeout`` the request is bounded too.

        The bound is this scope's deadline rather than an ``anyio.fail_after`` around it:
        one cancel scope per call instead of two; the second (two generator context
        managers and a timer of its own) was among the largest fixed costs of a call.

        Raises:
            McpError: ``MCP_RESPONSE_INVALID``.
            TimeoutError: ``timeout`` seconds passed first.
        """
        return _Guard(self, timeout)


class _Guard:
    """The block of :meth:`ProtocolFaults.guard`. A class, not a ``@contextmanager``:
    every call enters one, and a generator with its wrapper cost more than the watching."""

    __slots__ = ("_faults", "_scope")

    def __init__(self, faults: ProtocolFaults, timeout: float | None) -> None:
        self._faults = faults
        self._scope = anyio.CancelScope() if timeout is None else anyio.move_on_after(timeout)

    def __enter__(self) -> None:
        self._scope.__enter__()
        self._faults.watch(self._scope)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        scope = self._scope
        try:
            swallowed = scope.__exit__(kind, exc, tb)
        finally:
            hit = self._faults.release(scope)
        if scope.cancelled_caught:
            if hit:
                raise invalid_response()
            if anyio.current_time() >= scope.deadline:
                raise TimeoutError
        return swallowed
