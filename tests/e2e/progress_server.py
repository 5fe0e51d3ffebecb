"""A stdio MCP server with one slow tool that reports its progress (MCP
``notifications/progress`` with progress, total and a message) before it answers: what
``chat`` must show while a long tool runs. Run as a script by tests/e2e/test_chat.py."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("slow")


@server.tool()
async def count(steps: int, ctx: Context, pause: float = 0.0) -> str:
    """Count to STEPS, reporting each step after PAUSE seconds."""
    for step in range(1, steps + 1):
        await anyio.sleep(pause)
        await ctx.report_progress(step, steps, f"counted {step} of {steps}")
    return f"counted to {steps}"


if __name__ == "__main__":
    server.run()
