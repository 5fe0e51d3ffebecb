"""``logging/setLevel`` for our MCP servers, which keep no log stream of their own.

``MCPServer`` does not register the method; clients of the handshake revisions (and the
conformance suite) send it, and a server that answers "method not found" breaks them. Each
server accepts the request and acknowledges it: there is no notification stream to filter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK loads with a server that uses this, not with the package
    from mcp.server.mcpserver import MCPServer
    from mcp_types import SetLevelRequestParams

__all__ = ["accept_log_level"]


def accept_log_level(mcp: MCPServer[Any]) -> None:
    """Answer ``logging/setLevel`` on ``mcp`` with an empty result."""
    from mcp_types import SetLevelRequestParams

    async def set_level(_ctx: Any, _params: SetLevelRequestParams) -> dict[str, Any]:
        return {}

    lowlevel = mcp._lowlevel_server  # the SDK exposes no public hook for this
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
