"""A session holds at most ``MAX_PLANS_PER_SESSION`` plans, unsettled ones included: a full
session forgets its oldest settled plan, and refuses a new one (``TERMINAL_PLAN_LIMIT``,
HTTP 429 in the console API) when every plan is still open."""

from __future__ import annotations

import httpx
import pytest

from deepseek_eyes.errors import TerminalError
from deepseek_eyes.terminal.execution import sessions
from deepseek_eyes.terminal.execution.sessions import MAX_PLANS_PER_SESSION
from terminal.support import Running, ServiceFactory

pytestmark = pytest.mark.anyio


async def test_unsettled_plans_are_capped(make_service: ServiceFactory) -> None:
    service = make_service(mode="confirm")
    session_id = service.open_session()["session_id"]
    plans = [service.plan(session_id=session_id, argv=["touch", f"f{i}"])
             for i in range(MAX_PLANS_PER_SESSION)]
    assert all(p["state"] == "planned" for p in plans)
    with pytest.raises(TerminalError) as err:
        service.plan(session_id=session_id, argv=["true"])
    assert err.value.code == "TERMINAL_PLAN_LIMIT"
    assert len(service.sessions[session_id].plans) == MAX_PLANS_PER_SESSION
    service.deny(session_id, plans[7]["plan_id"], via="console")  # settled: may now be forgotten
    newest = service.plan(session_id=session_id, argv=["true"])
    held = service.sessions[session_id].plans
    assert len(held) == MAX_PLANS_PER_SESSION
    assert plans[7]["plan_id"] not in held
    assert newest["plan_id"] in held
    with pytest.raises(TerminalError) as err:
        service.plan(session_id=session_id, argv=["true"])  # `newest` is planned, not settled
    assert err.value.code == "TERMINAL_PLAN_LIMIT"


async def test_refused_plans_are_settled_and_make_room(make_service: ServiceFactory) -> None:
    service = make_service(mode="read-only")
    session_id = service.open_session()["session_id"]
    first = service.plan(session_id=session_id, argv=["touch", "x"])
    assert first["state"] == "refused"
    for _ in range(MAX_PLANS_PER_SESSION + 10):
        service.plan(session_id=session_id, argv=["touch", "x"])
    assert len(service.sessions[session_id].plans) == MAX_PLANS_PER_SESSION
    assert first["plan_id"] not in service.sessions[session_id].plans


async def test_the_console_api_answers_429(
    running: Running, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions, "MAX_PLANS_PER_SESSION", 3)
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    statuses = [(await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                                 json={"argv": ["touch", "x"]})).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                              json={"argv": ["true"]})
    assert refused.json()["error"]["code"] == "TERMINAL_PLAN_LIMIT"


async def test_waiting_lists_plans_for_a_person_and_keeps_ended_ones_as_expired(
        make_service: ServiceFactory) -> None:
    service = make_service(mode="confirm")
    first = service.open_session(owner="conn-1")["session_id"]
    second = service.open_session()["session_id"]
    write = service.plan(session_id=first, argv=["touch", "w"])
    read = service.plan(session_id=first, argv=["cat", "a.txt"])  # needs nobody
    other = service.plan(session_id=second, argv=["touch", "v"])
    waiting = service.waiting()
    assert [p["plan_id"] for p in waiting] == [write["plan_id"], other["plan_id"]]
    assert waiting[0]["owner"] == "conn-1"
    assert read["plan_id"] not in {p["plan_id"] for p in waiting}
    service.deny(second, other["plan_id"], via="console")  # decided: no longer waiting
    service.close_session(first)
    after = service.waiting()
    assert [(p["plan_id"], p["state"], p["ended"]) for p in after] == [
        (write["plan_id"], "expired", "closed")]
    with pytest.raises(TerminalError) as gone:  # expired: nothing left to approve
        service.approve(first, write["plan_id"], via="console", by="web-00000000")
    assert gone.value.code == "TERMINAL_SESSION_NOT_FOUND"
