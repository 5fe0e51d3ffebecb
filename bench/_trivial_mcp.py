"""A bare SDK stdio server with one trivial tool: the transport baseline of
bench/vision_mcp.py (the same SDK, pipes and validating client, our code nowhere).

    python bench/_trivial_mcp.py

``echo(text)`` returns its text; the SDK publishes the ``{"result": string}`` output schema
it derives from the return type and sends the value as structured content too, so a
validating client checks a result here as it checks ``see``'s.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("trivial")


@server.tool()
def echo(text: str) -> str:
    """Return ``text``."""
    return text


if __name__ == "__main__":
    server.run("stdio")
