"""Each replica's MCP status snapshot: written when the manager's servers change, listed by
every replica's console (stale once its replica stopped writing), removed at a clean
stop. A real manager whose one server fails to start (its command does not exist) and
one that is disabled."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import anyio
import pytest

from deepseek_eyes.console.control import ConsoleParts, mcp_view
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.status_share import StatusShare
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.replica_status import FORGOTTEN_S, FRESH_S, ReplicaStatus, ServerStatus

OTHER = "replica-b|-|4242|-"


def _servers(parts: ConsoleParts) -> dict[tuple[str, str], dict[str, object]]:
    return {(str(r["replica"]), str(r["server"])): r for r in mcp_view(parts)["replicas"]}


@pytest.mark.anyio
async def test_a_replicas_status_is_written_listed_and_removed_when_it_stops(
        home: DataHome, tmp_path: Path) -> None:
    manager = McpManager(McpSettings(servers=(
        McpServerSettings.model_validate({"id": "gone", "transport": "stdio",
                                           "command": str(tmp_path / "no-such-server")}),
        McpServerSettings.model_validate({"id": "off", "transport": "stdio",
                                           "command": "x", "enabled": False}))))
    await manager.start(wait=20)
    ReplicaStatus(home.db, me=OTHER).write([ServerStatus("gone", "ready", 12.5, None)])
    task = asyncio.create_task(StatusShare(manager, ReplicaStatus(home.db)).run())
    try:
        parts = ConsoleParts(home, None)
        with anyio.fail_after(10):
            while len(rows := _servers(parts)) < 3:
                await anyio.sleep(0.02)
        mine = {k[1]: v for k, v in rows.items() if v["this"]}
        assert mine["off"]["status"] == "disabled"
        assert mine["gone"]["status"] == "failed"
        assert str(mine["gone"]["last_error"]).startswith("MCP_")  # a code, no message
        theirs = rows[("replica-b:4242", "gone")]
        assert (theirs["status"], theirs["latency_ms"], theirs["stale"]) == ("ready", 12.5, False)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await manager.stop()
    # Stopped cleanly: its rows are gone; the other replica's stay.
    assert {k[0] for k in _servers(ConsoleParts(home, None))} == {"replica-b:4242"}


def test_a_replica_that_stopped_writing_is_stale_then_forgotten(home: DataHome) -> None:
    board = ReplicaStatus(home.db, me=OTHER)
    board.write([ServerStatus("s", "ready", 3.0, None)])
    assert ReplicaStatus(home.db).listing()[0]["stale"] is False
    home.db.execute("UPDATE replica_mcp_status SET ts = ?", (time.time() - FRESH_S - 1,))
    assert ReplicaStatus(home.db).listing()[0]["stale"] is True
    home.db.execute("UPDATE replica_mcp_status SET ts = ?", (time.time() - FORGOTTEN_S - 1,))
    assert ReplicaStatus(home.db).listing() == []
    # A snapshot of all its servers replaces the last one: a removed server goes.
    board.write([ServerStatus("s", "ready", 3.0, None), ServerStatus("t", "failed", None,
                                                                     "MCP_CONNECT_FAILED")])
    board.write([ServerStatus("t", "ready", 1.0, None)], only=True)
    assert [(r["server"], r["status"]) for r in ReplicaStatus(home.db).listing()] == [
        ("t", "ready")]
