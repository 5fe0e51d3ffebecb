"""What an MCP client span says of the wire: the session and the request's JSON-RPC id.

The MCP semantic conventions give a client call's span ``mcp.session.id`` (when the
transport has one), ``mcp.protocol.version`` and ``jsonrpc.request.id``. The SDK's
``Client`` exposes none of the wire, so this module watches it from outside:

* **the session id**: Streamable HTTP's ``Mcp-Session-Id`` response header, read by a
  response hook on the HTTP client we hand the SDK (:meth:`WireIds.on_response`); stdio
  and the stateless ``2026-07-28`` protocol have none, and the attribute is then absent;
* **the request id**: the SDK writes a request to the transport's write stream in the
  calling task, so a stream wrapper (:meth:`WireIds.around`) notes the id of each request
  written while :func:`noting_requests` is open in that task (a context variable: concurrent
  calls each see their own).

Neither id is a secret or content: a session id names the connection, a request id is a
counter. Both are kept only as long as the connection (the session id) or the call lasts.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from anyio.abc import ObjectSendStream

if TYPE_CHECKING:  # serve without an MCP server never imports the SDK's HTTP client
    import httpx2

__all__ = ["SESSION_HEADER", "WireIds", "noting_requests"]

#: Streamable HTTP's session header (the server's answer to ``initialize``).
SESSION_HEADER = "mcp-session-id"

_written: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "deepseek_eyes_mcp_written", default=None)


@contextmanager
def noting_requests() -> Iterator[list[Any]]:
    """The JSON-RPC ids of the requests this task writes while the block runs."""
    ids: list[Any] = []
    token = _written.set(ids)
    try:
        yield ids
    finally:
        _written.reset(token)


class WireIds:
    """One server's connection as its spans name it."""

    def __init__(self) -> None:
        #: The session id the server gave this connection (Streamable HTTP), else None.
        self.session_id: str | None = None

    async def on_response(self, response: httpx2.Response) -> None:
        """An HTTP client response hook: keep the session id the server sent."""
        value = response.headers.get(SESSION_HEADER)
        if value and len(value) <= 256:
            self.session_id = value

    @asynccontextmanager
    async def around(self, transport: AbstractAsyncContextManager[tuple[Any, Any]],
                     ) -> AsyncIterator[tuple[Any, Any]]:
        """The transport's streams, its write stream noting request ids."""
        self.session_id = None  # a new connection: a new session
        async with transport as (read, write):
            yield read, _NotedSend(write)


class _NotedSend(ObjectSendStream[Any]):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: Any) -> None:
        ids = _written.get()
        if ids is not None:
            message = getattr(getattr(item, "message", None), "root", None) or getattr(
                item, "message", None)
            ident = getattr(message, "id", None)
            if ident is not None and getattr(message, "method", None) is not None:
                ids.append(ident)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:  # clone, send_nowait, close, statistics, ...
        return getattr(self._inner, name)
