"""Bounded discovery: every page of a list drained under one cumulative budget.

A catalog is all or nothing. A duplicate name, a malformed entry, a repeated cursor or any
budget crossed rejects the whole generation, so a server can never get a *prefix* of a
broken catalog published. The walk over schemas is iterative (an explicit stack), so a
depth bomb costs the budget, not the interpreter's recursion limit.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.errors import McpCatalogError
from deepseek_eyes.mcp_host.names import public_name
from deepseek_eyes.mcp_host.policy import RiskClass, estimate_tokens, risk_class

__all__ = [
    "CONTENT_BUDGET",
    "TOOL_BUDGET",
    "Budget",
    "Catalog",
    "Meter",
    "PromptEntry",
    "ResourceEntry",
    "ToolEntry",
    "charge",
    "drain",
    "measure_schema",
    "tool_entries",
]


@dataclass(frozen=True)
class Budget:
    entries: int
    pages: int
    chars: int
    bytes: int
    depth: int = 64
    nodes: int = 100_000


TOOL_BUDGET = Budget(entries=256, pages=256, chars=1_000_000, bytes=4_000_000)
CONTENT_BUDGET = Budget(entries=256, pages=256, chars=1_000_000, bytes=4_000_000)


@dataclass(frozen=True)
class ToolEntry:
    name: str
    public_name: str
    description: str
    input_schema: dict[str, Any]
    risk: RiskClass
    schema_tokens: int


@dataclass(frozen=True)
class ResourceEntry:
    uri: str  # a concrete URI, or a URI template when ``template`` is true
    name: str
    mime_type: str | None
    template: bool = False


@dataclass(frozen=True)
class PromptEntry:
    name: str
    description: str
    arguments: tuple[tuple[str, bool], ...]  # (name, required)


@dataclass(frozen=True)
class Catalog:
    """One immutable generation of what a server offers."""

    generation: int
    tools: tuple[ToolEntry, ...] = ()
    resources: tuple[ResourceEntry, ...] = ()
    prompts: tuple[PromptEntry, ...] = ()
    instructions: str | None = None
    content_listed: bool = False
    by_public: dict[str, ToolEntry] = field(default_factory=dict, compare=False)

    @property
    def empty(self) -> bool:
        return not (self.tools or self.resources or self.prompts)


class Meter:
    """The cumulative budget of one generation's discovery."""

    def __init__(self, budget: Budget, what: str) -> None:
        self.budget, self.what = budget, what
        self.entries = self.pages = self.chars = self.bytes = self.nodes = 0

    def over(self, limit: str, value: int, cap: int) -> None:
        if value > cap:
            raise McpCatalogError(
                f"{self.what} catalog exceeds its {limit} budget ({cap})",
                code="MCP_CATALOG_LIMIT", details={"what": self.what, "limit": limit, "cap": cap},
            )

    def page(self) -> None:
        self.pages += 1
        self.over("pages", self.pages, self.budget.pages)

    def entry(self, raw: Any) -> None:
        self.entries += 1
        self.over("entries", self.entries, self.budget.entries)
        text = json.dumps(raw, separators=(",", ":"), ensure_ascii=False, default=str)
        self.chars += len(text)
        self.over("characters", self.chars, self.budget.chars)
        self.bytes += len(text.encode("utf-8", "surrogatepass"))
        self.over("bytes", self.bytes, self.budget.bytes)


def measure_schema(schema: Any, meter: Meter) -> None:
    """Walk ``schema`` iteratively, charging nodes and checking depth."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        meter.nodes += 1
        meter.over("nodes", meter.nodes, meter.budget.nodes)
        meter.over("depth", depth, meter.budget.depth)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


Page = tuple[Sequence[Any], str | None]


async def drain(
    fetch: Callable[[str | None], Awaitable[Page]], meter: Meter, out: list[Any],
) -> None:
    """Fetch pages into ``out`` until no cursor remains, charging ``meter`` per entry; a
    repeated cursor is a loop."""
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        meter.page()
        items, cursor = await fetch(cursor)
        for item in items:
            charge(item, meter)
            out.append(item)
        if not cursor:
            return
        if cursor in seen:
            raise McpCatalogError(
                f"{meter.what} pagination repeated a cursor", code="MCP_CATALOG_CURSOR_LOOP",
                details={"what": meter.what, "pages": meter.pages},
            )
        seen.add(cursor)


def charge(item: Any, meter: Meter) -> None:
    """Charge one listed entry: its schemas' depth and nodes first (so a depth bomb never
    reaches a recursive serializer), then its size."""
    for attr in ("input_schema", "output_schema", "arguments"):
        schema = getattr(item, attr, None)
        if schema is not None:
            measure_schema(_dump(schema) if not isinstance(schema, list) else
                           [_dump(a) for a in schema], meter)
    meter.entry(_dump(item))


def _dump(item: Any) -> Any:
    dump = getattr(item, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if dump else item


def tool_entries(server_id: str, tools: Sequence[Any]) -> tuple[ToolEntry, ...]:
    """Validate listed tools into entries; duplicates and malformed schemas reject all."""
    out: list[ToolEntry] = []
    names: set[str] = set()
    publics: set[str] = set()
    for tool in tools:
        name = getattr(tool, "name", None)
        schema = getattr(tool, "input_schema", None)
        if not isinstance(name, str) or not name or len(name) > 256:
            raise McpCatalogError("a tool has no valid name", code="MCP_CATALOG_INVALID")
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise McpCatalogError(
                f"tool {name!r} has no object input schema", code="MCP_CATALOG_INVALID",
                details={"tool": name},
            )
        pub = public_name(server_id, name)
        if name in names or pub in publics:
            raise McpCatalogError(
                f"tool {name!r} is listed twice", code="MCP_CATALOG_INVALID",
                details={"tool": name},
            )
        names.add(name)
        publics.add(pub)
        description = (getattr(tool, "description", None) or "")[:4096]
        out.append(ToolEntry(
            name=name, public_name=pub, description=description, input_schema=schema,
            risk=risk_class(getattr(tool, "annotations", None)),
            schema_tokens=estimate_tokens({"n": pub, "d": description, "p": schema}),
        ))
    return tuple(out)
