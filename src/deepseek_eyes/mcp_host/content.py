"""The shared content tools: their schemas, when each is offered, and the resource list.

Three tools serve every server's content planes, each naming its server:
``mcp__deepseekeyes__resources`` lists, ``mcp__deepseekeyes__resource`` reads and
``mcp__deepseekeyes__prompt`` gets a prompt. A plane's tools are offered only when some
live server has that plane on and at least one allowed item: a tool whose every call
would fail still costs schema budget.

The list pages over the catalog the host already discovered (bounded, all or nothing;
:mod:`~deepseek_eyes.mcp_host.catalog`), not over the server: the allow/deny selectors
are applied to exactly what a read will be matched against, a page costs no external call,
and the server cannot answer a list with something discovery would have refused. Its cursor
is ours (``<generation>.<offset>``): one from an older catalog generation is refused
(``MCP_GENERATION_STALE``) rather than read against a list that moved. A page holds at most
:data:`PAGE_ITEMS` entries and :data:`PAGE_CHARS` characters (never more than the result
preview allows), every URI, name and MIME type written as a :func:`quote` inside a
:func:`fence`, since the server chose them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterator
from typing import Any

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.catalog import Catalog, ResourceEntry
from deepseek_eyes.mcp_host.policy import permitted
from deepseek_eyes.mcp_host.results import canonical_json
from deepseek_eyes.settings import McpServerSettings
from deepseek_eyes.untrusted import fence, quote

__all__ = [
    "GENERIC_SCHEMAS",
    "PAGE_CHARS",
    "PAGE_ITEMS",
    "PROMPT_TOOL",
    "RESOURCES_TOOL",
    "RESOURCE_TOOL",
    "as_content",
    "offered_planes",
    "plane_items",
    "plane_tools",
    "resource_page",
    "template_regex",
    "uri_digest",
]

RESOURCES_TOOL = "mcp__deepseekeyes__resources"
RESOURCE_TOOL = "mcp__deepseekeyes__resource"
PROMPT_TOOL = "mcp__deepseekeyes__prompt"

#: Entries and characters of one page of the resource list.
PAGE_ITEMS = 50
PAGE_CHARS = 8_000
#: A URI longer than a read accepts is listed cut (and marked so by its "…").
_URI_CHARS = 2048

GENERIC_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    RESOURCES_TOOL: (
        "List the allowed resources and resource templates of a connected MCP server, a page "
        "at a time; pass the returned cursor for the next page.", {
            "type": "object", "required": ["server"], "additionalProperties": False,
            "properties": {"server": {"type": "string"},
                           "cursor": {"type": "string", "maxLength": 64}}}),
    RESOURCE_TOOL: ("Read an allowed resource of a connected MCP server.", {
        "type": "object", "required": ["server", "uri"], "additionalProperties": False,
        "properties": {"server": {"type": "string"}, "uri": {"type": "string"}}}),
    PROMPT_TOOL: ("Get an allowed prompt of a connected MCP server.", {
        "type": "object", "required": ["server", "name"], "additionalProperties": False,
        "properties": {"server": {"type": "string"}, "name": {"type": "string"},
                       "arguments": {"type": "object",
                                     "additionalProperties": {"type": "string"}}}}),
}

_PLANE_TOOLS = {"resources": (RESOURCES_TOOL, RESOURCE_TOOL), "prompts": (PROMPT_TOOL,)}


def offered_planes(settings: McpServerSettings, catalog: Catalog) -> set[str]:
    """The content planes of a server that are on and have an allowed item."""
    planes: set[str] = set()
    if settings.resources_enabled and any(
            permitted(settings, "resources", r.uri) for r in catalog.resources):
        planes.add("resources")
    if settings.prompts_enabled and any(
            permitted(settings, "prompts", p.name) for p in catalog.prompts):
        planes.add("prompts")
    return planes


def plane_tools(planes: Collection[str]) -> list[str]:
    """The shared tools of ``planes``, in the fixed order of :data:`GENERIC_SCHEMAS`."""
    names = {name for plane in planes for name in _PLANE_TOOLS[plane]}
    return [name for name in GENERIC_SCHEMAS if name in names]


def plane_items(catalog: Catalog, plane: str) -> Iterator[str]:
    """The names (prompts) or URIs (resources, templates) a plane's selectors match."""
    if plane == "prompts":
        yield from (p.name for p in catalog.prompts)
    else:
        yield from (r.uri for r in catalog.resources)


@functools.lru_cache(maxsize=256)
def template_regex(template: str) -> re.Pattern[str]:
    """A resource template as a pattern; cached, as every read tries each allowed one."""
    parts = re.split(r"(\{[^{}]{1,64}\})", template)
    return re.compile("".join(
        "[^/?#]+" if p.startswith("{") and p.endswith("}") else re.escape(p) for p in parts
    ) + r"\Z")


def _line(entry: ResourceEntry) -> str:
    kind = "template" if entry.template else "resource"
    line = f"{kind} {quote(entry.uri, _URI_CHARS)}"
    if entry.name:
        line += f" name {quote(entry.name, 200)}"
    if entry.mime_type:
        line += f" mime {quote(entry.mime_type, 100)}"
    return line


def resource_page(settings: McpServerSettings, catalog: Catalog, cursor: str | None, *,
                  max_chars: int = PAGE_CHARS) -> dict[str, Any]:
    """One page of a server's allowed resources, as a text content block for admission.

    Raises:
        McpError: ``MCP_ARGUMENTS_INVALID`` (a cursor that is not ours),
            ``MCP_GENERATION_STALE`` (a cursor of an older catalog).
    """
    allowed = [r for r in catalog.resources if permitted(settings, "resources", r.uri)]
    start = 0
    if cursor:
        generation, _, offset = cursor.partition(".")
        if not (generation.isdigit() and offset.isdigit()) or len(cursor) > 64:
            raise McpError("the cursor is not one this list returned",
                           code="MCP_ARGUMENTS_INVALID", details={"invalid": ["cursor"]})
        if int(generation) != catalog.generation:
            raise McpError("the server's catalog changed since that cursor; list again "
                           "without one", code="MCP_GENERATION_STALE",
                           details={"live": catalog.generation})
        start = min(int(offset), len(allowed))
    budget = min(PAGE_CHARS, max_chars)
    lines: list[str] = []
    used = 0
    for entry in allowed[start:start + PAGE_ITEMS]:
        line = _line(entry)
        if lines and used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    end = start + len(lines)
    tail = (f"allowed resources {start + 1}-{end} of {len(allowed)}" if lines
            else f"no allowed resources after {start} of {len(allowed)}")
    if end < len(allowed):
        tail += f"; next cursor: {catalog.generation}.{end}"
    else:
        tail += "; end of the list"
    return {"content": [{"type": "text",
                         "text": fence(lines, "mcp resource list") + "\n" + tail}]}


def uri_digest(uri: str) -> str:
    """What the audit keeps of a concrete resource URI."""
    return "uri:" + canonical_json(uri)[1]


def as_content(value: dict[str, Any]) -> dict[str, Any]:
    """Resource contents and prompt messages, shaped as content blocks for admission.

    A prompt message's block keeps its ``role`` (``user`` or ``assistant``) beside its
    content, so the preview can say who speaks; everything else of the block is kept as
    the server sent it, embedded resources included.
    """
    if "contents" in value:
        return {"content": [
            {"type": "text", "text": c["text"]} if "text" in c else
            {"type": "resource", "resource": c} for c in value["contents"]]}
    blocks = []
    for message in value.get("messages", []):
        block = message.get("content", {})
        blocks.append({**block, "role": message.get("role")} if isinstance(block, dict)
                      else block)
    return {"content": blocks, "description": value.get("description", "")}
