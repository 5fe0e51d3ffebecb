"""Opening and closing connections: a close that does not finish blocks the server's probes
and replacements until that very handle finishes; stop closes every server at once; and
handshakes beyond the bound wait for a slot. The servers are SDK servers written here whose
lifespans (entered at the handshake, left at the teardown) wait on the test's events,
connected in-process through the connector hook."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.server import Server

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings

pytestmark = pytest.mark.anyio


class StuckOnClose:
    """An SDK server whose teardown waits, shielded from cancellation, while ``stuck``."""

    def __init__(self) -> None:
        self.stuck = False
        self.release = anyio.Event()
        self.sessions = 0
        self.teardowns = 0

        @asynccontextmanager
        async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            self.sessions += 1
            try:
                yield {}
            finally:
                if self.stuck:
                    with anyio.CancelScope(shield=True):
                        await self.release.wait()
                self.teardowns += 1

        async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[types.Tool(
                name="t1", input_schema={"type": "object"})])

        self.server: Server[Any] = Server("stuck", lifespan=lifespan, on_list_tools=list_tools)


def manager_of(peer: StuckOnClose) -> McpManager:
    cfg = McpSettings.model_validate({"servers": [{
        "id": "s", "transport": "stdio", "command": "unused", "protocol": "legacy",
        "connect_timeout": 10, "allow": {"tools": ["t*"]}}]})
    return McpManager(cfg, connector=lambda _s: peer.server, close_timeout=0.3)


async def test_a_failed_close_blocks_probe_and_replacement_until_it_finishes() -> None:
    peer = StuckOnClose()
    manager = manager_of(peer)
    await manager.start(wait=10)
    try:
        assert manager.servers["s"].status == "ready"
        peer.stuck = True
        with pytest.raises(McpError) as first:
            await manager.restart("s")
        assert first.value.code == "MCP_CLOSE_PENDING"
        assert manager.servers["s"].last_error == "MCP_CLOSE_PENDING"
        assert manager.closes.pending("s")
        opened = peer.sessions
        with pytest.raises(McpError) as probe:
            await manager.probe("s")  # a duplicate probe: refused, nothing opened beside it
        assert probe.value.code == "MCP_CLOSE_PENDING"
        with pytest.raises(McpError) as again:
            await manager.restart("s")  # a replacement: refused likewise
        assert again.value.code == "MCP_CLOSE_PENDING"
        await manager.reconfigure(manager.settings, wait=10)  # and a reconfigured one
        assert (manager.servers["s"].status, manager.servers["s"].last_error) == (
            "failed", "MCP_CLOSE_PENDING")
        assert peer.sessions == opened
        peer.stuck = False
        peer.release.set()  # the teardown can finish: the next retry of that handle succeeds
        report = await manager.probe("s")
        assert report["tools"] == ["t1"]
        assert not manager.closes.pending("s")
        await manager.restart("s", wait=10)
        assert manager.servers["s"].status == "ready"
    finally:
        peer.stuck = False
        peer.release.set()
        await manager.stop()
    assert peer.teardowns == peer.sessions  # every session, the stuck one included, ended


async def test_stop_closes_every_server_at_once() -> None:
    """Each teardown waits until all three have begun: closing one at a time, the first
    would never finish (its close would fail at the bound and stay pending)."""
    begun = 0
    all_begun = anyio.Event()

    def server(name: str) -> Server[Any]:
        @asynccontextmanager
        async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            nonlocal begun
            try:
                yield {}
            finally:
                begun += 1
                if begun == 3:
                    all_begun.set()
                with anyio.CancelScope(shield=True), anyio.fail_after(5):
                    await all_begun.wait()

        async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[])

        return Server(name, lifespan=lifespan, on_list_tools=list_tools)

    servers = {f"s{i}": server(f"s{i}") for i in range(3)}
    cfg = McpSettings.model_validate({"servers": [
        {"id": sid, "transport": "stdio", "command": "unused", "protocol": "legacy"}
        for sid in servers]})
    manager = McpManager(cfg, connector=lambda s: servers[s.id], close_timeout=3)
    await manager.start(wait=10)
    assert [s.status for s in manager.servers.values()] == ["ready"] * 3
    await manager.stop()
    assert all_begun.is_set()
    assert not any(manager.closes.pending(sid) for sid in servers)


async def test_handshakes_beyond_the_bound_wait_for_a_slot() -> None:
    """With one slot, a second server is not even spawned while the first's handshake
    waits; once it connects, the second goes."""
    entered: list[str] = []
    go = anyio.Event()

    def server(name: str) -> Server[Any]:
        @asynccontextmanager
        async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            entered.append(name)
            if len(entered) == 1:
                await go.wait()  # the first handshake holds its slot until the test says
            yield {}

        return Server(name, lifespan=lifespan)

    servers = {sid: server(sid) for sid in ("a", "b")}
    cfg = McpSettings.model_validate({"servers": [
        {"id": sid, "transport": "stdio", "command": "unused", "protocol": "legacy"}
        for sid in servers]})
    manager = McpManager(cfg, connector=lambda s: servers[s.id], connect_concurrency=1)
    await manager.start(wait=None)
    try:
        with anyio.fail_after(10):
            while not entered:
                await anyio.sleep(0.01)
        await anyio.wait_all_tasks_blocked()
        assert len(entered) == 1
        go.set()
        await manager.wait_settled(10)
        assert sorted(entered) == ["a", "b"]
        assert [s.status for s in manager.servers.values()] == ["ready", "ready"]
    finally:
        go.set()
        await manager.stop()
