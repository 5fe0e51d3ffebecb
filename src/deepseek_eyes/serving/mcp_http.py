"""The Streamable HTTP endpoint of an MCP server, as every DeepSeekEyes HTTP server mounts it.

The SDK's app (at ``/mcp``, with DNS-rebinding protection from the same Host and Origin
lists the security middleware enforces) and a lifespan that runs the SDK's session manager,
one background task of the server's own (its reaper), and the server's close at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from deepseek_eyes.serving.security import HttpOptions

__all__ = ["streamable_mcp"]

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


def streamable_mcp(
    mcp: MCPServer[Any],
    options: HttpOptions,
    *,
    close: Callable[[], Awaitable[None]],
    background: Callable[[], Awaitable[None]] | None = None,
) -> tuple[list[BaseRoute], Lifespan]:
    """The ``/mcp`` routes and the lifespan that serves them (``background``, when given,
    runs until shutdown; then ``close`` is awaited)."""
    sdk_app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=options.hosts(),
            allowed_origins=options.origins(),
        ),
        max_request_body_size=options.max_body_bytes,
        host=options.host,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            task = asyncio.ensure_future(background()) if background is not None else None
            try:
                yield
            finally:
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await close()

    return list(sdk_app.routes), lifespan
