"""Every value a client sends is checked before it reaches state: numbers are finite, in
range and not bools or strings; strings are strings; argv is a list of strings; console
bodies are JSON objects with known fields. A refusal is ``TERMINAL_ARGUMENT_INVALID`` (HTTP
400), and nothing is recorded, so no listing can ever meet a NaN."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from deepseek_eyes.errors import TerminalError
from deepseek_eyes.terminal.execution.sessions import Plan
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.service import ServiceConfig
from terminal.support import Running, ServiceFactory, mcp_client, tool_error

pytestmark = pytest.mark.anyio

BAD_TIMEOUTS: list[Any] = [
    math.nan, math.inf, -math.inf, True, False, "5", "NaN", -1, 0, 0.0, 601, 10**400, [5], {},
]


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
async def test_plan_refuses_timeouts_that_are_not_finite_numbers_in_range(
    make_service: ServiceFactory, timeout: Any
) -> None:
    service = make_service(max_timeout=600.0)
    session_id = service.open_session()["session_id"]
    with pytest.raises(TerminalError) as err:
        service.plan(session_id=session_id, argv=["true"], timeout=timeout)
    assert err.value.code == "TERMINAL_ARGUMENT_INVALID"
    assert err.value.details["argument"] == "timeout_s"
    assert service.sessions[session_id].plans == {}
    json.dumps(service.list_sessions(), allow_nan=False)


@pytest.mark.parametrize("timeout", [0.5, 5, 600])
async def test_plan_keeps_good_timeouts(make_service: ServiceFactory, timeout: float) -> None:
    service = make_service(max_timeout=600.0)
    plan = service.plan(argv=["true"], timeout=timeout)
    assert plan["limits"]["timeout_s"] == timeout


@pytest.mark.parametrize(("fields", "argument"), [
    ({"argv": "ls"}, "argv"),  # a string was once split into one argument per character
    ({"argv": ["ls", 5]}, "argv"),
    ({"argv": {"0": "ls"}}, "argv"),
    ({"command": ["ls"]}, "command"),
    ({"argv": ["true"], "cwd": 5}, "cwd"),
    ({}, "argv"),
    ({"argv": ["true"], "command": "true"}, "argv"),
])
async def test_plan_refuses_arguments_of_the_wrong_type(
    make_service: ServiceFactory, fields: dict[str, Any], argument: str
) -> None:
    service = make_service()
    session_id = service.open_session()["session_id"]
    with pytest.raises(TerminalError) as err:
        service.plan(session_id=session_id, **fields)
    assert err.value.code == "TERMINAL_ARGUMENT_INVALID"
    assert err.value.details["argument"] == argument
    assert service.sessions[session_id].plans == {}


@pytest.mark.parametrize("wait_s", [math.nan, math.inf, -1, 301, True, "1"], ids=repr)
async def test_receipt_wait_must_be_a_finite_number_in_range(
    make_service: ServiceFactory, wait_s: Any
) -> None:
    service = make_service()
    plan = service.plan(argv=["true"])
    with pytest.raises(TerminalError) as err:
        await service.receipt_for_plan(plan["session_id"], plan["plan_id"], wait_s)
    assert err.value.code == "TERMINAL_ARGUMENT_INVALID"


async def test_no_plan_or_config_can_hold_a_nan(workspace: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        ServiceConfig(Workspace.of([workspace]), timeout=math.nan)
    with pytest.raises(ValueError, match="max_timeout"):
        ServiceConfig(Workspace.of([workspace]), max_timeout=math.inf)
    with pytest.raises(ValueError, match="timeout"):
        Plan(plan_id="p", session_id="s", created_at=0.0, result=None,  # type: ignore[arg-type]
             cwd_requested=None, timeout=math.nan, max_output_bytes=1, state="planned")


# -- over MCP ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_mcp_numbers_are_checked(
    running: Running, http: httpx.AsyncClient, mode: str
) -> None:
    async with mcp_client(running, mode) as client:
        for timeout in ("NaN", "Infinity", True, "5", -1, 0, 1e308):
            result = await client.call_tool("terminal_plan",
                                            {"argv": ["true"], "timeout_s": timeout})
            error = tool_error(result)
            assert error["code"] == "TERMINAL_ARGUMENT_INVALID", timeout
            assert error["details"]["argument"] == "timeout_s"
        plan = await client.call_tool("terminal_plan", {"argv": ["true"], "timeout_s": 2.5})
        assert plan.structured_content is not None
        assert plan.structured_content["limits"]["timeout_s"] == 2.5
        ids = {k: plan.structured_content[k] for k in ("session_id", "plan_id")}
        for wait_s in ("NaN", -1, 1e9, False):
            result = await client.call_tool("terminal_receipt_get", {**ids, "wait_s": wait_s})
            assert tool_error(result)["code"] == "TERMINAL_ARGUMENT_INVALID", wait_s
    listing = await http.get("/api/sessions", headers=running.console_headers())
    assert listing.status_code == 200
    assert [p["limits"]["timeout_s"] for s in listing.json()["sessions"]
            for p in s["plans"]] == [2.5]


async def test_a_nan_literal_in_a_stateless_mcp_request(
    running: Running, http: httpx.AsyncClient
) -> None:
    """JSON has no NaN, but Python parsers accept one; it must not reach a plan."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"terminal_plan",'
            '"arguments":{"argv":["true"],"timeout_s":NaN},"_meta":' + json.dumps(meta) + "}}")
    response = await http.post("/mcp", content=body, headers=running.headers(**{
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
        "mcp-name": "terminal_plan"}))
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True
    assert '"code": "TERMINAL_ARGUMENT_INVALID"' in result["content"][0]["text"]
    listing = await http.get("/api/sessions", headers=running.console_headers())
    assert listing.status_code == 200
    assert all(s["plans"] == [] for s in listing.json()["sessions"])


# -- over the console API ---------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    '{"argv": ["true"], "timeout_s": NaN}',
    '{"argv": ["true"], "timeout_s": Infinity}',
    '{"argv": ["true"], "timeout_s": 1e999}',
    '{"argv": ["true"], "timeout_s": true}',
    '{"argv": ["true"], "timeout_s": "5"}',
    '{"argv": ["true"], "timeout_s": -3}',
    '{"argv": "ls"}',
    '{"argv": ["ls", 1]}',
    '{"command": ["ls"]}',
    '{"command": "ls", "cwd": 5}',
    '{"argv": ["true"], "approve": true}',
    '{}',
    '[]',
    '"argv"',
    "not json",
    '{"argv": ["true"]',
])
async def test_console_api_refuses_malformed_plan_bodies(
    running: Running, http: httpx.AsyncClient, body: str
) -> None:
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    response = await http.post(f"/api/sessions/{sid}/plans", content=body,
                               headers=running.console_headers())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "TERMINAL_ARGUMENT_INVALID"
    listing = await http.get("/api/sessions", headers=running.console_headers())
    assert listing.status_code == 200
    assert listing.json()["sessions"][0]["plans"] == []


async def test_console_api_accepts_a_well_formed_body(
    running: Running, http: httpx.AsyncClient
) -> None:
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    response = await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                               json={"command": "cat a.txt", "cwd": ".", "timeout_s": 3})
    assert response.status_code == 200, response.text
    assert response.json()["limits"]["timeout_s"] == 3
    assert response.json()["argv"] == ["cat", "a.txt"]
