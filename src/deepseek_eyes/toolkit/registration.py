"""A tool table on an official-SDK MCP server, and a :class:`ToolResult` as its answer.

:func:`register_tools` publishes a table (:class:`~deepseek_eyes.toolkit.spec.ToolDef`) with
exactly its JSON schemas and annotations. Each tool is registered *untyped*: its function
takes every argument as ``Any`` and hands the ones given to the capability, which checks
them itself (:mod:`deepseek_eyes.toolkit.arguments`) — the SDK's pydantic validation would
coerce ``"5"`` into 5 and ``true`` into 1. The schema the SDK derives from such a function
says nothing, so ours replaces it after registration: :func:`_publish` is the one place that
reaches into the SDK for that (see its comment).
"""

from __future__ import annotations

import base64
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations

from deepseek_eyes import __version__
from deepseek_eyes.toolkit.results import ToolResult
from deepseek_eyes.toolkit.spec import Annotations, ToolDef

__all__ = ["RunTool", "capability_server", "closing_lifespan", "mcp_annotations",
           "register_tool", "register_tools", "to_call_result", "untyped_function"]

#: Runs one call of ``tool`` for the connection of ``ctx`` with the arguments given.
RunTool = Callable[[ToolDef, Context, dict[str, Any]], Awaitable[ToolResult]]


def capability_server(name: str, title: str, instructions: str,
                      lifespan: Callable[[MCPServer], contextlib.AbstractAsyncContextManager[None]]
                      ) -> MCPServer:
    """An SDK server for one capability (``deepseek-eyes-<name>``), with the project's
    version and the SDK's own logging kept to warnings (stdio's stdout is the protocol)."""
    return MCPServer(f"deepseek-eyes-{name}", title=f"DeepSeekEyes {title}",
                     instructions=instructions, version=__version__, lifespan=lifespan,
                     log_level="WARNING")


def closing_lifespan(aclose: Callable[[], Awaitable[None]], *, close_on_exit: bool = True
                     ) -> Callable[[MCPServer], contextlib.AbstractAsyncContextManager[None]]:
    """A server lifespan that runs ``aclose`` when it ends, if ``close_on_exit``: for stdio,
    whose one lifespan is the process's; an HTTP app closes what it serves itself, because
    the SDK enters the lifespan once per HTTP session."""

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            if close_on_exit:
                await aclose()

    return lifespan


def mcp_annotations(hints: Annotations) -> ToolAnnotations:
    """The four hints as the SDK publishes them (``readOnlyHint`` …)."""
    return ToolAnnotations(read_only_hint=hints.read_only, destructive_hint=hints.destructive,
                           idempotent_hint=hints.idempotent, open_world_hint=hints.open_world)


def to_call_result(result: ToolResult) -> CallToolResult:
    """A result as MCP content: its text, an image block when its screenshot is delivered
    (MCP clients take pixels), the data as ``structuredContent`` (none when empty) and the
    meta as ``_meta``."""
    content: list[TextContent | ImageContent] = [TextContent(type="text", text=result.text)]
    if result.deliver and result.screenshot is not None:
        content.append(ImageContent(type="image", mime_type="image/png",
                                    data=base64.b64encode(result.screenshot.png).decode()))
    return CallToolResult(content=list(content),
                          structured_content=dict(result.data) if result.data else None,
                          is_error=result.is_error,
                          _meta=dict(result.meta) if result.meta is not None else None)


def untyped_function(tool: ToolDef, run: RunTool) -> Callable[..., Awaitable[CallToolResult]]:
    """A function the SDK can register for ``tool``: the context, then every property of its
    schema as an optional untyped keyword (an argument the client left out, or sent as
    null, is not given)."""

    async def call(ctx: Context, **arguments: Any) -> CallToolResult:
        given = {k: v for k, v in arguments.items() if v is not None}
        return to_call_result(await run(tool, ctx, given))

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=Any)
                   for name in tool.parameters["properties"]]
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=CallToolResult)
    call.__name__ = tool.name
    return call


def register_tool(mcp: MCPServer, tool: ToolDef, function: Callable[..., Any], *,
                  output_schema: Mapping[str, Any] | None = None) -> None:
    """Add ``function`` as ``tool``: its name, description and annotations, our input
    schema, and ``output_schema`` when given (unstructured otherwise)."""
    mcp.add_tool(function, name=tool.name, description=tool.description,
                 annotations=mcp_annotations(tool.annotations), structured_output=False)
    _publish(mcp, tool, output_schema)


def register_tools(mcp: MCPServer, tools: Iterable[ToolDef], run: RunTool) -> None:
    """Add every tool of a table, each run by ``run`` (see :func:`untyped_function`)."""
    for tool in tools:
        register_tool(mcp, tool, untyped_function(tool, run))


def _publish(mcp: MCPServer, tool: ToolDef, output_schema: Mapping[str, Any] | None) -> None:
    # Why this reaches into the SDK: MCPServer derives a tool's input (and output) schema
    # from the function's signature and offers no public way to set one. Our functions are
    # untyped on purpose (see the module docstring), so the derived schema would publish no
    # types, enums or bounds; the registered Tool's ``parameters`` (and its metadata's
    # ``output_schema``, read live on each tools/list and call) are replaced by the table's.
    # This is the only place in the project that touches ``_tool_manager``.
    registered = mcp._tool_manager.get_tool(tool.name)
    if registered is None:  # add_tool just registered it; nothing to publish otherwise
        return
    registered.parameters = dict(tool.parameters)
    if output_schema is not None:
        registered.fn_metadata.output_schema = dict(output_schema)
