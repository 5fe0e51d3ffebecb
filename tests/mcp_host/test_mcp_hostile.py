"""Hostile servers written with the SDK, connected in-process through the manager's
connector hook, and stdio children that crash, garble their stdout or leak secrets: each
ends in its code, at once, with nothing partial exposed and nothing secret kept."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.server import Server

from deepseek_eyes.audit import message_digest
from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio


def tool(name: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, input_schema=schema or {"type": "object"},
                      annotations=types.ToolAnnotations(read_only_hint=True))


async def host_for(server: Server[Any], tmp_path: Path, **fields: Any) -> McpHost:
    cfg = McpSettings.model_validate({"servers": [{
        "id": "bad", "transport": "stdio", "command": "unused", "call_timeout": 1,
        "connect_timeout": 10, "allow": {"tools": ["t*"]}, **fields}]})
    manager = McpManager(cfg, connector=lambda _s: server)
    host = McpHost(manager, blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))
    await manager.start(wait=10)
    return host


async def test_endless_cursors(tmp_path: Path) -> None:
    async def list_tools(_ctx: Any, params: Any) -> types.ListToolsResult:
        n = int(params.cursor if params and params.cursor else "0")
        return types.ListToolsResult(tools=[tool(f"t{n}")], next_cursor=str(n + 1))

    host = await host_for(Server("endless", on_list_tools=list_tools), tmp_path)
    state = host.manager.servers["bad"]
    assert (state.tools_status, state.last_error) == ("failed", "MCP_CATALOG_LIMIT")
    assert host.exposed() == []
    await host.manager.stop()


async def test_repeated_cursor(tmp_path: Path) -> None:
    async def list_tools(_ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("t1")] if not params else [tool("t2")],
                                     next_cursor="same")

    host = await host_for(Server("loop", on_list_tools=list_tools), tmp_path)
    assert host.manager.servers["bad"].last_error == "MCP_CATALOG_CURSOR_LOOP"
    assert host.exposed() == []
    await host.manager.stop()


async def test_ten_thousand_tools(tmp_path: Path) -> None:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool(f"t{i}") for i in range(10_000)])

    host = await host_for(Server("many", on_list_tools=list_tools), tmp_path)
    assert host.manager.servers["bad"].last_error == "MCP_CATALOG_LIMIT"
    assert host.exposed() == []
    await host.manager.stop()


async def test_schema_depth_bomb(tmp_path: Path) -> None:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(40):  # 81 levels: over our 64, under the SDK's own serializer limit
        node["properties"] = {"x": {"type": "object"}}
        node = node["properties"]["x"]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("tok"), tool("tbomb", schema)])

    host = await host_for(Server("bomb", on_list_tools=list_tools), tmp_path)
    assert host.manager.servers["bad"].last_error == "MCP_CATALOG_LIMIT"
    assert host.exposed() == []  # never the prefix ("tok")
    await host.manager.stop()


def duplicate_server() -> Server[Any]:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("t1"), tool("t1")])

    return Server("dup", on_list_tools=list_tools)


async def test_duplicate_tools_reject_the_generation(tmp_path: Path) -> None:
    host = await host_for(duplicate_server(), tmp_path)
    assert host.manager.servers["bad"].last_error == "MCP_CATALOG_INVALID"
    assert host.exposed() == []
    await host.manager.stop()


RESULTS: dict[str, types.CallToolResult] = {
    "tstring": types.CallToolResult(
        content=[types.TextContent(type="text", text="x" * (17 << 20))]),
    "tblocks": types.CallToolResult(
        content=[types.TextContent(type="text", text="b")] * 5000),
    "timages": types.CallToolResult(content=[
        types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")] * 9),
    "tbigimage": types.CallToolResult(content=[
        types.ImageContent(type="image", data="A" * (29 << 20), mime_type="image/png")]),
    "tdepth": types.CallToolResult(content=[], structured_content={"a": None}),
    "tvalues": types.CallToolResult(content=[], structured_content={"v": list(range(60_000))}),
    "tbadimage": types.CallToolResult(content=[
        types.ImageContent(type="image", data="bm90IGFuIGltYWdl", mime_type="image/png")]),
}
deep: dict[str, Any] = {}
_node = deep
for _ in range(100):
    _node["d"] = {}
    _node = _node["d"]
RESULTS["tdepth"] = types.CallToolResult(content=[], structured_content=deep)
CODES = {
    "tstring": "MCP_RESULT_STRING_LIMIT", "tblocks": "MCP_RESULT_BLOCKS_LIMIT",
    "timages": "MCP_RESULT_IMAGE_COUNT_LIMIT", "tbigimage": "MCP_RESULT_IMAGE_ENCODED_LIMIT",
    "tdepth": "MCP_RESULT_DEPTH_LIMIT", "tvalues": "MCP_RESULT_VALUES_LIMIT",
    "tbadimage": "MCP_RESULT_IMAGE_INVALID",
}


async def test_oversized_results_end_in_their_codes(tmp_path: Path) -> None:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool(n) for n in [*RESULTS, "thang"]])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "thang":
            await anyio.sleep_forever()
        return RESULTS[params.name]

    host = await host_for(Server("big", on_list_tools=list_tools, on_call_tool=call_tool),
                          tmp_path)
    try:
        for name, code in CODES.items():
            with pytest.raises(McpError) as failed:
                await host.call_tool(f"mcp__bad__{name}", {})
            assert failed.value.code == code, name
        with pytest.raises(McpError) as hung:
            await host.call_tool("mcp__bad__thang", {})
        assert hung.value.code == "MCP_TIMEOUT"
        assert not (tmp_path / "a").exists()
        assert not (tmp_path / "b").exists()
        assert [r["code"] for r in host.audit.recent()] == [*CODES.values(), "MCP_TIMEOUT"]
    finally:
        await host.manager.stop()


async def test_catalog_change_during_a_call(tmp_path: Path) -> None:
    tools = [tool("tslow")]
    entered = anyio.Event()
    release = anyio.Event()
    holder: dict[str, McpManager] = {}

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(tools))

    async def call_tool(_ctx: Any, _params: Any) -> types.CallToolResult:
        entered.set()
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(type="text", text="late")])

    server = Server("shift", on_list_tools=list_tools, on_call_tool=call_tool)
    host = await host_for(server, tmp_path, call_timeout=10)
    holder["m"] = host.manager
    outcome: list[str] = []

    async def call() -> None:
        try:
            await host.call_tool("mcp__bad__tslow", {})
            outcome.append("ok")
        except McpError as exc:
            outcome.append(exc.code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await entered.wait()
        tools.append(tool("tnew"))
        state = host.manager.servers["bad"]
        before = state.generation
        state.refresh.set()
        with anyio.fail_after(5):
            while state.generation == before:  # bounded by fail_after; waits on the refresh
                await anyio.wait_all_tasks_blocked()
        release.set()
    assert outcome == ["MCP_GENERATION_STALE"]
    await host.manager.stop()


async def test_process_that_dies_mid_call(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(
        "import os\nfrom mcp.server.mcpserver import MCPServer\n"
        "app = MCPServer('dies')\n"
        "@app.tool()\ndef tdie() -> str:\n    os._exit(3)\n"
        "app.run('stdio')\n")
    cfg = McpSettings.model_validate({"servers": [{
        "id": "bad", "transport": "stdio", "command": sys.executable, "args": [str(script)],
        "allow": {"tools": ["t*"]}, "call_timeout": 60}]})
    host = McpHost(McpManager(cfg, log_dir=tmp_path / "logs"), blobs=BlobStore(tmp_path / "b"),
                   artifacts=tmp_path / "a", audit=McpAudit(None))
    await host.manager.start(wait=30)
    try:
        assert host.manager.servers["bad"].status == "ready", host.manager.status()
        started = time.monotonic()
        with pytest.raises(McpError) as died:
            await host.call_tool("mcp__bad__tdie", {})
        assert died.value.code == "MCP_CONNECTION_LOST"
        assert time.monotonic() - started < 5  # at once, not at the 60 s call timeout
        assert host.audit.recent()[-1]["code"] == "MCP_CONNECTION_LOST"
    finally:
        await host.manager.stop()


RAW_SERVER = Path(__file__).with_name("raw_server.py")
RAW_TOKEN = "raw-token-0123456789"


def raw_host(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> McpHost:
    monkeypatch.setenv("DSE_RAW_TOKEN", RAW_TOKEN)
    cfg = McpSettings.model_validate({"servers": [{
        "id": "raw", "transport": "stdio", "command": sys.executable,
        "args": [str(RAW_SERVER), mode], "env": {"RAW_TOKEN": {"env": "DSE_RAW_TOKEN"}},
        "protocol": "legacy", "allow": {"tools": ["t*"]}, "call_timeout": 60,
        "connect_timeout": 60}]})
    return McpHost(McpManager(cfg, log_dir=tmp_path / "logs"), blobs=BlobStore(tmp_path / "b"),
                   artifacts=tmp_path / "a", audit=McpAudit(None))


async def test_unparsable_response_fails_at_once(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    host = raw_host(tmp_path, "call", monkeypatch)
    await host.manager.start(wait=30)
    try:
        state = host.manager.servers["raw"]
        assert state.status == "ready", state.view()
        started = time.monotonic()
        with pytest.raises(McpError) as garbled:
            await host.call_tool("mcp__raw__tgarble", {})
        assert garbled.value.code == "MCP_RESPONSE_INVALID"
        assert time.monotonic() - started < 5  # not the 60 s call timeout
        assert state.view()["invalid_messages"] == 1
        ok = await host.call_tool("mcp__raw__tok", {})  # the connection serves on
        assert ok.preview == "fine"
        assert state.status == "ready"
    finally:
        await host.manager.stop()


async def test_unparsable_handshake_fails_the_connect_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = raw_host(tmp_path, "handshake", monkeypatch)
    started = time.monotonic()
    await host.manager.start(wait=30)
    try:
        state = host.manager.servers["raw"]
        assert (state.status, state.last_error) == ("failed", "MCP_RESPONSE_INVALID")
        assert time.monotonic() - started < 5  # not the 60 s connect timeout
        assert "stdout" in (state.error_message or "")
    finally:
        await host.manager.stop()


async def test_stray_line_while_idle_is_only_counted(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    host = raw_host(tmp_path, "noisy", monkeypatch)
    await host.manager.start(wait=30)
    try:
        state = host.manager.servers["raw"]
        # The line follows the tool listing on the server's own schedule: the call must be
        # sent after it arrived, or it is no longer a line "while idle" (a loaded machine).
        with anyio.fail_after(10):
            while state.view()["invalid_messages"] < 1:
                await anyio.sleep(0.01)
        result = await host.call_tool("mcp__raw__tok", {})
        assert result.preview == "fine"
        assert state.view()["invalid_messages"] == 1
        assert state.status == "ready"
    finally:
        await host.manager.stop()


async def test_secrets_are_scrubbed_from_errors_audit_and_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = raw_host(tmp_path, "call", monkeypatch)
    await host.manager.start(wait=30)
    try:
        with pytest.raises(McpError) as leaked:
            await host.call_tool("mcp__raw__tleak", {})
        message = leaked.value.message
        assert leaked.value.code == "MCP_SERVER_ERROR"
        for secret in (RAW_TOKEN, "abcdefgh12345678", "hunter2pass"):
            assert secret not in message
        assert "https://robot:[REDACTED]@api.example.com/v1" in message
        row = host.audit.recent()[-1]
        assert row["message_sha256"] == message_digest(message)  # the scrubbed text's hash
        log = host.manager.servers["raw"].stderr
        assert log is not None
        assert host.manager.servers["raw"].view()["stderr_log"] == str(log.path)
    finally:
        await host.manager.stop()
    assert log.drained(10)
    text = log.path.read_text()
    assert "stderr line 49" in text
    assert "starting with token [REDACTED]" in text
    assert RAW_TOKEN not in text
