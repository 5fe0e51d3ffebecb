"""Ask-first calls across replicas: two queues on one data directory, as two ``serve``
processes would be (one is this process, the other names a host of its own), list each
other's waiting calls and decide them; the first decision wins, a row of a replica that is
gone is expired, and one process alone behaves as before. A real second process waits
until this one approves its call, and a killed one's call is expired. The compare-and-set
is also run on PostgreSQL, the engine replicas share."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepseek_eyes.console.approvals import approvals, decide_ask
from deepseek_eyes.console.control import ConsoleParts
from deepseek_eyes.errors import McpError, McpPolicyError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.asking import AskQueue
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.approvals import STALE_S, PendingApprovals
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.owner import owner

SRC = Path(__file__).resolve().parents[2] / "src"
#: The other replica: another host, so it is judged by its heartbeat.
OTHER = "replica-b|-|4242|-"


class Audited:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def __call__(self, **fields: Any) -> None:
        self.rows.append(fields)

    def statuses(self) -> list[str]:
        return [str(r["status"]) for r in self.rows]


def queue(home: DataHome, me: str, audited: Audited | None = None) -> AskQueue:
    asks = AskQueue(audited)
    asks.share(PendingApprovals(home.db, me=me))
    return asks


async def waiting_on(asks: AskQueue) -> str:
    with anyio.fail_after(10):
        while not asks.waiting_count():
            await anyio.sleep(0.01)
    return str(asks.listing()[0]["ask_id"])


@pytest.mark.anyio
async def test_a_call_waiting_on_one_replica_is_listed_and_approved_on_another(
        home: DataHome, tmp_path: Path) -> None:
    audited = Audited()
    a = queue(home, owner(), audited)
    b = queue(home, OTHER)
    outcome: list[str] = []

    async def call() -> None:
        await a.ask("time", "get_current_time", {"tz": "UTC"}, session_id="s1", timeout=30)
        outcome.append("made")

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        ask_id = await waiting_on(a)
        # B's console: its own queue holds nothing, yet it lists A's call with its
        # arguments and the replica it waits in, and approves it.
        host = McpHost(McpManager(McpSettings(servers=())), blobs=home.blobs,
                       artifacts=tmp_path / "artifacts", audit=McpAudit(None))
        host.asks = b
        parts = ConsoleParts(home, None, mcp_host=host)
        listed = {x["ask_id"]: x for x in approvals(parts)["asks"]}
        assert listed[ask_id]["state"] == "waiting"
        assert listed[ask_id]["arguments"] == '{"tz":"UTC"}'
        assert listed[ask_id]["replica"].endswith(f":{owner().split('|')[2]}")
        decided = decide_ask(parts, ask_id, "approve", "web-b")
        assert (decided["state"], decided["by"]) == ("approved", "web-b")
        # A second decision, on A's own console before A looked: the first one stands.
        with pytest.raises(McpError) as second:
            a.decide(ask_id, "deny", via="console", by="web-a")
        assert second.value.code == "MCP_APPROVAL_DECIDED"
        with anyio.fail_after(5):  # A learns of it at its next look (a fraction of a second)
            while not outcome:
                await anyio.sleep(0.01)
    assert outcome == ["made"]
    # Audited once, by the replica the call waited in, with who decided it where.
    assert audited.statuses() == ["asked", "approved"]
    assert (audited.rows[1]["via"], audited.rows[1]["by"]) == ("console", "web-b")
    # The row is gone: nothing is listed as waiting any more, a third decision finds nothing.
    assert PendingApprovals(home.db).listing("mcp") == []
    with pytest.raises(McpError) as third:
        decide_ask(parts, ask_id, "approve", "web-b")
    assert third.value.code == "MCP_APPROVAL_NOT_FOUND"


@pytest.mark.anyio
async def test_a_denial_on_another_replica_refuses_the_call(home: DataHome) -> None:
    a = queue(home, owner())
    refused: list[str] = []

    async def call() -> None:
        with pytest.raises(McpPolicyError) as caught:
            await a.ask("fs", "delete", {}, session_id=None, timeout=30)
        refused.append(caught.value.code)

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        ask_id = await waiting_on(a)
        # A console without the gateway (``deepseek-eyes console``) decides it too.
        decide_ask(ConsoleParts(home, None), ask_id, "deny", "web-c")
    assert refused == ["MCP_CALL_DENIED"]


@pytest.mark.anyio
async def test_one_replica_alone_decides_at_once_and_lists_its_call_once(
        home: DataHome) -> None:
    audited = Audited()
    a = queue(home, owner(), audited)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: a.ask("time", "now", {}, session_id=None, timeout=30))
        ask_id = await waiting_on(a)
        host = McpHost(McpManager(McpSettings(servers=())), blobs=home.blobs,
                       artifacts=home.root / "artifacts", audit=McpAudit(None))
        host.asks = a
        asks = approvals(ConsoleParts(home, None, mcp_host=host))["asks"]
        assert [x["ask_id"] for x in asks] == [ask_id]  # its own, not again from the store
        started = time.monotonic()
        a.decide(ask_id, "approve", via="console", by="web-a")
    assert time.monotonic() - started < 0.1  # the in-process path, no poll waited for
    assert audited.statuses() == ["asked", "approved"]
    with pytest.raises(McpError) as again:  # as before replicas: decided, so not found
        a.decide(ask_id, "approve", via="console", by="web-a")
    assert again.value.code == "MCP_APPROVAL_NOT_FOUND"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_a_call_of_a_replica_that_is_gone_is_expired_and_never_approvable(
        home: DataHome) -> None:
    host, boot, _, _ = owner().split("|")
    dead = PendingApprovals(home.db, me=f"{host}|{boot}|{_dead_pid()}|1")
    dead.put("mcp", "a-dead", {"server": "fs", "tool": "rm"}, time.time())
    silent = PendingApprovals(home.db, me=OTHER)
    silent.put("mcp", "a-silent", {"server": "fs", "tool": "rm"}, time.time())
    home.db.execute("UPDATE pending_approvals SET heartbeat = ? WHERE id = 'a-silent'",
                    (time.time() - STALE_S - 1,))
    beating = PendingApprovals(home.db, me="replica-c|-|7|-")
    beating.put("mcp", "a-beating", {"server": "fs", "tool": "rm"}, time.time())
    parts = ConsoleParts(home, None)
    states = {x["ask_id"]: x["state"] for x in approvals(parts)["asks"]}
    assert states == {"a-dead": "expired", "a-silent": "expired", "a-beating": "waiting"}
    for ask_id in ("a-dead", "a-silent"):
        with pytest.raises(McpError) as caught:
            decide_ask(parts, ask_id, "approve", "web")
        assert caught.value.code == "MCP_APPROVAL_EXPIRED"
    assert PendingApprovals(home.db).get("mcp", "a-dead").decision is None  # type: ignore[union-attr]


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_first_of_two_decisions_wins_on_either_engine(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("postgres_url") if engine == "postgresql" else None
    first = Database(tmp_path / "eyes.db", url=url)
    second = Database(tmp_path / "eyes.db", url=url)
    try:
        PendingApprovals(first, me=OTHER).put("mcp", "a1", {"tool": "rm"}, time.time())
        won = PendingApprovals(first).decide("mcp", "a1", "deny", via="console", by="p1")
        lost = PendingApprovals(second).decide("mcp", "a1", "approve", via="console", by="p2")
        assert won[0] == "decided"
        assert lost[0] == "taken"
        assert lost[1] is not None
        assert (lost[1].decision, lost[1].by) == ("deny", "p1")
        mine = PendingApprovals(second, me=OTHER).decided_here("mcp")
        assert [(p.id, p.decision, p.via) for p in mine] == [("a1", "deny", "console")]
        assert PendingApprovals(first).decide("mcp", "nope", "deny", via="console",
                                              by="p1") == ("missing", None)
    finally:
        first.close()
        second.close()


_WAITER = """
import asyncio, sys
from pathlib import Path

from deepseek_eyes.errors import McpPolicyError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.asking import AskQueue
from deepseek_eyes.store.approvals import PendingApprovals


async def main() -> None:
    with DataHome(Path(sys.argv[1])) as home:
        asks = AskQueue()
        asks.share(PendingApprovals(home.db))
        try:
            await asks.ask("time", "now", {"n": 1}, session_id=None, timeout=60)
            print("made", flush=True)
        except McpPolicyError as exc:
            print(exc.code, flush=True)


asyncio.run(main())
"""


def _waiter(home: DataHome) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _WAITER, str(home.root)], stdout=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(SRC)})


def _row_of(home: DataHome, child: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 30
    while True:
        rows = [r for r in PendingApprovals(home.db).listing("mcp")
                if r.owner.split("|")[2] == str(child.pid)]
        if rows:
            return rows[0].id
        assert child.poll() is None, "the waiting process ended"
        assert time.monotonic() < deadline, "the waiting process's call never showed"
        time.sleep(0.02)


def test_another_process_waits_until_this_one_approves_and_a_killed_ones_call_expires(
        home: DataHome) -> None:
    parts = ConsoleParts(home, None)
    child = _waiter(home)
    try:
        decide_ask(parts, _row_of(home, child), "approve", "web-b")
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert out.strip() == "made"
    killed = _waiter(home)
    try:
        ask_id = _row_of(home, killed)
    finally:
        killed.kill()
        killed.wait()
        assert killed.stdout is not None
        killed.stdout.close()
    assert {a["ask_id"]: a["state"] for a in approvals(parts)["asks"]}[ask_id] == "expired"
    with pytest.raises(McpError) as caught:
        decide_ask(parts, ask_id, "approve", "web-b")
    assert caught.value.code == "MCP_APPROVAL_EXPIRED"
