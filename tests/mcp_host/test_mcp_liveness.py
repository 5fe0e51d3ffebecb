"""Liveness against real servers: the stateless revision has no ``ping``, a busy server is
alive, a dead one is noticed, a slow answer is a hiccup, and backoff starts over after a
healthy connection.

The peers are real: ``mcp-server-time`` (it speaks ``2026-07-28``, and the handshake when
asked), ``slow_server.py`` (an SDK server whose tool sleeps) over stdio and Streamable HTTP,
and in-process SDK servers whose ``ping`` handler the test controls. Status changes are read
from ``ServerState.transitions``, which records every one, so a flap cannot slip between
two looks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.server import Server

from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.liveness import MISSES_ALLOWED
from deepseek_eyes.mcp_host.manager import HEARTBEAT_S, McpManager, ServerState
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore
from mcp_peers import settings_of, time_stdio
from services import free_port

pytestmark = pytest.mark.anyio

SLOW_SERVER = Path(__file__).with_name("slow_server.py")
CLEAN = ["stopped", "connecting", "ready"]


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll a real condition under a bounded deadline."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


def statuses(state: ServerState) -> list[str]:
    return [status for _, status in state.transitions]


def make_host(settings: McpSettings, tmp_path: Path, **manager: Any) -> McpHost:
    return McpHost(McpManager(settings, **manager), blobs=BlobStore(tmp_path / "b"),
                   artifacts=tmp_path / "a", audit=McpAudit(None))


def slow_stdio(**overrides: object) -> McpServerSettings:
    fields: dict[str, object] = {
        "id": "slow", "transport": "stdio", "command": sys.executable,
        "args": [str(SLOW_SERVER)], "allow": {"tools": ["slow", "pid"]},
    }
    fields.update(overrides)
    return McpServerSettings.model_validate(fields)


def children_named(name: str) -> list[int]:
    """This process's live children whose command line mentions ``name`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == os.getpid() and name.encode() in cmdline:
            found.append(int(entry.name))
    return found


@contextmanager
def slow_http(port: int) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(  # noqa: S603 -- a fixed test peer
        [sys.executable, str(SLOW_SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        for _ in range(100):  # bounded: wait for uvicorn's "running on" line, not a sleep
            line = proc.stderr.readline()
            if not line or "running on" in line.lower():
                break
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


# -- the stateless revision has no ping --------------------------------------------------------
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_time_server_stays_ready_through_many_heartbeats(
    tmp_path: Path, protocol: str
) -> None:
    server = time_stdio(protocol=protocol, allow={"tools": ["get_current_time"]})
    host = make_host(settings_of(server), tmp_path, heartbeat_s=0.3)
    await host.manager.start()
    try:
        state = host.manager.servers["time"]
        assert state.status == "ready", state.view()
        if protocol == "auto":
            assert state.protocol == "2026-07-28"  # no ping in this revision
        else:
            assert state.protocol != "2026-07-28"  # pinged, and it answers
        catalog, generation = state.catalog, state.generation
        # Idle time is what is under test: six heartbeat intervals pass with nothing asked.
        await anyio.sleep(1.8)
        assert statuses(state) == CLEAN, state.transitions
        assert state.catalog is catalog
        assert (state.generation, state.tools_status) == (generation, "ready")
        assert {t.public_name for t in host.exposed()} == {"mcp__time__get_current_time"}
        assert state.view()["missed_checks"] == 0
        result = await host.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
        assert "UTC" in result.preview
    finally:
        await host.manager.stop()


async def test_time_server_stays_ready_past_the_default_heartbeat(tmp_path: Path) -> None:
    """As reported: with the default heartbeat the real server went ready -> failed -> ready
    every ~15 s. Idle for longer than one default interval, it must simply stay ready."""
    server = time_stdio(allow={"tools": ["get_current_time"]})
    host = make_host(settings_of(server), tmp_path)  # HEARTBEAT_S, the default
    await host.manager.start()
    try:
        state = host.manager.servers["time"]
        assert state.status == "ready", state.view()
        await anyio.sleep(HEARTBEAT_S + 1.5)
        assert statuses(state) == CLEAN, state.transitions
        assert {t.public_name for t in host.exposed()} == {"mcp__time__get_current_time"}
        result = await host.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
        assert "UTC" in result.preview
    finally:
        await host.manager.stop()


# -- a busy server is alive ------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_call_longer_than_many_heartbeats_completes(tmp_path: Path, protocol: str) -> None:
    host = make_host(settings_of(slow_stdio(protocol=protocol, call_timeout=30)), tmp_path,
                     heartbeat_s=0.2)
    await host.manager.start()
    try:
        state = host.manager.servers["slow"]
        assert state.status == "ready", state.view()
        client = state.client
        with anyio.fail_after(20):
            result = await host.call_tool("mcp__slow__slow", {"seconds": 2.0})  # ten beats
        assert result.preview == "slept 2.0"
        assert not result.is_error
        assert statuses(state) == CLEAN, state.transitions
        assert state.client is client  # the same connection carried it
        assert state.activity.in_flight == 0
    finally:
        await host.manager.stop()


# -- a dead server is noticed ----------------------------------------------------------------
async def test_a_killed_stdio_server_is_noticed_without_waiting_for_a_beat(tmp_path: Path) -> None:
    server = time_stdio(allow={"tools": ["get_current_time"]})
    # A heartbeat far longer than the test: the stdout ending is what tells.
    host = make_host(settings_of(server), tmp_path, heartbeat_s=300)
    await host.manager.start()
    try:
        state = host.manager.servers["time"]
        assert state.status == "ready", state.view()
        (pid,) = children_named("mcp-server-time")
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        await until(lambda: state.status != "ready", timeout=5)
        assert time.monotonic() - started < 5
        assert state.status in ("failed", "connecting")
        assert state.last_error == "MCP_CONNECTION_LOST"
        assert host.exposed() == []  # gone: nothing is offered while it is down
        await until(lambda: state.status == "ready", timeout=30)  # reconnected
        assert statuses(state)[-4:] == ["ready", "failed", "connecting", "ready"]
        assert {t.public_name for t in host.exposed()} == {"mcp__time__get_current_time"}
        result = await host.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
        assert "UTC" in result.preview
    finally:
        await host.manager.stop()


async def test_stateless_http_stays_ready_then_a_dead_server_is_noticed(tmp_path: Path) -> None:
    with slow_http(free_port()) as (url, proc):
        server = McpServerSettings.model_validate({
            "id": "web", "transport": "streamable-http", "url": url, "connect_timeout": 2,
            "allow": {"tools": ["slow"]}})
        host = make_host(settings_of(server), tmp_path, heartbeat_s=0.2)
        await host.manager.start()
        try:
            state = host.manager.servers["web"]
            assert state.status == "ready", state.view()
            assert state.protocol == "2026-07-28"
            await anyio.sleep(1.0)  # five idle beats, each a server/discover
            assert statuses(state) == CLEAN, state.transitions
            assert state.view()["missed_checks"] == 0
            proc.kill()
            proc.wait(timeout=10)
            await until(lambda: state.status != "ready", timeout=10)
            assert state.last_error == "MCP_CONNECTION_LOST"
            assert host.exposed() == []
        finally:
            await host.manager.stop()


# -- a hiccup is not a death -----------------------------------------------------------------
def ping_peer(on_ping: Any) -> Server[Any]:
    """A handshake-revision SDK server with one read-only tool and the given ping handler."""
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(
            name="t1", input_schema={"type": "object"},
            annotations=types.ToolAnnotations(read_only_hint=True))])

    return Server("beat", on_list_tools=list_tools, on_ping=on_ping)


def peer_host(peer: Server[Any], tmp_path: Path) -> McpHost:
    cfg = McpSettings.model_validate({"servers": [{
        "id": "p", "transport": "stdio", "command": "unused", "protocol": "legacy",
        "connect_timeout": 0.3, "allow": {"tools": ["t1"]}}]})
    return McpHost(McpManager(cfg, connector=lambda _s: peer, heartbeat_s=0.1),
                   blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))


async def test_ping_method_not_found_is_an_answer(tmp_path: Path) -> None:
    host = peer_host(ping_peer(None), tmp_path)  # the SDK answers ping "method not found"
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        assert state.status == "ready", state.view()
        await anyio.sleep(1.0)  # ten heartbeat intervals
        assert statuses(state) == CLEAN, state.transitions
        assert state.activity.misses == 0
        assert {t.public_name for t in host.exposed()} == {"mcp__p__t1"}
    finally:
        await host.manager.stop()


async def test_unanswered_pings_below_the_limit_withdraw_nothing(tmp_path: Path) -> None:
    # What the manager showed as each ping arrived (the peer runs on the test's loop).
    seen: list[tuple[int, str, frozenset[str]]] = []

    async def on_ping(_ctx: Any, _params: Any) -> types.EmptyResult:
        state = host.manager.servers["p"]
        seen.append((state.activity.misses, state.status,
                     frozenset(t.public_name for t in host.exposed())))
        if len(seen) < MISSES_ALLOWED:
            await anyio.sleep_forever()  # outlives the check's timeout: a miss
        return types.EmptyResult()

    host = peer_host(ping_peer(on_ping), tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        catalog = state.catalog
        await until(lambda: len(seen) >= MISSES_ALLOWED and state.activity.misses == 0)
        tools = frozenset({"mcp__p__t1"})
        assert seen[:MISSES_ALLOWED] == [(n, "ready", tools) for n in range(MISSES_ALLOWED)]
        assert statuses(state) == CLEAN, state.transitions
        assert state.catalog is catalog
    finally:
        await host.manager.stop()


async def test_a_server_that_never_answers_is_gone_after_the_limit(tmp_path: Path) -> None:
    pings = 0

    async def on_ping(_ctx: Any, _params: Any) -> types.EmptyResult:
        nonlocal pings
        pings += 1
        await anyio.sleep_forever()

    host = peer_host(ping_peer(on_ping), tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        # Bounded: MISSES_ALLOWED * (interval + check timeout) = 1.2 s, with room for load.
        await until(lambda: state.status != "ready", timeout=10)
        assert pings >= MISSES_ALLOWED
        assert state.last_error == "MCP_CONNECTION_LOST"
        assert host.exposed() == []
    finally:
        await host.manager.stop()


# -- backoff ---------------------------------------------------------------------------------
async def test_the_retry_delay_starts_over_after_a_healthy_connection(tmp_path: Path) -> None:
    host = make_host(settings_of(slow_stdio()), tmp_path, heartbeat_s=60, stable_s=1.0,
                     backoff_s=(0.3, 1.2, 2.4))
    await host.manager.start(wait=30)
    state = host.manager.servers["slow"]
    delays: list[float] = []

    async def kill_and_note_delay() -> None:
        pid = int((await host.call_tool("mcp__slow__pid", {})).preview)
        os.kill(pid, signal.SIGKILL)
        await until(lambda: state.retry_delay is not None)
        assert state.retry_delay is not None
        delays.append(state.retry_delay)
        await until(lambda: state.status == "ready", timeout=30)

    try:
        assert state.status == "ready", state.view()
        await kill_and_note_delay()  # dies at once: the first delay
        await kill_and_note_delay()  # dies at once again: the delay grows
        ready = state.ready_since
        assert ready is not None
        await until(lambda: time.monotonic() - ready >= 1.0)  # healthy for stable_s
        await kill_and_note_delay()  # a loss after a healthy spell starts over
        assert delays == [0.3, 1.2, 0.3]
    finally:
        await host.manager.stop()
