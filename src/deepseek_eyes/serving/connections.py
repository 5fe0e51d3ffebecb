"""Who an MCP tool call came from: the connection that owns what the call acts on.

Over stdio, the process's one client; over HTTP with a handshake revision, the MCP session
(``Mcp-Session-Id``, as the SDK's ``Connection`` records it); over HTTP with the stateless
``2026-07-28`` revision there is no connection at all (the SDK builds a fresh ``Connection``
per request, with no session id, and the envelope's client info is whatever the client
says), so every stateless request is one owner: the holder of the bearer token speaking
that revision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an annotation only: the gateway loads this package without the SDK
    from mcp.server.mcpserver import Context

__all__ = ["STATELESS_OWNER", "STDIO_OWNER", "connection_owner"]

STDIO_OWNER = "stdio"
STATELESS_OWNER = "http-stateless"


def connection_owner(ctx: Context) -> str:
    """The identity of the MCP connection a tool call came on; see the module docstring."""
    request_context = ctx.request_context
    # The SDK keeps the per-client Connection (and its transport session id) on the
    # per-request ServerSession without a public accessor.
    connection = getattr(request_context.session, "_connection", None)
    session_id = getattr(connection, "session_id", None)
    if isinstance(session_id, str) and session_id:
        return "mcp-session:" + session_id
    if request_context.request is not None:  # HTTP without an MCP session: no connection
        return STATELESS_OWNER
    return STDIO_OWNER
