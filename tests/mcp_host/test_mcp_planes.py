"""The tools plane and the content plane fail, succeed and empty out independently, and an
emptied plane is withdrawn until a probe confirms it. SDK servers written here, connected
in-process through the manager's connector hook (their catalogs change on the test's
command), and one as a real stdio process behind the CLI."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.server import Server
from test_mcp_cli import run

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.settings_file import dumps
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"},
                      annotations=types.ToolAnnotations(read_only_hint=True))


def resource(n: int) -> types.Resource:
    return types.Resource(uri=f"test://r/{n}", name=f"r{n}", mime_type="text/plain")


class MixedPeer:
    """An SDK server with tools and resources the test edits, then announces."""

    def __init__(self, tools: int, resources: int) -> None:
        self.tools = [tool(f"t{i}") for i in range(tools)]
        self.resources = [resource(i) for i in range(resources)]
        self.duplicate_tools = False
        self.sessions: list[Any] = []

        async def list_tools(ctx: Any, _params: Any) -> types.ListToolsResult:
            self.sessions.append(ctx.session)
            if self.duplicate_tools:
                return types.ListToolsResult(tools=[tool("t0"), tool("t0")])
            return types.ListToolsResult(tools=list(self.tools))

        async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=list(self.resources))

        async def list_templates(_ctx: Any, _params: Any) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(resource_templates=[])

        async def read_resource(_ctx: Any, params: Any) -> types.ReadResourceResult:
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=str(params.uri), mime_type="text/plain", text="hello")])

        async def call_tool(_ctx: Any, params: types.CallToolRequestParams
                            ) -> types.CallToolResult:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"ran {params.name}")])

        self.server: Server[Any] = Server(
            "mixed", on_list_tools=list_tools, on_call_tool=call_tool,
            on_list_resources=list_resources, on_list_resource_templates=list_templates,
            on_read_resource=read_resource)

    async def announce(self) -> None:
        await self.sessions[-1].send_tool_list_changed()


def host_of(peer: MixedPeer, tmp_path: Path, *, resources: bool = True) -> McpHost:
    cfg = McpSettings.model_validate({"servers": [{
        "id": "m", "transport": "stdio", "command": "unused", "protocol": "legacy",
        "call_timeout": 5, "connect_timeout": 10, "resources_enabled": resources,
        "allow": {"tools": ["t0"], "resources": ["test://r/*"]}}]})
    manager = McpManager(cfg, connector=lambda _s: peer.server)
    return McpHost(manager, blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))


RESOURCE = "mcp__deepseekeyes__resource"


def names(host: McpHost) -> set[str]:
    """The exposed tool names: the server's own, and ``RESOURCE`` when it offers content."""
    exposed = {t.public_name for t in host.exposed()}
    return {n for n in exposed if n.startswith("mcp__m__")} | (exposed & {RESOURCE})


async def test_a_content_plane_over_its_budget_leaves_the_tools_exposed(tmp_path: Path) -> None:
    host = host_of(MixedPeer(tools=1, resources=257), tmp_path)  # 257 > 256 content entries
    await host.manager.start(wait=10)
    try:
        view = host.manager.status()[0]
        assert (view["tools_status"], view["tools_error"]) == ("ready", None)
        assert (view["content_status"], view["content_error"]) == ("failed", "MCP_CATALOG_LIMIT")
        assert names(host) == {"mcp__m__t0"}  # and no generic resource tool
        done = await host.call_tool("mcp__m__t0", {}, generation=host.exposed()[0].generation)
        assert done.preview == "ran t0"
        with pytest.raises(McpError) as refused:
            await host.read_resource("m", "test://r/1")
        assert refused.value.code == "MCP_SERVER_UNAVAILABLE"
        assert host.manager.servers["m"].failed  # a wanted plane is down: status says so
    finally:
        await host.manager.stop()


async def test_a_failed_tools_plane_leaves_the_content_readable(tmp_path: Path) -> None:
    peer = MixedPeer(tools=1, resources=2)
    peer.duplicate_tools = True
    host = host_of(peer, tmp_path)
    await host.manager.start(wait=10)
    try:
        view = host.manager.status()[0]
        assert (view["tools_status"], view["tools_error"]) == ("failed", "MCP_CATALOG_INVALID")
        assert (view["content_status"], view["content_error"]) == ("ready", None)
        assert names(host) == {RESOURCE}
        read = await host.read_resource("m", "test://r/1")
        assert "hello" in read.preview
        peer.duplicate_tools = False  # the tools plane recovers on its own
        await peer.announce()
        await until(lambda: host.manager.servers["m"].tools_status == "ready")
        assert names(host) == {"mcp__m__t0", RESOURCE}
        assert host.manager.status()[0]["tools_error"] is None
    finally:
        await host.manager.stop()


async def test_a_second_empty_listing_stays_withdrawn_until_the_probe(tmp_path: Path) -> None:
    peer = MixedPeer(tools=1, resources=0)
    host = host_of(peer, tmp_path, resources=False)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["m"]
        peer.tools.clear()
        await peer.announce()
        await until(lambda: state.tools_status == "withdrawn")
        withdrawn = state.generation
        listed = len(peer.sessions)
        await peer.announce()  # empty again: still no probe, so still not ready
        # The listing is folded in the same step its (only) request ends in.
        await until(lambda: len(peer.sessions) > listed and state.activity.in_flight == 0)
        assert (state.tools_status, state.catalog, state.generation) == (
            "withdrawn", None, withdrawn)
        assert host.exposed() == []
        probe = await host.manager.probe("m")
        assert probe["tools"] == []
        assert state.tools_status == "ready"
        assert state.catalog is not None
        assert state.catalog.empty
        assert state.generation > withdrawn
    finally:
        await host.manager.stop()


async def test_tools_going_empty_beside_resources_are_withdrawn(tmp_path: Path) -> None:
    peer = MixedPeer(tools=1, resources=2)
    host = host_of(peer, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["m"]
        assert names(host) == {"mcp__m__t0", RESOURCE}
        peer.tools.clear()
        await peer.announce()
        await until(lambda: state.tools_status == "withdrawn")
        assert state.content_status == "ready"
        assert names(host) == {RESOURCE}  # the resources stay
        assert "hello" in (await host.read_resource("m", "test://r/0")).preview
        withdrawn = state.generation
        probe = await host.manager.probe("m")
        assert (probe["tools"], probe["resources"]) == ([], 2)
        assert (state.tools_status, state.content_status) == ("ready", "ready")
        assert state.generation == withdrawn  # the entries did not change: same generation
        assert state.catalog is not None
        assert len(state.catalog.resources) == 2
    finally:
        await host.manager.stop()


OVER_BUDGET_SERVER = '''
from mcp.server.mcpserver import MCPServer
app = MCPServer("big")
@app.tool(description="echo", annotations={"readOnlyHint": True})
def t0(text: str) -> str:
    return text
for i in range(257):
    app.resource(f"test://r/{i}", name=f"r{i}")(lambda: "a resource")
app.run()
'''


def test_the_cli_names_the_failed_plane_and_lists_the_other(tmp_path: Path) -> None:
    """A real stdio SDK server with one tool and 257 resources, through ``mcp probe`` and
    ``mcp status``: the content plane fails on its own, the tools are listed and ready."""
    script = tmp_path / "big_server.py"
    script.write_text(OVER_BUDGET_SERVER, encoding="utf-8")
    config = tmp_path / "eyes.toml"
    config.write_text(dumps({"mcp": {"servers": [{
        "id": "big", "transport": "stdio", "command": sys.executable, "args": [str(script)],
        "resources_enabled": True, "allow": {"tools": ["t0"]}}]}}), encoding="utf-8")
    probe = run(config, "probe", "big", "--json")
    assert probe.returncode == 1, probe.stderr
    report = json.loads(probe.stdout)
    assert (report["tools"], report["tools_error"]) == (["t0"], None)
    assert report["content_error"] == "MCP_CATALOG_LIMIT"
    text = run(config, "probe", "big")
    assert "content: failed (MCP_CATALOG_LIMIT)" in text.stdout
    status = run(config, "status", "--json")
    assert status.returncode == 1  # a plane it wants failed
    row = json.loads(status.stdout)["servers"][0]
    assert (row["status"], row["tools_status"], row["tools"]) == ("ready", "ready", 1)
    assert (row["content_status"], row["content_error"]) == ("failed", "MCP_CATALOG_LIMIT")
