"""A tool table on an SDK server: our schemas and hints published, arguments passed raw,
and the one reach into the SDK kept in one place."""

from __future__ import annotations

import re
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import TextContent

from deepseek_eyes.toolkit.registration import register_tool, register_tools
from deepseek_eyes.toolkit.results import ToolResult
from deepseek_eyes.toolkit.spec import READ, Annotations, ToolDef, object_schema

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src" / "deepseek_eyes"
ACT = Annotations(read_only=False, destructive=True, idempotent=False, open_world=True)
TABLE = (
    ToolDef("demo_count", "Count to n.", object_schema(
        {"n": {"type": "integer", "minimum": 1, "maximum": 5},
         "loud": {"type": "boolean"}}, ("n",)), READ),
    ToolDef("demo_act", "Act.", object_schema({"what": {"type": "string"}}), ACT),
)


def _server(seen: list[dict[str, Any]]) -> MCPServer:
    async def run(tool: ToolDef, ctx: Context, given: dict[str, Any]) -> ToolResult:
        assert isinstance(ctx, Context)
        seen.append({"tool": tool.name, **given})
        return ToolResult(f"{tool.name} ran", {"given": sorted(given)})

    mcp = MCPServer("demo")
    register_tools(mcp, TABLE, run)
    return mcp


async def test_the_table_is_published_exactly() -> None:
    async with Client(_server([]), mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(listed) == ["demo_count", "demo_act"]
    for tool in TABLE:
        published = listed[tool.name]
        assert published.description == tool.description
        assert published.input_schema == dict(tool.parameters)
        hints = published.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint,
                hints.open_world_hint) == astuple(tool.annotations)


async def test_arguments_reach_the_capability_raw_and_nulls_are_dropped() -> None:
    seen: list[dict[str, Any]] = []
    async with Client(_server(seen), mode="legacy") as client:
        # "5" and 1 stay what they are: the capability refuses them, not the SDK's coercion.
        result = await client.call_tool("demo_count", {"n": "5", "loud": 1})
        await client.call_tool("demo_act", {"what": None})
    assert seen == [{"tool": "demo_count", "n": "5", "loud": 1}, {"tool": "demo_act"}]
    assert isinstance(result.content[0], TextContent)
    assert result.content[0].text == "demo_count ran"
    assert result.structured_content == {"given": ["loud", "n"]}


async def test_a_typed_function_keeps_its_validation_and_gets_our_output_schema() -> None:
    async def see(image: str) -> str:
        return image

    mcp = MCPServer("demo")
    output = {"type": "object", "properties": {"summary": {"type": "string"}}}
    register_tool(mcp, ToolDef("see", "See.", object_schema({"image": {"type": "string"}},
                                                              ("image",)), READ),
                  see, output_schema=output)
    async with Client(mcp, mode="legacy") as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.output_schema == output
    assert tool.input_schema["additionalProperties"] is False


def test_the_sdk_patch_lives_in_one_place() -> None:
    reaching = sorted(str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
                      if re.search(r"\._tool_manager\b", path.read_text(encoding="utf-8")))
    assert reaching == ["toolkit/registration.py"]
