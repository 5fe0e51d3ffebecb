"""Execution sessions and their plans: the state the service keeps between tool calls.

A plan moves ``planned → approved → running → finished`` (or ``planned → denied``);
a plan the policy refused is born ``refused`` and can never run. Approval is a state change
of one plan in one session, never a flag a caller passes to execute. A session owns its plans,
its receipts' ids, at most one active process, and its event stream; sessions and plans are
bounded in number so a client cannot grow the server's memory without limit. A full session
forgets its oldest settled plan; when every plan is still open (planned, approved, running)
it refuses the new one rather than grow.

A session records its ``owner``: the MCP connection that opened it (see
:mod:`deepseek_eyes.terminal.transport.server`), or None for the console and in-process callers.
Numbers in a plan are finite by construction, so a plan can always be encoded as JSON.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deepseek_eyes import canonical_json
from deepseek_eyes.errors import TerminalError
from deepseek_eyes.terminal.policy.commandline import make_visible
from deepseek_eyes.terminal.policy.engine import PolicyResult
from deepseek_eyes.terminal.records import Approval, PlanView, Receipt, SessionView

if TYPE_CHECKING:
    import asyncio

    from deepseek_eyes.terminal.execution.events import SessionEvents
    from deepseek_eyes.terminal.execution.process import RunningProcess

__all__ = ["MAX_PLANS_PER_SESSION", "PLAN_SCHEMA", "ExecutionSession", "Plan", "new_id"]

PLAN_SCHEMA = "deepseek-eyes/terminal-plan"
MAX_PLANS_PER_SESSION = 256
MAX_RECEIPTS_PER_SESSION = 1024
SETTLED_STATES = frozenset({"finished", "denied", "refused"})


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Plan:
    plan_id: str
    session_id: str
    created_at: float
    result: PolicyResult
    cwd_requested: str | None
    timeout: float
    max_output_bytes: int
    state: str  # planned, approved, denied, refused, running, finished
    approval: Approval | None = None
    receipt_id: str | None = None
    plan_hash: str = ""

    def __post_init__(self) -> None:
        if not math.isfinite(self.timeout) or self.timeout <= 0:
            raise ValueError("a plan's timeout must be a positive finite number")
        body = {
            "plan_id": self.plan_id, "session_id": self.session_id,
            "argv": list(self.result.argv), "decision": self.result.decision.to_dict(),
            "resolution": self.result.resolution.to_dict() if self.result.resolution else None,
            "timeout": self.timeout, "max_output_bytes": self.max_output_bytes,
            "created_at": self.created_at,
        }
        self.plan_hash = "sha256:" + canonical_json.ASCII.sha256_hex(body)

    def to_dict(self) -> dict[str, Any]:
        """The versioned plan as a plain dict (the transports' and the runtime's edge:
        they take ``dict[str, Any]``); :meth:`view` is the same, typed."""
        return dict(self.view())

    def view(self) -> PlanView:
        """The versioned plan as clients and the console see it."""
        res = self.result.resolution
        return {
            "schema": PLAN_SCHEMA,
            "schema_version": "1.0",
            "plan_id": self.plan_id,
            "session_id": self.session_id,
            "state": self.state,
            "argv": list(self.result.argv),
            "argv_visible": [make_visible(a) for a in self.result.argv],
            "display": self.result.display,
            "cwd": res.cwd if res else self.cwd_requested,
            "executable": res.executable if res else None,
            "executable_sha256": res.executable_sha256 if res else None,
            "decision": self.result.decision.to_dict(),
            "limits": {"timeout_s": self.timeout, "max_output_bytes": self.max_output_bytes},
            "approval": self.approval,
            "receipt_id": self.receipt_id,
            "plan_hash": self.plan_hash,
            "created_at": self.created_at,
        }


@dataclass
class ExecutionSession:
    session_id: str
    created_at: float
    last_activity: float  # monotonic
    events: SessionEvents
    plans: dict[str, Plan] = field(default_factory=dict)
    receipts: list[str] = field(default_factory=list)
    active_plan: str | None = None
    process: RunningProcess | None = None
    task: asyncio.Task[Receipt] | None = None
    owner: str | None = None  # the MCP connection that owns it; None: console, in-process

    def make_room(self) -> None:
        """Forget the oldest settled plan when the session is full.

        Raises:
            TerminalError: ``TERMINAL_PLAN_LIMIT`` when it is full of unsettled plans.
        """
        if len(self.plans) < MAX_PLANS_PER_SESSION:
            return
        for pid, old in self.plans.items():
            if old.state in SETTLED_STATES:
                del self.plans[pid]
                return
        raise TerminalError(
            f"the session already holds {MAX_PLANS_PER_SESSION} plans and none is settled; "
            "execute, deny or close some first (or open another session)",
            code="TERMINAL_PLAN_LIMIT", details={"max_plans": MAX_PLANS_PER_SESSION},
        )

    def add_plan(self, plan: Plan) -> None:
        """Raises:
            TerminalError: ``TERMINAL_PLAN_LIMIT`` (see :meth:`make_room`).
        """
        self.make_room()
        self.plans[plan.plan_id] = plan

    def add_receipt(self, receipt_id: str) -> None:
        self.receipts.append(receipt_id)
        del self.receipts[:-MAX_RECEIPTS_PER_SESSION]

    def to_dict(self) -> dict[str, Any]:
        """:meth:`view` as a plain dict, for the transports and the runtime."""
        return dict(self.view())

    def view(self) -> SessionView:
        return {
            "session_id": self.session_id,
            "created_at": self.created_at,
            "idle_s": round(time.monotonic() - self.last_activity, 3),
            "active_plan": self.active_plan,
            "paused": bool(self.process and self.process.paused),
            "plans": [p.view() for p in self.plans.values()],
            "receipts": list(self.receipts[-50:]),
        }
