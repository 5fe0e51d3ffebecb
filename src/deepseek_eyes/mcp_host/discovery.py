"""Listing one server's two planes over a connected client: tools, and content (resources,
resource templates and prompts), each under its own budget and deadline.

The planes fail alone on purpose. A content catalog over its budget must not take the
server's tools with it, nor a broken ``tools/list`` its resources (seed 000: independent
``toolsStatus`` and ``contentStatus``). So a plane's failure is *returned* beside the other
plane's listing, never raised over it, and the manager decides per plane what to keep
(:meth:`deepseek_eyes.mcp_host.manager.McpManager._discover`). Within a plane a listing is
still all or nothing (:mod:`deepseek_eyes.mcp_host.catalog`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from deepseek_eyes.errors import McpCatalogError
from deepseek_eyes.mcp_host.catalog import (
    CONTENT_BUDGET,
    TOOL_BUDGET,
    Meter,
    PromptEntry,
    ResourceEntry,
    ToolEntry,
    drain,
    tool_entries,
)
from deepseek_eyes.mcp_host.liveness import Activity
from deepseek_eyes.settings import McpServerSettings

if TYPE_CHECKING:  # the SDK loads with the first connection (issue 41: not in a bare gateway)
    from mcp import Client

__all__ = ["ContentPlane", "Listing", "ToolsPlane", "content_wanted", "list_planes"]


def content_wanted(s: McpServerSettings) -> bool:
    return s.resources_enabled or s.prompts_enabled


@dataclass(frozen=True)
class ToolsPlane:
    tools: tuple[ToolEntry, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.tools


@dataclass(frozen=True)
class ContentPlane:
    resources: tuple[ResourceEntry, ...] = ()
    prompts: tuple[PromptEntry, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.resources or self.prompts)


@dataclass(frozen=True)
class Listing:
    """One listing of a server: each wanted plane either listed or failed (never both);
    an unwanted plane is neither."""

    tools: ToolsPlane | None = None
    content: ContentPlane | None = None
    tools_error: BaseException | None = None
    content_error: BaseException | None = None
    instructions: str | None = None

    @property
    def errors(self) -> list[BaseException]:
        return [e for e in (self.tools_error, self.content_error) if e is not None]

    @property
    def listed_any(self) -> bool:
        return self.tools is not None or self.content is not None


async def list_planes(s: McpServerSettings, client: Client, *, timeout: float,
                      activity: Activity | None = None) -> Listing:
    """List every enabled plane of ``s``, each under ``timeout`` on its own."""
    tools: ToolsPlane | None = None
    content: ContentPlane | None = None
    tools_error: BaseException | None = None
    content_error: BaseException | None = None
    if s.tools_enabled:
        try:
            with anyio.fail_after(timeout), _busy(activity):
                tools = await _list_tools(s, client)
        except Exception as exc:
            tools_error = exc
    if content_wanted(s):
        try:
            with anyio.fail_after(timeout), _busy(activity):
                content = await _list_content(s, client)
        except Exception as exc:
            content_error = exc
    instructions = (client.instructions or "").strip()[: s.max_instruction_chars] or None
    return Listing(tools, content, tools_error, content_error, instructions)


def _busy(activity: Activity | None) -> contextlib.AbstractContextManager[Any]:
    """A request in flight, so liveness does not ask the server meanwhile."""
    return activity.request() if activity is not None else contextlib.nullcontext()


async def _list_tools(s: McpServerSettings, client: Client) -> ToolsPlane:
    """Raises: McpCatalogError: the plane's whole listing is rejected."""
    if client.server_capabilities.tools is None:
        return ToolsPlane()
    raw: list[Any] = []

    async def tool_page(cursor: str | None) -> tuple[list[Any], str | None]:
        page = await client.list_tools(cursor=cursor)
        return page.tools, page.next_cursor

    await drain(tool_page, Meter(TOOL_BUDGET, "tools"), raw)
    return ToolsPlane(tool_entries(s.id, raw))


async def _list_content(s: McpServerSettings, client: Client) -> ContentPlane:
    """Resources, templates and prompts under one cumulative budget.

    Raises:
        McpCatalogError: the plane's whole listing is rejected.
    """
    caps = client.server_capabilities
    meter = Meter(CONTENT_BUDGET, "content")
    resources: list[ResourceEntry] = []
    prompts: list[PromptEntry] = []
    if s.resources_enabled and caps.resources is not None:
        raw: list[Any] = []

        async def res_page(cursor: str | None) -> tuple[list[Any], str | None]:
            page = await client.list_resources(cursor=cursor)
            return page.resources, page.next_cursor

        async def tpl_page(cursor: str | None) -> tuple[list[Any], str | None]:
            page = await client.list_resource_templates(cursor=cursor)
            return page.resource_templates, page.next_cursor

        await drain(res_page, meter, raw)
        resources = [ResourceEntry(str(r.uri), r.name, r.mime_type) for r in raw]
        raw = []
        await drain(tpl_page, meter, raw)
        resources += [ResourceEntry(str(r.uri_template), r.name, r.mime_type, template=True)
                      for r in raw]
    if s.prompts_enabled and caps.prompts is not None:
        rawp: list[Any] = []

        async def prompt_page(cursor: str | None) -> tuple[list[Any], str | None]:
            page = await client.list_prompts(cursor=cursor)
            return page.prompts, page.next_cursor

        await drain(prompt_page, meter, rawp)
        prompts = [
            PromptEntry(p.name, (p.description or "")[:4096], tuple(
                (a.name, bool(a.required)) for a in (p.arguments or ())))
            for p in rawp
        ]
    _unique([r.uri for r in resources], "resource")
    _unique([p.name for p in prompts], "prompt")
    return ContentPlane(tuple(resources), tuple(prompts))


def _unique(names: list[str], what: str) -> None:
    if len(set(names)) != len(names):
        raise McpCatalogError(f"a {what} is listed twice", code="MCP_CATALOG_INVALID")
