"""The manager's lifecycle: list_changed refreshes, failed and empty refreshes, reconnects,
restart and reconfigure. In-process SDK servers through the connector hook (their catalogs
change on the test's command), and one real stdio process for the reconnect.

server-everything advertises ``listChanged`` but has no tool that changes its catalog on
demand (its only change is the conditional tools it registers right after initialization),
so the list_changed tests drive SDK servers whose tool list the test edits."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager, ServerState
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll a real condition under a bounded deadline (the manager exposes no events)."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"},
                      annotations=types.ToolAnnotations(read_only_hint=True))


class RecordingBus(InMemorySubscriptionBus):
    """Tells the test when the client's listen stream has subscribed (events are not replayed)."""

    def __init__(self) -> None:
        super().__init__()
        self.subscribed = anyio.Event()

    def subscribe(self, listener: Any) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self.subscribed.set()
        return unsubscribe


class Peer:
    """An SDK server whose catalog the test edits, then announces on either revision."""

    def __init__(self, *names: str) -> None:
        self.tools = [tool(n) for n in names]
        self.fail_listing = False
        self.gate: anyio.Event | None = None
        self.listing = anyio.Event()
        self.sessions: list[Any] = []
        self.bus = RecordingBus()
        self.calls = 0

        async def list_tools(ctx: Any, _params: Any) -> types.ListToolsResult:
            self.sessions.append(ctx.session)
            self.listing.set()
            if self.gate is not None:
                await self.gate.wait()
            if self.fail_listing:
                return types.ListToolsResult(tools=[tool("t1"), tool("t1")])  # duplicate
            return types.ListToolsResult(tools=list(self.tools))

        async def call_tool(_ctx: Any, params: types.CallToolRequestParams
                            ) -> types.CallToolResult:
            self.calls += 1
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"ran {params.name}")])

        self.server: Server[Any] = Server(
            "peer", on_list_tools=list_tools, on_call_tool=call_tool,
            on_subscriptions_listen=ListenHandler(self.bus))

    async def announce(self, protocol: str, *, session: int = -1) -> None:
        """``session`` picks the connection (by listing order) that hears the notification."""
        if protocol == "legacy":
            await self.sessions[session].send_tool_list_changed()
        else:
            await self.bus.publish(ToolsListChanged())


def config(*servers: dict[str, Any], **fields: Any) -> McpSettings:
    return McpSettings.model_validate({"servers": [
        {"transport": "stdio", "command": "unused", "call_timeout": 5, "connect_timeout": 10,
         "allow": {"tools": ["t*"]}, **s} for s in servers], **fields})


def host_of(cfg: McpSettings, peers: dict[str, Peer], tmp_path: Path) -> McpHost:
    manager = McpManager(cfg, connector=lambda s: peers[s.id].server)
    return McpHost(manager, blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))


def exposed_names(host: McpHost) -> set[str]:
    return {t.public_name for t in host.exposed()}


def generation_of(host: McpHost) -> int:
    gens = {t.generation for t in host.exposed()}
    assert len(gens) == 1, gens
    return gens.pop()


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_list_changed_publishes_a_new_generation_and_stales_the_old(
    tmp_path: Path, protocol: str
) -> None:
    peer = Peer("t1")
    host = host_of(config({"id": "p", "protocol": protocol}), {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        assert state.status == "ready", state.view()
        assert state.protocol == ("2026-07-28" if protocol != "legacy" else state.protocol)
        assert exposed_names(host) == {"mcp__p__t1"}
        old = generation_of(host)
        if protocol != "legacy":
            with anyio.fail_after(10):
                await peer.bus.subscribed.wait()
        peer.tools.append(tool("t2"))
        await peer.announce(protocol)
        await until(lambda: state.generation != old)
        assert exposed_names(host) == {"mcp__p__t1", "mcp__p__t2"}
        new = generation_of(host)
        assert new == old + 1
        with pytest.raises(McpError) as stale:
            await host.call_tool("mcp__p__t1", {}, generation=old)
        assert stale.value.code == "MCP_GENERATION_STALE"
        assert peer.calls == 0  # refused before contacting the server
        done = await host.call_tool("mcp__p__t2", {}, generation=new)
        assert done.preview == "ran t2"
    finally:
        await host.manager.stop()
    assert host.exposed() == []


async def test_a_failed_refresh_keeps_the_previous_generation(tmp_path: Path) -> None:
    peer = Peer("t1")
    host = host_of(config({"id": "p", "protocol": "legacy"}), {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        old = generation_of(host)
        peer.fail_listing = True  # the next listing is a duplicate: the generation is rejected
        await peer.announce("legacy")
        await until(lambda: state.last_error == "MCP_CATALOG_INVALID")
        assert (state.generation, state.tools_status) == (old, "ready")
        assert exposed_names(host) == {"mcp__p__t1"}
        done = await host.call_tool("mcp__p__t1", {}, generation=old)
        assert done.preview == "ran t1"
    finally:
        await host.manager.stop()


async def test_an_emptied_catalog_is_withdrawn_until_a_probe_confirms_it(tmp_path: Path) -> None:
    peer = Peer("t1")
    host = host_of(config({"id": "p", "protocol": "legacy"}), {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        old = generation_of(host)
        peer.tools.clear()
        await peer.announce("legacy")
        await until(lambda: state.tools_status == "withdrawn")
        assert state.catalog is None
        assert host.exposed() == []
        with pytest.raises(McpError) as gone:
            await host.call_tool("mcp__p__t1", {}, generation=old)
        assert gone.value.code == "MCP_TOOL_NOT_EXPOSED"
        assert peer.calls == 0
        live_client = state.client
        probe = await host.manager.probe("p")
        assert probe["tools"] == []
        assert state.tools_status == "ready"
        assert state.catalog is not None
        assert state.catalog.empty
        assert state.generation > old
        assert state.client is live_client  # the probe used its own connection
        # The server comes back: a probe that finds entries asks the live connection to list.
        peer.tools.append(tool("t3"))
        confirmed = state.generation
        await peer.announce("legacy", session=0)  # the live connection, not the probe's
        await until(lambda: state.generation != confirmed)
        assert exposed_names(host) == {"mcp__p__t3"}
    finally:
        await host.manager.stop()


async def test_withdrawn_catalog_refreshes_when_the_probe_finds_entries(tmp_path: Path) -> None:
    peer = Peer("t1")
    host = host_of(config({"id": "p", "protocol": "legacy"}), {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        peer.tools.clear()
        await peer.announce("legacy")
        await until(lambda: state.tools_status == "withdrawn")
        withdrawn = state.generation
        peer.tools.append(tool("t2"))  # back without announcing: only the probe can tell
        probe = await host.manager.probe("p")
        assert probe["tools"] == ["t2"]
        await until(lambda: state.tools_status == "ready")
        assert state.generation > withdrawn
        assert exposed_names(host) == {"mcp__p__t2"}
    finally:
        await host.manager.stop()


async def test_reconnect_after_the_process_dies(tmp_path: Path) -> None:
    script = tmp_path / "pid_server.py"
    script.write_text(
        "import os\nfrom mcp.server.mcpserver import MCPServer\n"
        "app = MCPServer('pid')\n"
        "@app.tool(description=f'served by {os.getpid()}')\n"
        "def tpid() -> str:\n    return str(os.getpid())\n"
        "app.run('stdio')\n")
    cfg = McpSettings.model_validate({"servers": [{
        "id": "proc", "transport": "stdio", "command": sys.executable, "args": [str(script)],
        "allow": {"tools": ["t*"]}, "call_timeout": 20}]})
    # An idle server's death is noticed by its stdout ending (see test_mcp_liveness.py).
    host = McpHost(McpManager(cfg, heartbeat_s=0.3), blobs=BlobStore(tmp_path / "b"),
                   artifacts=tmp_path / "a", audit=McpAudit(None))
    await host.manager.start(wait=30)
    try:
        state = host.manager.servers["proc"]
        assert state.status == "ready", state.view()
        old = generation_of(host)
        pid = int((await host.call_tool("mcp__proc__tpid", {}, generation=old)).preview)
        os.kill(pid, signal.SIGKILL)
        await until(lambda: state.status == "failed", timeout=5)
        assert state.last_error == "MCP_CONNECTION_LOST"
        assert host.exposed() == []  # unhealthy: nothing offered while it is down
        await until(lambda: state.status == "ready", timeout=30)  # backoff, then reconnect
        new = generation_of(host)
        assert new > old  # the replacement's catalog (its description names it) is new
        with pytest.raises(McpError) as stale:
            await host.call_tool("mcp__proc__tpid", {}, generation=old)
        assert stale.value.code == "MCP_GENERATION_STALE"
        again = await host.call_tool("mcp__proc__tpid", {}, generation=new)
        assert int(again.preview) != pid
    finally:
        await host.manager.stop()


async def test_restart_replaces_the_connection_with_a_new_generation(tmp_path: Path) -> None:
    peer = Peer("t1")
    host = host_of(config({"id": "p", "protocol": "legacy"}), {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        old_state = host.manager.servers["p"]
        old = generation_of(host)
        await host.manager.restart("p", wait=10)
        state = host.manager.servers["p"]
        assert state is not old_state
        assert state.status == "ready"
        assert old_state.status == "stopped"
        assert old_state.catalog is None
        assert generation_of(host) == old + 1
        with pytest.raises(McpError) as stale:
            await host.call_tool("mcp__p__t1", {}, generation=old)
        assert stale.value.code == "MCP_GENERATION_STALE"
        assert peer.calls == 0
        with pytest.raises(McpError) as unknown:
            await host.manager.restart("nope")
        assert unknown.value.code == "MCP_SERVER_UNKNOWN"
    finally:
        await host.manager.stop()


async def test_reconfigure_suspends_then_publishes_only_the_valid_new_set(
    tmp_path: Path
) -> None:
    first, second, broken = Peer("t1", "t2"), Peer("t5"), Peer("t9")
    peers = {"p": first, "q": second, "r": broken}
    host = host_of(config({"id": "p", "protocol": "legacy"}), peers, tmp_path)
    await host.manager.start(wait=10)
    assert exposed_names(host) == {"mcp__p__t1", "mcp__p__t2"}
    old_state: ServerState = host.manager.servers["p"]
    second.gate = anyio.Event()  # hold the new set's listing so the suspension is visible
    broken.fail_listing = True
    new_cfg = config({"id": "p", "protocol": "legacy", "allow": {"tools": ["t2"]}},
                     {"id": "q", "protocol": "legacy"}, {"id": "r", "protocol": "legacy"})
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.manager.reconfigure, new_cfg)
            with anyio.fail_after(10):
                await second.listing.wait()
            assert host.manager.suspended
            assert old_state.catalog is None
            assert old_state.status == "stopped"
            assert host.exposed() == []
            with pytest.raises(McpError) as suspended:
                await host.call_tool("mcp__p__t2", {})
            assert suspended.value.code == "MCP_EXPOSURE_SUSPENDED"
            second.gate.set()
        assert not host.manager.suspended
        assert exposed_names(host) == {"mcp__p__t2", "mcp__q__t5"}
        assert host.manager.servers["r"].last_error == "MCP_CATALOG_INVALID"
        assert first.calls == second.calls == 0
    finally:
        await host.manager.stop()


async def test_reconfigure_of_policy_alone_keeps_the_connection_and_its_generation(
    tmp_path: Path
) -> None:
    peer = Peer("t1", "t2")
    host = host_of(config({"id": "p", "protocol": "legacy", "allow": {"tools": ["t1"]}}),
                   {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        generation, listings = generation_of(host), len(peer.sessions)
        offered = host.exposed()  # what a turn already running was given
        assert exposed_names(host) == {"mcp__p__t1"}
        await host.call_tool("mcp__p__t1", {})  # resolved under this policy (and remembered)
        await host.manager.reconfigure(config(
            {"id": "p", "protocol": "legacy", "allow": {"tools": ["t1", "t2"]},
             "deny": {"tools": ["t1"]}}))
        assert host.manager.servers["p"] is state  # the same connection
        assert (generation_of(host), len(peer.sessions)) == (generation, listings)
        assert exposed_names(host) == {"mcp__p__t2"}
        with pytest.raises(McpError) as denied:  # judged by the policy in force now
            await host.call_tool("mcp__p__t1", {})
        assert denied.value.code == "MCP_TOOL_NOT_EXPOSED"
        await host.call_tool("mcp__p__t2", {})
        assert peer.calls == 2
        assert [t.public_name for t in offered] == ["mcp__p__t1"]  # the old offer stands
        await host.manager.reconfigure(config(
            {"id": "p", "protocol": "legacy", "allow": {"tools": ["t1"]},
             "connect_timeout": 7}))  # not policy alone: a new connection
        assert host.manager.servers["p"] is not state
        assert exposed_names(host) == {"mcp__p__t1"}
    finally:
        await host.manager.stop()
