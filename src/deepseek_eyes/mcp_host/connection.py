"""Opening one SDK ``Client`` for a configured server, and mapping SDK failures to codes.

Secrets resolve here, at connect time, from their ``{ env = "NAME" }`` references. A stdio
child's stderr goes to its :class:`~deepseek_eyes.mcp_host.stderr_log.StderrLog` when one is
given (never to our terminal then). The response cache is off (a manager must see every
list change at once). ``protocol = "auto"`` uses the SDK's own negotiation with the
discovery probe bounded by ``mcp.discover_timeout`` instead of the SDK's fixed 10 s, and
the era a server answered with is remembered so reconnects pin it and never probe again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp.client.session as sdk_session
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import DiscoverResult
from mcp_types.jsonrpc import CONNECTION_CLOSED, PARSE_ERROR

from deepseek_eyes.errors import ConfigError, McpError, McpTimeoutError
from deepseek_eyes.mcp_host.elicitation import elicitation_callback
from deepseek_eyes.mcp_host.liveness import StreamWatch
from deepseek_eyes.mcp_host.oauth import OAuthHandle
from deepseek_eyes.mcp_host.stderr_log import StderrLog
from deepseek_eyes.mcp_host.wire import WireIds
from deepseek_eyes.settings import McpServerSettings

__all__ = [
    "Connector",
    "build_client",
    "check_credentials",
    "learn_capabilities",
    "map_error",
    "set_discover_timeout",
]

#: Tests and embedders may map a server id to any ``Client`` target (an in-process server).
Connector = Callable[[McpServerSettings], Any]


class _ParseNoise(logging.Filter):
    """Drops the SDK's traceback for a stdout line it could not parse: the manager counts
    those and fails the waiting requests with a code (:mod:`deepseek_eyes.mcp_host.faults`), and
    a traceback on the operator's terminal would say less, louder."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


logging.getLogger("mcp.client.stdio").addFilter(_ParseNoise())


def set_discover_timeout(seconds: float) -> None:
    """Bound the SDK's ``server/discover`` probe (a module constant read at call time)."""
    sdk_session.DISCOVER_TIMEOUT_SECONDS = seconds


def check_credentials(server: McpServerSettings) -> None:
    """Resolve every reference the server needs (values are dropped at once).

    Raises:
        ConfigError: ``CONFIG_ENV_MISSING`` naming the first unset variable.
    """
    refs = [*server.env.values(), *server.headers.values()]
    if server.oauth is not None:
        refs += server.oauth.secret_refs()
    for ref in refs:
        ref.resolve()


def build_client(
    server: McpServerSettings, *, mode: str, oauth: OAuthHandle | None,
    message_handler: Any, connector: Connector | None = None,
    watch: StreamWatch | None = None, stderr: StderrLog | None = None,
    wire: WireIds | None = None,
) -> Client:
    """An unentered client; with ``watch``, a stdio child's stdout ending (and each line it
    could not parse) is reported to it; with ``stderr``, the child's stderr goes there."""
    target: Any
    if connector is not None:
        target = connector(server)
    elif server.transport == "stdio":
        assert server.command is not None
        env = {k: ref.resolve() for k, ref in server.env.items()}
        # The child gets a minimal environment plus its references, like the SDK default.
        base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        target = StdioServerParameters(
            command=server.command, args=list(server.args), env={**base, **env},
            cwd=str(server.cwd) if server.cwd else None,
        )
    else:
        assert server.url is not None
        headers = {k: ref.resolve() for k, ref in server.headers.items()}
        http = httpx2.AsyncClient(
            headers=headers, auth=oauth.provider if oauth else None,
            timeout=httpx2.Timeout(server.call_timeout, connect=server.connect_timeout),
            follow_redirects=False,
            event_hooks={"response": [wire.on_response]} if wire is not None else None,
        )
        target = _http_transport(server.url, http)
        if wire is not None:
            target = wire.around(target)
    if isinstance(target, StdioServerParameters) and (
            watch is not None or stderr is not None or wire is not None):
        transport = _stdio_transport(target, stderr)
        target = watch.around(transport) if watch is not None else transport
        if wire is not None:  # the spans' request ids (mcp_host/wire.py)
            target = wire.around(target)
    return Client(
        target, mode=mode, cache=None, message_handler=message_handler,
        read_timeout_seconds=server.call_timeout,
        # None where nobody can answer: the capability is then not declared at all.
        elicitation_callback=elicitation_callback(server.id),
    )


async def learn_capabilities(client: Client, mode: str) -> None:
    """Ask a server pinned to ``2026-07-28`` for its real capabilities.

    A pinned client adopts a synthesized discover result whose capabilities are empty (and
    ``session.discover()`` returns that cached result), so without this the manager would
    list nothing and publish an empty catalog. One ``server/discover`` at the pinned
    version, no legacy fallback: the pin stays a pin.
    """
    if mode in ("auto", "legacy"):
        return
    session = client.session
    raw = await session.send_discover(client.protocol_version)
    session.adopt(DiscoverResult.model_validate(raw))


@asynccontextmanager
async def _stdio_transport(params: StdioServerParameters,
                           stderr: StderrLog | None) -> AsyncIterator[Any]:
    """The SDK's stdio transport, the child's stderr into ``stderr`` when given."""
    if stderr is None:
        async with stdio_client(params) as streams:
            yield streams
        return
    with stderr.pipe() as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            errlog.close()  # the child holds its own copy; the log ends when it exits
            yield streams


@asynccontextmanager
async def _http_transport(url: str, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    """The SDK's transport, closing the HTTP client we gave it (it does not own it)."""
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for sub in exc.exceptions[:32]:
            out.extend(_leaves(sub))
        return out
    return [exc]


def map_error(exc: BaseException, *, connecting: bool = False) -> McpError:
    """One stable code for an SDK, transport or group failure (the message is kept short)."""
    if isinstance(exc, McpError):
        return exc
    for leaf in _leaves(exc):
        if isinstance(leaf, McpError):
            return leaf
        if isinstance(leaf, ConfigError):
            return McpError(leaf.message, code="MCP_CONNECT_FAILED", details={"cause": leaf.code})
        if isinstance(leaf, MCPError):
            if leaf.error.code == -32001:
                return McpTimeoutError("the server did not answer in time")
            if leaf.error.code == CONNECTION_CLOSED and not connecting:
                # The SDK fails the requests in flight this way when the stream ends (a
                # stdio child that exited mid-call): the connection is gone, not the call.
                return McpError("the server's connection ended during the request",
                                code="MCP_CONNECTION_LOST", details={"rpc_code": leaf.error.code})
            if leaf.error.code == PARSE_ERROR and leaf.error.message.startswith("Failed to parse"):
                # Made by the SDK's HTTP transport for a response body it could not parse.
                return McpError("the server sent a response that is not valid JSON-RPC",
                                code="MCP_RESPONSE_INVALID")
            if leaf.error.code in (401, 403) or "401" in leaf.error.message[:64]:
                return McpError("the server refused our credentials", code="MCP_AUTH_FAILED")
            code = "MCP_CONNECT_FAILED" if connecting else "MCP_SERVER_ERROR"
            return McpError(leaf.error.message[:500], code=code,
                            details={"rpc_code": leaf.error.code})
        if isinstance(leaf, httpx2.HTTPStatusError) and leaf.response.status_code in (401, 403):
            return McpError("the server refused our credentials", code="MCP_AUTH_FAILED")
        if isinstance(leaf, TimeoutError):
            return McpTimeoutError("the server did not answer in time")
        if "OAuth" in type(leaf).__name__:
            return McpError(str(leaf)[:500], code="MCP_AUTH_FAILED")
    first = _leaves(exc)[0]
    if connecting:
        return McpError(f"cannot connect: {type(first).__name__}: {first}"[:500],
                        code="MCP_CONNECT_FAILED")
    if isinstance(first, anyio.ClosedResourceError | anyio.BrokenResourceError |
                  anyio.EndOfStream | ConnectionError | OSError):
        return McpError("the server's connection ended during the request",
                        code="MCP_CONNECTION_LOST")
    return McpError(f"{type(first).__name__}: {first}"[:500], code="MCP_CONNECTION_LOST")
