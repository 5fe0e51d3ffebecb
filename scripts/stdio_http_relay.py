"""Serve a stdio MCP server over Streamable HTTP, message for message, so that the MCP
conformance suite (which speaks only HTTP) can test a server's stdio transport.

    python scripts/stdio_http_relay.py PORT -- COMMAND [ARGS...]

Each HTTP session (an ``initialize`` without ``Mcp-Session-Id``) starts its own child
process with COMMAND and relays JSON-RPC messages unchanged both ways: the SDK's Streamable
HTTP server transport parses requests and routes each response to its request's stream by
id; the child's standard input and output carry the very messages the suite sent and the
child answered. So what the suite checks about messages (initialize, ping, tools, errors,
resources, prompts) is the stdio server's; what it checks about HTTP itself (sessions,
DNS-rebinding protection, SSE streams) would be this relay's, and those scenarios are not
run through it (scripts/vision-conformance.sh).

Loopback only, no authentication: a test fixture, never a way to serve anything.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

import anyio
import uvicorn
from anyio.abc import TaskGroup, TaskStatus
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.streamable_http import StreamableHTTPServerTransport
from starlette.types import Receive, Scope, Send

MAX_SESSIONS = 32


async def _pump(source: Any, sink: Any) -> None:
    async for message in source:
        if isinstance(message, Exception):  # a line the reader could not parse
            continue
        await sink.send(message)


class Relay:
    def __init__(self, group: TaskGroup, params: StdioServerParameters) -> None:
        self.group = group
        self.params = params
        self.sessions: dict[str, StreamableHTTPServerTransport] = {}

    async def _start(self, transport: StreamableHTTPServerTransport) -> None:
        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                async with (
                    transport.connect() as (http_read, http_write),
                    stdio_client(self.params) as (child_read, child_write),
                    anyio.create_task_group() as pumps,
                ):
                    task_status.started()
                    pumps.start_soon(_pump, http_read, child_write)
                    pumps.start_soon(_pump, child_read, http_write)
            finally:
                self.sessions.pop(transport.mcp_session_id or "", None)

        await self.group.start(run)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        given = dict(scope.get("headers", [])).get(b"mcp-session-id")
        if given is not None:
            transport = self.sessions.get(given.decode("latin-1"))
            if transport is None:
                await send({"type": "http.response.start", "status": 404, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        else:
            if len(self.sessions) >= MAX_SESSIONS:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            transport = StreamableHTTPServerTransport(mcp_session_id=uuid.uuid4().hex)
            self.sessions[transport.mcp_session_id or ""] = transport
            await self._start(transport)
        await transport.handle_request(scope, receive, send)


async def main() -> None:
    port = int(sys.argv[1])
    if sys.argv[2] != "--":
        raise SystemExit("usage: stdio_http_relay.py PORT -- COMMAND [ARGS...]")
    command, *args = sys.argv[3:]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with anyio.create_task_group() as group:
        config = uvicorn.Config(Relay(group, params), host="127.0.0.1", port=port,
                                lifespan="off", log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()
        group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
