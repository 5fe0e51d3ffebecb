"""Status events, starting only what is needed, and restart, on in-process SDK servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.server import Server

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.running import only, server_of_public_name, through
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio


def server_with(*names: str) -> Server[Any]:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=n, input_schema={"type": "object"},
                       annotations=types.ToolAnnotations(read_only_hint=True)) for n in names])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    return Server("s", on_list_tools=list_tools, on_call_tool=call_tool)


SERVERS = {"a": ("a1", "a2"), "b": ("b1",), "c": ("c1",)}


def make(tmp_path: Path, connected: list[str], **fields: Any) -> tuple[McpHost, McpSettings]:
    cfg = McpSettings.model_validate({"servers": [
        {"id": sid, "transport": "stdio", "command": "unused",
         "allow": {"tools": ["a*", "b*", "c*"]}} for sid in SERVERS], **fields})

    def connector(s: McpServerSettings) -> Server[Any]:
        connected.append(s.id)
        return server_with(*SERVERS[s.id])

    manager = McpManager(cfg, connector=connector)
    host = McpHost(manager, blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))
    return host, cfg


async def test_events_follow_a_partial_start_and_a_restart(tmp_path: Path) -> None:
    connected: list[str] = []
    host, cfg = make(tmp_path, connected)
    manager = host.manager
    seen: list[tuple[str, str, int]] = []

    async def read(events: Any) -> None:
        async for event in events:
            seen.append((event["id"], event["status"], event["generation"]))
            if (event["id"], event["status"], event["generation"]) == ("b", "ready", 2):
                return

    async with manager.events.subscribe() as events:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read, events)
                await manager.start(wait=10, only=only(cfg, "b"))
                assert connected == ["b"]  # a and c were never started
                assert {i: s.status for i, s in manager.servers.items()} == {
                    "a": "stopped", "b": "ready", "c": "stopped"}
                await manager.restart("b", wait=10)
    assert connected == ["b", "b"]
    b_events = [(status, gen) for sid, status, gen in seen if sid == "b"]
    assert b_events[-1] == ("ready", 2)
    assert ("ready", 1) in b_events  # the first connection, before the restart
    assert all(status == "stopped" for sid, status, _ in seen if sid != "b")
    await manager.stop()


async def test_a_slow_subscriber_gets_the_latest_state_per_server(tmp_path: Path) -> None:
    connected: list[str] = []
    host, _ = make(tmp_path, connected)
    async with host.manager.events.subscribe() as events:
        await host.manager.start(wait=10)  # nobody reads while three servers connect
        latest: dict[str, str] = {}
        with anyio.fail_after(5):
            async for event in events:
                latest[event["id"]] = event["status"]
                if latest == {"a": "ready", "b": "ready", "c": "ready"}:
                    break
    await host.manager.stop()


async def test_budgets_need_the_servers_declared_before(tmp_path: Path) -> None:
    """a's tools take the whole max_tools budget, so b1 is not offered; starting b alone
    would wrongly offer it, which is why a call starts through(b)."""
    connected: list[str] = []
    host, cfg = make(tmp_path, connected, max_tools=2)
    assert through(cfg, "b") == {"a", "b"}
    assert through(cfg, "a") == {"a"}
    assert server_of_public_name("mcp__b__b1") == "b"
    await host.manager.start(wait=10, only=through(cfg, "b"))
    try:
        assert sorted(connected) == ["a", "b"]
        assert [t.public_name for t in host.exposed()] == ["mcp__a__a1", "mcp__a__a2"]
        with pytest.raises(McpError) as over:
            await host.call_tool("mcp__b__b1", {})
        assert over.value.code == "MCP_TOOL_NOT_EXPOSED"
    finally:
        await host.manager.stop()
    alone, _ = make(tmp_path, [], max_tools=2)
    await alone.manager.start(wait=10, only=only(cfg, "b"))
    try:
        assert [t.public_name for t in alone.exposed()] == ["mcp__b__b1"]
    finally:
        await alone.manager.stop()
    for bad in ("nope", "mcp__x", "mcp____t", "mcp__a__"):
        with pytest.raises(McpError):
            server_of_public_name(bad)
    with pytest.raises(McpError) as unknown:
        through(cfg, "zz")
    assert unknown.value.code == "MCP_SERVER_UNKNOWN"
