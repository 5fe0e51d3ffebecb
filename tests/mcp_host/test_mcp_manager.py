from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost, RunQuota
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore
from helpers import recorded_spans
from mcp_peers import everything_http, everything_stdio, settings_of, time_stdio
from services import free_port

pytestmark = pytest.mark.anyio


def make_host(settings: McpSettings, tmp_path: Path) -> McpHost:
    return McpHost(McpManager(settings), blobs=BlobStore(tmp_path / "blobs"),
                   artifacts=tmp_path / "artifacts", audit=McpAudit(None))


async def test_everything_stdio_allowlist_and_image_to_blobs(tmp_path: Path) -> None:
    server = everything_stdio(allow={"tools": ["echo", "get-tiny-image", "get-env"]},
                              deny={"tools": ["get-env"]})
    host = make_host(settings_of(server), tmp_path)
    await host.manager.start()
    try:
        state = host.manager.servers["everything"]
        assert state.status == "ready", state.view()
        assert len(state.catalog.tools) == 13 if state.catalog else False
        names = {t.public_name for t in host.exposed()}
        assert names == {"mcp__everything__echo", "mcp__everything__get-tiny-image"}
        assert "everything" in host.instructions()
        gen = host.exposed()[0].generation
        echo = await host.call_tool("mcp__everything__echo", {"message": "zebra-quartz"},
                                    generation=gen)
        assert "zebra-quartz" in echo.preview
        assert not echo.is_error
        assert echo.artifact is None
        assert echo.result_sha256.startswith("sha256:")
        image = await host.call_tool("mcp__everything__get-tiny-image", {})
        assert len(image.images) == 1
        assert host.blobs.contains(image.images[0].blob.sha256)
        assert image.artifact is not None
        assert Path(image.artifact).is_file()
        with pytest.raises(McpError) as denied:
            await host.call_tool("mcp__everything__get-env", {})
        assert denied.value.code == "MCP_TOOL_NOT_EXPOSED"
        with pytest.raises(McpError) as stale:
            await host.call_tool("mcp__everything__echo", {"message": "x"}, generation=gen + 7)
        assert stale.value.code == "MCP_GENERATION_STALE"
        quota = RunQuota(1)
        await host.call_tool("mcp__everything__echo", {"message": "1"}, quota=quota)
        with pytest.raises(McpError) as limit:
            await host.call_tool("mcp__everything__echo", {"message": "2"}, quota=quota)
        assert limit.value.code == "MCP_CALL_QUOTA"
        statuses = [r["status"] for r in host.audit.recent()]
        assert statuses.count("ok") == 3
        assert statuses.count("failed") == 2
        assert all("zebra-quartz" not in str(r) for r in host.audit.recent())
    finally:
        await host.manager.stop()
    assert host.exposed() == []


async def test_read_only_follows_annotations(tmp_path: Path) -> None:
    server = everything_stdio(allow={"tools": ["get-", "toggle-*", "echo"]},
                              risk_policy="read-only")
    host = make_host(settings_of(server), tmp_path)
    await host.manager.start()
    try:
        exposed = {t.name: t.risk for t in host.exposed()}
        assert "echo" in exposed
        assert all(r == "read" for r in exposed.values())
        assert not any(n.startswith("toggle-") for n in exposed)
        with pytest.raises(McpError) as blocked:
            await host.call_tool("mcp__everything__toggle-simulated-logging", {})
        assert blocked.value.code == "MCP_TOOL_RISK_BLOCKED"
    finally:
        await host.manager.stop()


async def test_new_server_exposes_nothing_and_budgets_apply(tmp_path: Path) -> None:
    host = make_host(settings_of(everything_stdio()), tmp_path)
    await host.manager.start()
    try:
        assert host.manager.servers["everything"].status == "ready"
        assert host.exposed() == []
        host.manager.settings = settings_of(
            everything_stdio(allow={"tools": ["get-*", "echo"]}), max_tools=2)
        host.manager.servers["everything"].settings = host.manager.settings.servers[0]
        assert len(host.exposed()) == 2
    finally:
        await host.manager.stop()


async def test_content_plane_on_everything(tmp_path: Path) -> None:
    server = everything_stdio(tools_enabled=False, resources_enabled=True, prompts_enabled=True,
                              allow={"resources": ["demo://resource/dynamic/text/*"],
                                     "prompts": ["simple-prompt", "args-prompt"]})
    host = make_host(settings_of(server), tmp_path)
    await host.manager.start()
    try:
        listed = host.resources("everything")
        assert any(r["template"] for r in listed)
        names = {t.public_name for t in host.exposed()}
        assert names == {"mcp__deepseekeyes__resources", "mcp__deepseekeyes__resource",
                         "mcp__deepseekeyes__prompt"}
        # The list names only what is allowed (the template), fenced, hashed like a result.
        page = await host.call_generic("mcp__deepseekeyes__resources", {"server": "everything"})
        assert '"demo://resource/dynamic/text/{resourceId}"' in page.preview
        assert "demo://resource/static" not in page.preview
        assert page.preview.endswith("end of the list")
        assert page.result_sha256.startswith("sha256:")
        assert not page.truncated
        text = await host.read_resource("everything", "demo://resource/dynamic/text/1")
        assert text.preview
        with pytest.raises(McpError) as refused:
            await host.read_resource("everything", "file:///etc/passwd")
        assert refused.value.code == "MCP_RESOURCE_NOT_ALLOWED"
        prompt = await host.get_prompt("everything", "simple-prompt", {})
        assert prompt.preview
        with pytest.raises(McpError) as bad:
            await host.get_prompt("everything", "args-prompt", {})
        assert bad.value.code == "MCP_ARGUMENTS_INVALID"
    finally:
        await host.manager.stop()


RESOURCE_TOOLS = {"mcp__deepseekeyes__resources", "mcp__deepseekeyes__resource"}


def _reconfigure(host: McpHost, **fields: object) -> None:
    """Give the live server new settings (the catalog stays; exposure is recomputed)."""
    host.manager.settings = settings_of(everything_stdio(**fields))
    host.manager.servers["everything"].settings = host.manager.settings.servers[0]


async def test_shared_tools_only_for_a_plane_that_is_on_and_allows_something(
        tmp_path: Path) -> None:
    resources = {"resources": ["demo://resource/dynamic/text/*"]}
    both = {**resources, "prompts": ["simple-prompt"]}
    # Both planes on at connect, so the catalog holds resources and prompts.
    host = make_host(settings_of(everything_stdio(
        tools_enabled=False, resources_enabled=True, prompts_enabled=True, allow=both)),
        tmp_path)
    await host.manager.start()
    try:
        assert {t.public_name for t in host.exposed()} == {
            "mcp__deepseekeyes__resources", "mcp__deepseekeyes__resource",
            "mcp__deepseekeyes__prompt"}
        # Prompts off: no prompt tool (it would cost budget and every call would fail).
        _reconfigure(host, tools_enabled=False, resources_enabled=True, allow=both)
        assert {t.public_name for t in host.exposed()} == RESOURCE_TOOLS
        with pytest.raises(McpError) as off:
            await host.call_generic("mcp__deepseekeyes__prompt",
                                    {"server": "everything", "name": "simple-prompt"})
        assert off.value.code == "MCP_TOOL_NOT_EXPOSED"
        # Prompts on with nothing allowed: still none.
        _reconfigure(host, tools_enabled=False, resources_enabled=True, prompts_enabled=True,
                     allow=resources)
        assert {t.public_name for t in host.exposed()} == RESOURCE_TOOLS
        # Resources off, a prompt allowed: the prompt tool alone.
        _reconfigure(host, tools_enabled=False, prompts_enabled=True, allow=both)
        assert {t.public_name for t in host.exposed()} == {"mcp__deepseekeyes__prompt"}
        prompt = await host.call_generic("mcp__deepseekeyes__prompt",
                                         {"server": "everything", "name": "simple-prompt"})
        assert prompt.preview.startswith("[user] ")
        for tool, args in (("mcp__deepseekeyes__resource",
                            {"uri": "demo://resource/dynamic/text/1"}),
                           ("mcp__deepseekeyes__resources", {})):
            with pytest.raises(McpError) as gone:
                await host.call_generic(tool, {"server": "everything", **args})
            assert gone.value.code == "MCP_TOOL_NOT_EXPOSED"
        # Both planes on, nothing allowed: nothing is offered.
        _reconfigure(host, tools_enabled=False, resources_enabled=True, prompts_enabled=True)
        assert host.exposed() == []
    finally:
        await host.manager.stop()


async def test_time_server_speaks_the_stateless_revision(tmp_path: Path) -> None:
    host = make_host(settings_of(time_stdio(allow={"tools": ["get_current_time"]})), tmp_path)
    await host.manager.start()
    try:
        state = host.manager.servers["time"]
        assert state.protocol == "2026-07-28", state.view()
        result = await host.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
        assert "UTC" in result.preview
        probe = await host.manager.probe("time")
        assert probe["tools"] == ["get_current_time", "convert_time"]
        assert host.manager.servers["time"].client is not None  # the live one is untouched
    finally:
        await host.manager.stop()


async def test_everything_streamable_http(tmp_path: Path) -> None:
    with everything_http(free_port()) as url:
        server = McpServerSettings.model_validate(
            {"id": "web", "transport": "streamable-http", "url": url,
             "allow": {"tools": ["echo"]}})
        host = make_host(settings_of(server), tmp_path)
        await host.manager.start()
        try:
            state = host.manager.servers["web"]
            assert state.status == "ready"
            with recorded_spans() as spans:
                result = await host.call_tool("mcp__web__echo", {"message": "over http"})
            assert "over http" in result.preview
            # The call's span names the Streamable HTTP session the server gave us.
            (call,) = [s for s in spans.get_finished_spans() if s.name == "tools/call echo"]
            attrs = dict(call.attributes or {})
            assert state.wire.session_id
            assert attrs["mcp.session.id"] == state.wire.session_id
            assert attrs["mcp.protocol.version"] == state.protocol
            assert str(attrs["jsonrpc.request.id"]).isdigit()
        finally:
            await host.manager.stop()


async def test_disabled_switches_connect_nothing(tmp_path: Path) -> None:
    host = make_host(settings_of(everything_stdio(), enabled=False), tmp_path)
    await host.manager.start()
    assert host.manager.servers["everything"].status == "disabled"
    assert host.manager.servers["everything"].task is None
    host2 = make_host(settings_of(everything_stdio(tools_enabled=False)), tmp_path)
    await host2.manager.start()
    assert host2.manager.servers["everything"].task is None


async def test_audit_hashes_concrete_uris_and_prompts_keep_roles(tmp_path: Path) -> None:
    static = "demo://resource/static/document/features.md"
    server = everything_stdio(tools_enabled=False, resources_enabled=True, prompts_enabled=True,
                              allow={"resources": ["demo://resource/dynamic/text/*", static],
                                     "prompts": ["resource-prompt", "simple-prompt"]})
    host = make_host(settings_of(server), tmp_path)
    await host.manager.start()
    try:
        await host.read_resource("everything", "demo://resource/dynamic/text/42")
        await host.read_resource("everything", static)
        embedded = await host.get_prompt("everything", "resource-prompt",
                                         {"resourceType": "Text", "resourceId": "7"})
        simple = await host.get_prompt("everything", "simple-prompt", {})
    finally:
        await host.manager.stop()
    rows = host.audit.recent()
    template, concrete = rows[0]["tool"], rows[1]["tool"]
    assert template == "demo://resource/dynamic/text/{resourceId}"  # a template is kept
    assert concrete.startswith("uri:sha256:")  # a concrete URI is not
    assert all(static not in str(r) and "/text/42" not in str(r) for r in rows)
    assert rows[0]["arguments_sha256"] != rows[1]["arguments_sha256"]
    assert simple.preview.startswith("[user] ")
    # The embedded resource's text reaches the preview, after its role and marker.
    assert "[user] [resource demo://resource/dynamic/text/7]" in embedded.preview
    assert "\nResource 7: This is a plaintext resource" in embedded.preview


async def test_request_ids_are_noted_only_for_a_traced_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Noting the JSON-RPC id is for the call's span alone: untraced, the call does not pay
    # for it (a context variable set and reset around every call); traced, the span has it.
    import deepseek_eyes.mcp_host.host as host_module

    noted: list[int] = []
    real = host_module.noting_requests

    def counting():  # type: ignore[no-untyped-def]
        noted.append(1)
        return real()

    monkeypatch.setattr(host_module, "noting_requests", counting)
    host = make_host(settings_of(everything_stdio(allow={"tools": ["echo"]})), tmp_path)
    await host.manager.start()
    try:
        await host.call_tool("mcp__everything__echo", {"message": "untraced"})
        assert noted == []
        with recorded_spans() as spans:
            await host.call_tool("mcp__everything__echo", {"message": "traced"})
        assert noted == [1]
        (call,) = [s for s in spans.get_finished_spans() if s.name == "tools/call echo"]
        assert str(dict(call.attributes or {})["jsonrpc.request.id"]).isdigit()
    finally:
        await host.manager.stop()
