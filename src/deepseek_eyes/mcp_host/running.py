"""A host over the data home for one short-lived use: the CLI's commands.

It starts only the servers a command needs. Which ones that is follows from how the shared
exposure budgets (``max_tools``, ``max_schema_tokens``) are spent: :meth:`McpHost.exposed`
walks the live servers in their *declared* order (the order of ``[[mcp.servers]]`` in the
settings file) and each server's tools take what the servers before it left. So whether a
tool of server X is offered depends on X and on the servers declared before X, never on
those after it. Hence:

* a command that asks about exposure (``call``, ``tools``) starts X and every enabled
  server declared before it (:func:`through`): X's tools pass exactly the budget checks
  the model's would while those servers are live, in the same order;
* a command that does not (``read``, ``get-prompt``, ``resources``, ``prompts``,
  ``restart``) starts X alone: the content plane has no per-server budget;
* ``status`` and ``watch`` start every enabled server.

What a single start cannot reproduce is a moment when an earlier server is down: then the
model's X gets more of the budget than the operator's did. That is the same answer the
model would get while the earlier server was down, so the check stays honest.

A stdio server's stderr goes to ``<data home>/logs/mcp/<id>.stderr.log``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection

from deepseek_eyes.errors import McpError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.names import PREFIX
from deepseek_eyes.mcp_host.oauth import set_token_root
from deepseek_eyes.mcp_host.stderr_log import server_log_dir
from deepseek_eyes.mcp_host.tokens import token_root
from deepseek_eyes.settings import McpSettings, Settings

__all__ = ["only", "running_host", "server_of_public_name", "through"]


def _known(mcp: McpSettings, server_id: str) -> None:
    if not any(s.id == server_id for s in mcp.servers):
        raise McpError(f"no MCP server {server_id!r}", code="MCP_SERVER_UNKNOWN",
                       details={"server": server_id})


def through(mcp: McpSettings, server_id: str) -> set[str]:
    """``server_id`` and every server declared before it (see the module docstring).

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``, before anything starts.
    """
    _known(mcp, server_id)
    ids: set[str] = set()
    for server in mcp.servers:
        ids.add(server.id)
        if server.id == server_id:
            break
    return ids


def only(mcp: McpSettings, server_id: str) -> set[str]:
    """Just ``server_id``.

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``, before anything starts.
    """
    _known(mcp, server_id)
    return {server_id}


def server_of_public_name(public_name: str) -> str:
    """The server id in ``mcp__<id>__<tool>`` (ids never hold ``__``).

    Raises:
        McpError: ``MCP_TOOL_NOT_EXPOSED`` for a name of another shape.
    """
    rest = public_name.removeprefix(PREFIX)
    server, sep, tool = rest.partition("__")
    if rest == public_name or not sep or not server or not tool:
        raise McpError(f"{public_name!r} is not a public MCP tool name (mcp__<server>__<tool>)",
                       code="MCP_TOOL_NOT_EXPOSED")
    return server


@contextlib.asynccontextmanager
async def running_host(settings: Settings, home: DataHome, *, wait: float | None = None,
                       servers: Collection[str] | None = None) -> AsyncIterator[McpHost]:
    """Start the enabled servers (``servers`` only, when given), wait until each is ready
    or failed, yield, stop."""
    mcp = settings.mcp
    set_token_root(token_root(home.root))
    manager = McpManager(mcp, log_dir=server_log_dir(home.root))
    host = McpHost(manager, blobs=home.blobs, artifacts=home.artifacts,
                   audit=McpAudit(home.audit, ring=mcp.audit_ring), usage=home.usage)
    started = [s for s in mcp.servers if servers is None or s.id in servers]
    longest = max((s.connect_timeout for s in started), default=1.0)
    try:
        await manager.start(wait=wait if wait is not None else longest + 1, only=servers)
        yield host
    finally:
        await manager.stop()
