"""MCP connections own sessions: a plan without ``session_id`` goes to the connection's
default session (so a client that never passes one cannot run out of sessions), and no
connection can see or act on another's session. The console may act on every session.
Real MCP SDK clients over Streamable HTTP: a handshake (``legacy``) client is one
connection; every stateless ``2026-07-28`` request is the one stateless owner."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from deepseek_eyes.terminal.service import ServiceConfig
from terminal.support import Running, ServiceFactory, mcp_client, tool_error

pytestmark = pytest.mark.anyio


async def _plan(client: Any, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool("terminal_plan", arguments)
    assert not result.is_error, result
    content: dict[str, Any] = result.structured_content
    return content


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_plans_without_a_session_share_the_default_session(
    running: Running, mode: str
) -> None:
    limit = ServiceConfig.max_sessions
    async with mcp_client(running, mode) as client:
        plans = [await _plan(client, argv=["true"]) for _ in range(limit + 4)]
        assert len({p["session_id"] for p in plans}) == 1
        assert len(running.service.sessions) == 1
        default = plans[0]["session_id"]
        closed = await client.call_tool("terminal_session_close", {"session_id": default})
        assert not closed.is_error
        again = await _plan(client, argv=["true"])
        assert again["session_id"] != default  # a closed default is replaced
        assert (await _plan(client, argv=["true"]))["session_id"] == again["session_id"]


async def test_each_handshake_connection_has_its_own_default(running: Running) -> None:
    async with mcp_client(running) as a, mcp_client(running) as b, \
            mcp_client(running, "2026-07-28") as stateless:
        ids = {(await _plan(c, argv=["true"]))["session_id"] for c in (a, b, stateless)}
        assert len(ids) == 3
        assert (await _plan(a, argv=["true"]))["session_id"] in ids
    async with mcp_client(running, "2026-07-28") as another_stateless:
        assert (await _plan(another_stateless, argv=["true"]))["session_id"] in ids


async def test_another_connection_cannot_touch_a_session(
    running: Running, http: httpx.AsyncClient
) -> None:
    async with mcp_client(running) as a, mcp_client(running) as b, \
            mcp_client(running, "2026-07-28") as stateless:
        plan = await _plan(a, argv=["touch", "made.txt"])
        assert plan["decision"]["requires_approval"]
        ids = {"session_id": plan["session_id"], "plan_id": plan["plan_id"]}
        sid = {"session_id": plan["session_id"]}
        calls = [("terminal_approve", ids), ("terminal_deny", ids), ("terminal_execute", ids),
                 ("terminal_cancel", sid), ("terminal_pause", sid), ("terminal_resume", sid),
                 ("terminal_session_status", sid), ("terminal_session_close", sid),
                 ("terminal_receipt_get", ids), ("terminal_plan", {**sid, "argv": ["true"]})]
        for stranger in (b, stateless):
            for tool, arguments in calls:
                error = tool_error(await stranger.call_tool(tool, arguments))
                assert error["code"] == "TERMINAL_SESSION_NOT_FOUND", tool
        assert running.service.sessions[plan["session_id"]].plans[plan["plan_id"]].state == (
            "planned")
        own = await a.call_tool("terminal_session_status", sid)
        assert own.structured_content is not None
        assert [p["plan_id"] for p in own.structured_content["plans"]] == [plan["plan_id"]]
        approved = await http.post(
            f"/api/sessions/{plan['session_id']}/plans/{plan['plan_id']}/approve",
            headers=running.console_headers())
        assert approved.status_code == 200
        assert approved.json()["approval"]["via"] == "console"
        receipt = await a.call_tool("terminal_execute", ids)
        assert receipt.structured_content is not None
        assert receipt.structured_content["status"] == "completed"


async def test_an_open_session_belongs_to_its_connection(running: Running) -> None:
    async with mcp_client(running) as a, mcp_client(running) as b:
        opened = await a.call_tool("terminal_session_open", {})
        assert opened.structured_content is not None
        sid = opened.structured_content["session_id"]
        assert not (await a.call_tool("terminal_plan", {"session_id": sid,
                                                        "argv": ["true"]})).is_error
        error = tool_error(await b.call_tool("terminal_plan", {"session_id": sid,
                                                               "argv": ["true"]}))
        assert error["code"] == "TERMINAL_SESSION_NOT_FOUND"


async def test_console_sessions_are_not_reachable_over_mcp(
    running: Running, http: httpx.AsyncClient
) -> None:
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    async with mcp_client(running) as client:
        error = tool_error(await client.call_tool("terminal_plan",
                                                  {"session_id": sid, "argv": ["true"]}))
    assert error["code"] == "TERMINAL_SESSION_NOT_FOUND"


async def test_default_sessions_in_the_service(make_service: ServiceFactory) -> None:
    now = [0.0]
    service = make_service(session_idle_timeout=60, clock=lambda: now[0])
    first = service.plan(argv=["true"], owner="conn-a")["session_id"]
    assert service.plan(argv=["true"], owner="conn-a")["session_id"] == first
    assert service.plan(argv=["true"], owner="conn-b")["session_id"] != first
    unowned = {service.plan(argv=["true"])["session_id"] for _ in range(2)}
    assert len(unowned) == 2  # in-process callers without an owner get a session each
    now[0] += 61
    renewed = service.plan(argv=["true"], owner="conn-a")["session_id"]
    assert renewed != first  # the expired default was replaced
    assert first not in service.sessions
    assert set(service._defaults) == {"conn-a"}
