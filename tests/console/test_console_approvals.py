"""Ask-first calls across a restart of the gateway: the audit's ``mcp.ask`` rows of an
earlier run are listed, an unanswered one as expired (never approvable), and a console
without the gateway says it cannot tell."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepseek_eyes.console.approvals import approvals, decide_ask
from deepseek_eyes.console.control import ConsoleParts
from deepseek_eyes.errors import McpError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings


def _ask(home: DataHome, ask_id: str, status: str, **fields: object) -> None:
    home.audit.write("mcp.ask", "time", tool="get_current_time", status=status,
                     ask_id=ask_id, arguments_sha256="0" * 64, session_id="s1",
                     **{"via": None, "by": None, **fields})


@pytest.fixture
def home(tmp_path: Path) -> Iterator[DataHome]:
    data = DataHome(tmp_path / "data")
    _ask(data, "a-left", "asked")           # the gateway stopped while it waited
    _ask(data, "a-done", "asked")
    _ask(data, "a-done", "denied", via="console", by="web-1")
    yield data
    data.close()


def _asks(parts: ConsoleParts) -> dict[str, dict[str, object]]:
    return {str(a["ask_id"]): a for a in approvals(parts)["asks"]}


def test_an_ask_left_waiting_by_an_earlier_run_is_expired_and_not_approvable(
        home: DataHome, tmp_path: Path) -> None:
    host = McpHost(McpManager(McpSettings(servers=())), blobs=home.blobs,
                   artifacts=tmp_path / "artifacts", audit=McpAudit(None))
    parts = ConsoleParts(home, None, mcp_host=host, started_at=time.time() + 1)
    asks = _asks(parts)
    assert asks["a-left"]["state"] == "expired"
    assert asks["a-left"]["reason"] == "the gateway restarted while it waited"
    assert asks["a-left"]["arguments"] is None  # the audit keeps only their hash
    assert (asks["a-done"]["state"], asks["a-done"]["by"]) == ("denied", "web-1")
    with pytest.raises(McpError) as caught:
        decide_ask(parts, "a-left", "approve", "web-1")
    assert caught.value.code == "MCP_APPROVAL_NOT_FOUND"


def test_a_console_without_the_gateway_does_not_call_another_runs_ask_expired(
        home: DataHome) -> None:
    asks = _asks(ConsoleParts(home, None))
    assert asks["a-left"]["state"] == "elsewhere"
    assert asks["a-done"]["state"] == "denied"


@pytest.mark.anyio
async def test_a_plan_of_a_closed_session_is_listed_expired_and_cannot_be_approved(
        home: DataHome, tmp_path: Path) -> None:
    from deepseek_eyes.console.approvals import decide
    from deepseek_eyes.errors import TerminalError
    from deepseek_eyes.terminal.policy.paths import Workspace
    from deepseek_eyes.terminal.receipts.keyring import Keyring
    from deepseek_eyes.terminal.service import ServiceConfig, TerminalService

    work = tmp_path / "ws"
    work.mkdir()
    service = TerminalService(ServiceConfig(workspace=Workspace.of([work]), mode="confirm"),
                              Keyring([b"k" * 32]), tmp_path / "receipts")
    try:
        closed = service.open_session(owner="runtime:conv-1")["session_id"]
        open_ = service.open_session(owner="runtime:conv-2")["session_id"]
        gone = service.plan(session_id=closed, argv=["touch", "gone"])
        live = service.plan(session_id=open_, argv=["touch", "live"])
        service.close_session(closed)
        parts = ConsoleParts(home, None, terminal=service)
        plans = {p["plan_id"]: p for p in approvals(parts)["plans"]}
        assert plans[gone["plan_id"]]["state"] == "expired"
        assert plans[gone["plan_id"]]["conversation"] == "conv-1"
        assert plans[gone["plan_id"]]["turn_id"] is None  # nothing is in progress for it
        assert plans[live["plan_id"]]["state"] != "expired"
        assert plans[live["plan_id"]]["age_s"] >= 0
        with pytest.raises(TerminalError) as refused:
            decide(parts, closed, gone["plan_id"], "approve", "web-1")
        assert refused.value.code == "TERMINAL_SESSION_NOT_FOUND"
    finally:
        await service.aclose()
