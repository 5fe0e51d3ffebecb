"""A small SDK server for the liveness tests: ``slow`` sleeps before it answers, ``pid`` names
the serving process. ``python slow_server.py`` serves stdio; ``python slow_server.py http
PORT`` serves Streamable HTTP on 127.0.0.1:PORT at ``/mcp``."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

app = MCPServer("slow")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@app.tool(annotations=READ_ONLY)
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@app.tool(annotations=READ_ONLY)
def pid() -> str:
    """The serving process's id."""
    return str(os.getpid())


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
