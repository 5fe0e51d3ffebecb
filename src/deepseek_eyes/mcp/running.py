"""A host over the data home for one short-lived use: the CLI's commands.

It starts *every* enabled server, not only the one asked about, because exposure budgets
(``max_tools``, ``max_schema_tokens``) are shared across servers: an operator's ``call``
then passes exactly the checks the model's would, in the same order.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp.audit import McpAudit
from deepseek_eyes.mcp.host import McpHost
from deepseek_eyes.mcp.manager import McpManager
from deepseek_eyes.settings import Settings

__all__ = ["running_host"]


@contextlib.asynccontextmanager
async def running_host(settings: Settings, home: DataHome, *,
                       wait: float | None = None) -> AsyncIterator[McpHost]:
    """Start the enabled servers, wait until each is ready or failed, yield, stop."""
    mcp = settings.mcp
    manager = McpManager(mcp)
    host = McpHost(manager, blobs=home.blobs, artifacts=home.artifacts,
                   audit=McpAudit(home.audit, ring=mcp.audit_ring), usage=home.usage)
    longest = max((s.connect_timeout for s in mcp.servers), default=1.0)
    try:
        await manager.start(wait=wait if wait is not None else longest + 1)
        yield host
    finally:
        await manager.stop()
