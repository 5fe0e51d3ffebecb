"""Terminal plans across replicas: a plan waiting in one gateway's terminal service is
listed by another replica's console, approved there (the first decision wins), and the
waiting service applies the decision at its next look; its row goes once it stops
waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deepseek_eyes.console.approvals import approvals, decide
from deepseek_eyes.console.control import ConsoleParts
from deepseek_eyes.errors import TerminalError
from deepseek_eyes.home import DataHome
from deepseek_eyes.store.approvals import PendingApprovals
from deepseek_eyes.store.owner import owner
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService
from deepseek_eyes.terminal.shared_plans import SharedPlans, plan_key

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[TerminalService]:
    work = tmp_path / "ws"
    work.mkdir()
    terminal = TerminalService(ServiceConfig(workspace=Workspace.of([work]), mode="confirm"),
                               Keyring([b"k" * 32]), tmp_path / "receipts")
    yield terminal
    await terminal.aclose()


async def test_a_plan_waiting_on_one_replica_is_approved_in_another_replicas_console(
        service: TerminalService, tmp_path: Path) -> None:
    home = DataHome(tmp_path / "data")
    try:
        shared = SharedPlans(service, PendingApprovals(home.db, me=owner()))
        session = service.open_session(owner="runtime:conv-1")["session_id"]
        plan = service.plan(session_id=session, argv=["touch", "made"])
        assert plan["state"] == "planned"
        await shared.sync()  # published
        other = ConsoleParts(home, None)  # a replica's console with no terminal of its own
        listed = {p["plan_id"]: p for p in approvals(other)["plans"]}
        assert listed[plan["plan_id"]]["state"] == "planned"
        assert listed[plan["plan_id"]]["conversation"] == "conv-1"
        assert listed[plan["plan_id"]]["argv_visible"] == ["touch", "made"]
        decide(other, session, plan["plan_id"], "approve", "web-b")
        with pytest.raises(TerminalError) as second:
            decide(ConsoleParts(home, None, terminal=service), session, plan["plan_id"],
                   "deny", "web-a")
        assert second.value.code == "TERMINAL_PLAN_STATE"
        assert service.get_plan(session, plan["plan_id"]).state == "planned"  # not yet seen
        await shared.sync()  # the waiting replica's next look applies it
        decided = service.get_plan(session, plan["plan_id"])
        assert decided.state == "approved"
        assert decided.approval is not None
        assert (decided.approval["via"], decided.approval["by"]) == ("console", "web-b")
        await shared.sync()  # it no longer waits: its row goes
        assert PendingApprovals(home.db).get("plan", plan_key(session, plan["plan_id"])) is None
    finally:
        home.close()


async def test_a_plan_decided_in_its_own_replicas_console_is_decided_at_once(
        service: TerminalService, tmp_path: Path) -> None:
    home = DataHome(tmp_path / "data")
    try:
        shared = SharedPlans(service, PendingApprovals(home.db, me=owner()))
        session = service.open_session(owner="runtime:conv-2")["session_id"]
        plan = service.plan(session_id=session, argv=["touch", "no"])
        await shared.sync()
        parts = ConsoleParts(home, None, terminal=service)
        assert [p["plan_id"] for p in approvals(parts)["plans"]] == [plan["plan_id"]]  # once
        decide(parts, session, plan["plan_id"], "deny", "web-a")
        assert service.get_plan(session, plan["plan_id"]).state == "denied"
        await shared.sync()
        assert approvals(ConsoleParts(home, None))["plans"] == []
    finally:
        home.close()
