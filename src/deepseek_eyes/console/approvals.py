"""What the web console decides: the approvals queue (terminal plans and ask-first MCP
calls), its age and owner, and the asks earlier runs left behind.

Approvals act on the terminal service the gateway runs in process (the very object a
paused turn's :class:`~deepseek_eyes.runtime.approval.ConsoleWait` watches), recorded as
approvals ``via`` the console ``by`` the console login that gave them. Plans of sessions
that ended while waiting are listed as ``expired``, with no action. Ask-first MCP calls
(``mcp.servers[].ask``) are the MCP host's own queue (:mod:`deepseek_eyes.mcp_host.asking`),
listed beside the plans and decided the same way.

Replicas: a gateway that shares its queue (``serve`` does) writes each waiting call to the
store (:mod:`deepseek_eyes.store.approvals`), so this console lists the calls waiting on
every replica beside its own, each with the replica it waits in, and decides them there (the
call goes on in that replica within a fraction of a second); one whose replica is gone is
listed expired, never approvable. A console without the gateway (``deepseek-eyes console``)
decides them too. Plans of the terminal each replica runs are shared the same way
(:mod:`deepseek_eyes.terminal.shared_plans`).

Why asks of an earlier run are read from the audit rather than kept: the call that waited
was an HTTP request of that process, gone with it; nothing can be released by approving
it. Its ``mcp.ask`` rows say what became of it, and one never answered is listed as
expired, so a person sees it ended, and no button offers to approve it.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from deepseek_eyes.console.control import ConsoleParts
from deepseek_eyes.mcp_host.asking import decide_shared, shared_listing
from deepseek_eyes.store.approvals import PendingApprovals
from deepseek_eyes.terminal.shared_plans import decide_plan, plan_key, shared_plans

__all__ = ["approvals", "decide", "decide_ask", "past_asks"]


def _board(parts: ConsoleParts) -> PendingApprovals:
    """The shared rows of waiting requests: the gateway's own (it knows which are its
    own), else read as a console that waits on nothing."""
    host = parts.mcp_host
    if host is not None and host.asks.board is not None:
        return host.asks.board
    return PendingApprovals(parts.home.db)


#: ``mcp.ask`` audit rows read for the asks of earlier gateway runs.
_PAST_ASK_ROWS = 2000
#: Asks of earlier runs listed.
_PAST_ASKS = 64


def past_asks(parts: ConsoleParts, known: set[str]) -> list[dict[str, Any]]:
    """The ask-first calls the audit holds that this gateway's queue does not know (asked
    of an earlier run, or of a gateway this console does not run), newest first, each in
    its last recorded state. Never approvable here: the call that waited lived in that
    process. One still ``asked`` when this gateway started is ``expired`` (the gateway
    restarted while it waited, and the waiting call ended with it), said as such."""
    rows = parts.home.db.query(
        "SELECT ts, subject, details FROM audit WHERE kind = 'mcp.ask' ORDER BY id DESC"
        " LIMIT ?", (_PAST_ASK_ROWS,))
    last: dict[str, dict[str, Any]] = {}
    asked_at: dict[str, float] = {}
    for row in rows:
        try:
            details = json.loads(row[2])
        except ValueError:
            continue
        ask_id = str(details.get("ask_id") or "")
        if not ask_id or ask_id in known:
            continue
        if details.get("status") == "asked":
            asked_at[ask_id] = float(row[0])
        if ask_id not in last and len(last) < _PAST_ASKS:
            last[ask_id] = {"ts": float(row[0]), "server": row[1], **details}
    now = time.time()
    out = []
    for ask_id, seen in last.items():
        created = asked_at.get(ask_id, seen["ts"])
        state, reason = str(seen.get("status")), None
        if state == "asked":
            if parts.mcp_host is not None and created < parts.started_at:
                state, reason = "expired", "the gateway restarted while it waited"
            else:
                state, reason = "elsewhere", "asked of a gateway this console does not run"
        out.append({"kind": "mcp", "ask_id": ask_id, "server": seen["server"],
                    "tool": seen.get("tool"), "arguments": None,
                    "session_id": seen.get("session_id"), "state": state, "reason": reason,
                    "created_at": created, "age_s": round(now - created, 1),
                    "via": seen.get("via"), "by": seen.get("by"), "past": True})
    return out


def approvals(parts: ConsoleParts) -> dict[str, Any]:
    """Every plan waiting for a person, here or on another replica, with its age; expired
    ones after. ``asks``: the ask-first MCP calls waiting here (then the last decided),
    those waiting on other replicas, then those of earlier runs the audit holds
    (:func:`past_asks`, never approvable). ``running``: this console runs in a gateway, or
    a replica's requests wait for it to decide."""
    host = parts.mcp_host
    own = host.asks.listing() if host is not None else []
    elsewhere = shared_listing(_board(parts), {str(a["ask_id"]) for a in own})
    asks = own + elsewhere
    asks += past_asks(parts, {str(a["ask_id"]) for a in asks})
    service = parts.terminal
    plans = service.waiting() if service is not None else []
    shared = shared_plans(PendingApprovals(parts.home.db), {
        plan_key(str(p["session_id"]), str(p["plan_id"])) for p in plans})
    # Waiting ones first (oldest first), then the expired.
    plans = ([p for p in plans if p.get("state") != "expired"]
             + [p for p in shared if p["state"] != "expired"]
             + [p for p in plans if p.get("state") == "expired"]
             + [p for p in shared if p["state"] == "expired"])
    running = host is not None or service is not None or bool(elsewhere or shared)
    now = time.time()
    for plan in plans:
        plan["age_s"] = round(now - float(plan["created_at"]), 1)
        # The conversation that asked (the runtime's terminal sessions are owned by
        # ``runtime:<conversation>``) and its turn in progress (its open lease).
        owner = str(plan.get("owner") or "")
        conversation = owner.removeprefix("runtime:") if owner.startswith("runtime:") else None
        plan["conversation"] = conversation
        plan["turn_id"] = None
        if conversation is not None and plan.get("state") != "expired":
            row = parts.home.db.query_one(
                "SELECT turn_id FROM turn_leases WHERE session_id = ?"
                " ORDER BY started_at DESC LIMIT 1", (conversation,))
            plan["turn_id"] = None if row is None else row[0]
    return {"running": running, "terminal": service is not None or bool(shared),
            "plans": plans, "asks": asks}


def decide_ask(parts: ConsoleParts, ask_id: str, verdict: Literal["approve", "deny"],
               person: str) -> dict[str, Any]:
    """Approve or deny a waiting ask-first MCP call, waiting here or on another replica
    (the waiting call then goes on, or is refused with ``MCP_CALL_DENIED``).

    Raises:
        McpError: ``MCP_APPROVAL_NOT_FOUND`` (decided already, expired, or unknown),
            ``MCP_APPROVAL_DECIDED`` (another person's decision came first),
            ``MCP_APPROVAL_EXPIRED`` (its replica is gone).
    """
    host = parts.mcp_host
    if host is None:
        return decide_shared(_board(parts), ask_id, verdict, via="console", by=person)
    return host.asks.decide(ask_id, verdict, via="console", by=person)


def decide(parts: ConsoleParts, session_id: str, plan_id: str,
           verdict: Literal["approve", "deny"], person: str) -> dict[str, Any]:
    """Approve or deny a waiting plan, waiting here or on another replica.

    Raises:
        TerminalError: the service's own (``TERMINAL_SESSION_NOT_FOUND`` for an expired
            one or one whose replica is gone, ``TERMINAL_PLAN_STATE`` for one decided
            already, here or on another replica).
    """
    return decide_plan(parts.terminal, PendingApprovals(parts.home.db), session_id, plan_id,
                       verdict, person)


