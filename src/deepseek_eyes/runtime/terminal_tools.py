"""The ``terminal`` tool source: the terminal service in-process, for the final model.

The tools are the runtime's face of the terminal's one table
(:data:`deepseek_eyes.terminal.transport.tools.RUNTIME_TOOLS`): the names, argument names and
annotations the terminal MCP server uses — ``terminal_plan``, ``terminal_execute``,
``terminal_run``, ``terminal_session_status``, ``terminal_receipt_get`` — calling the same
:class:`TerminalService`, configured from
``[terminal]`` (mode, workspaces, sandbox, limits). What the runtime does *not* offer is as
important: ``terminal_approve`` and ``terminal_deny``. A plan that needs approval pauses
the turn and asks the turn's approver (:mod:`deepseek_eyes.runtime.approval`); the model
only learns the outcome. A write never runs unapproved.

Each conversation session gets its own terminal owner (``runtime:<session id>``), so one
conversation can neither see nor execute another's plans. Receipts reach the model as a
compact text (status, exit code, bounded stdout/stderr, receipt id); the signed receipt
itself stays in the receipt log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.approval import describe_plan
from deepseek_eyes.runtime.tools import ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.terminal.service import TerminalService, Via
from deepseek_eyes.terminal.transport.tools import RUNTIME_TOOL_NAMES, RUNTIME_TOOLS

__all__ = ["TOOL_NAMES", "TerminalToolSource"]

#: Characters of stdout and of stderr a receipt shows the model.
MAX_STDOUT_CHARS = 8000
MAX_STDERR_CHARS = 2000

#: The runtime's face of the terminal's one tool table.
_SPECS = tuple(ToolSpec(t.name, t.description, t.parameters, risk=t.risk) for t in RUNTIME_TOOLS)
TOOL_NAMES = RUNTIME_TOOL_NAMES


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters in the receipt]"


def receipt_text(receipt: Mapping[str, Any]) -> str:
    """A receipt as the model reads it: bounded, with the id that finds the rest."""
    out = {
        "receipt_id": receipt.get("receipt_id"),
        "plan_id": receipt.get("plan_id"),
        "status": receipt.get("status"),
        "exit_code": receipt.get("exit_code"),
        "signal": receipt.get("signal"),
        "duration_ms": receipt.get("duration_ms"),
    }
    stdout = receipt.get("stdout") or {}
    stderr = receipt.get("stderr") or {}
    return "\n".join([
        json.dumps(out, ensure_ascii=False),
        "stdout:", _clip(str(stdout.get("text", "")), MAX_STDOUT_CHARS),
        "stderr:", _clip(str(stderr.get("text", "")), MAX_STDERR_CHARS),
    ])


def _plan_view(plan: Mapping[str, Any]) -> dict[str, Any]:
    return {k: plan.get(k) for k in ("plan_id", "session_id", "state", "argv", "cwd",
                                      "decision")}


class TerminalToolSource:
    name = "terminal"
    prefix = "terminal_"

    def __init__(self, service: TerminalService) -> None:
        self.service = service

    def tools(self, context: TurnContext) -> list[ToolSpec]:  # noqa: ARG002 - same for all
        return list(_SPECS)

    @staticmethod
    def owner(context: TurnContext) -> str:
        return f"runtime:{context.session_id}"

    def _session(self, arguments: Mapping[str, Any], context: TurnContext) -> str:
        owner = self.owner(context)
        given = arguments.get("session_id")
        if given is None:
            return self.service.default_session(owner)
        self.service.session(str(given), owner=owner)  # another's is not found
        return str(given)

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        name = spec.name
        try:
            if name == "terminal_plan":
                plan = self._plan(arguments, context)
                return ToolOutcome(json.dumps(_plan_view(plan), ensure_ascii=False))
            if name == "terminal_execute":
                session = self._session(arguments, context)
                return await self._execute(session, str(arguments.get("plan_id", "")), context)
            if name == "terminal_run":
                plan = self._plan(arguments, context)
                decision = plan["decision"]
                if not decision["allowed"]:
                    return ToolOutcome(json.dumps(
                        {"plan": _plan_view(plan), "executed": False}, ensure_ascii=False))
                ran = await self._execute(plan["session_id"], plan["plan_id"], context)
                return ToolOutcome(
                    json.dumps({"plan": _plan_view(plan)}, ensure_ascii=False) + "\n"
                    + ran.content, ran.is_error, ran.details)
            if name == "terminal_session_status":
                session = self._session(arguments, context)
                status = self.service.session(session, owner=self.owner(context)).to_dict()
                status["plans"] = [_plan_view(p) for p in status["plans"][-20:]]
                return ToolOutcome(json.dumps(status, ensure_ascii=False))
            if name == "terminal_receipt_get":
                receipt = self.service.receipt(str(arguments.get("receipt_id", "")))
                owned = self.service.sessions.get(str(receipt.get("session_id")))
                if owned is None or owned.owner != self.owner(context):
                    return ToolOutcome("no receipt with that id in this conversation", True,
                                       {"code": "TERMINAL_RECEIPT_NOT_FOUND"})
                return ToolOutcome(receipt_text(receipt))
        except DeepSeekEyesError as exc:
            return ToolOutcome.failure(exc, name)
        return ToolOutcome(f"no terminal tool {name[:80]!r}", True,
                           {"code": "RUNTIME_TOOL_UNKNOWN"})

    def _plan(self, arguments: Mapping[str, Any], context: TurnContext) -> dict[str, Any]:
        session = self._session(arguments, context)
        plan = self.service.plan(
            session_id=session, argv=arguments.get("argv"), command=arguments.get("command"),
            cwd=arguments.get("cwd"), timeout=arguments.get("timeout_s"),
            owner=self.owner(context))
        context.calls.append({"tool": "terminal_plan", "source": "terminal",
                              "plan_id": plan["plan_id"], "state": plan["state"],
                              "risk": plan["decision"]["risk"]})
        return plan

    async def _execute(self, session: str, plan_id: str, context: TurnContext) -> ToolOutcome:
        plan = self.service.get_plan(session, plan_id).to_dict()
        if plan["state"] == "planned" and plan["decision"]["requires_approval"]:
            refused = await self._approval(plan, context)
            if refused is not None:
                return refused
        receipt = await self.service.execute(session, plan_id)
        context.calls.append({"tool": "terminal_execute", "source": "terminal",
                              "plan_id": plan_id, "receipt_id": receipt["receipt_id"],
                              "status": receipt["status"], "exit_code": receipt["exit_code"]})
        return ToolOutcome(receipt_text(receipt), receipt["status"] != "completed"
                           or receipt["exit_code"] != 0, {"receipt_id": receipt["receipt_id"]})

    async def _approval(self, plan: dict[str, Any], context: TurnContext) -> ToolOutcome | None:
        """Ask the turn's approver; None when approved (the plan may run)."""
        session, plan_id = plan["session_id"], plan["plan_id"]
        approver = context.approver
        if approver is None:
            return ToolOutcome(
                "RUNTIME_APPROVAL_UNAVAILABLE: this plan needs a person's approval and nobody "
                "can approve here; it was not run", True,
                {"code": "RUNTIME_APPROVAL_UNAVAILABLE", "plan_id": plan_id})
        context.emit({"type": "approval.wanted", "plan_id": plan_id, "session_id": session,
                      "via": approver.via, "text": describe_plan(plan)})
        decision = await approver.decide(plan)
        context.emit({"type": "approval.decided", "plan_id": plan_id, "decision": decision})
        context.calls.append({"tool": "approval", "source": "terminal", "plan_id": plan_id,
                              "decision": decision, "via": approver.via})
        state = self.service.get_plan(session, plan_id).state
        # A turn's approver is a person: the one at chat's terminal (``cli``, recorded as
        # given by the ``tty``) or one in the console, which records its own decision.
        via: Via = "cli" if approver.via == "cli" else "console"
        by = "tty" if via == "cli" else "console"
        if decision == "approved":
            if state == "planned":
                self.service.approve(session, plan_id, via=via, by=by)
            return None
        if state == "planned":
            self.service.deny(session, plan_id, via=via, by=by)
        if decision == "denied":
            return ToolOutcome("RUNTIME_APPROVAL_DENIED: the user denied this plan; it was not "
                               "run", True,
                               {"code": "RUNTIME_APPROVAL_DENIED", "plan_id": plan_id})
        return ToolOutcome("RUNTIME_APPROVAL_TIMEOUT: nobody approved this plan in time; it "
                           "was not run", True,
                           {"code": "RUNTIME_APPROVAL_TIMEOUT", "plan_id": plan_id})

    async def close(self) -> None:
        await self.service.aclose()
