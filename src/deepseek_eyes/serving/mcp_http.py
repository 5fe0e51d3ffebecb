"""The Streamable HTTP endpoint of an MCP server, as every DeepSeekEyes HTTP server mounts it.

The SDK's app (at ``/mcp``, with DNS-rebinding protection from the same Host and Origin
lists the security middleware enforces) and a lifespan that runs the SDK's session manager,
one background task of the server's own (its reaper), and the server's close at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute

__all__ = ["streamable_mcp"]

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


def streamable_mcp(
    mcp: MCPServer[Any],
    *,
    host: str,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    max_body_bytes: int,
    background: Callable[[], Awaitable[None]],
    close: Callable[[], Awaitable[None]],
) -> tuple[list[BaseRoute], Lifespan]:
    """The ``/mcp`` routes and the lifespan that serves them (``background`` runs until
    shutdown, then ``close`` is awaited)."""
    sdk_app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(allowed_hosts),
            allowed_origins=list(allowed_origins),
        ),
        max_request_body_size=max_body_bytes,
        host=host,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            task = asyncio.ensure_future(background())
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await close()

    return list(sdk_app.routes), lifespan
