"""The terminal service: plan, approve, execute, control, and receipt, in one place.

Both MCP transports, the HTTP console API and the CLI call this class; none of them holds
terminal logic of its own. The sequence is fixed: a plan is judged by the policy engine when
it is made; approval (when the decision asks for it) is a state change of that plan;
execution re-resolves the plan and refuses when anything moved (a symlink retargeted, the
binary replaced), then runs it inside the limits and signs a receipt for every final state.

Every value a client sends is checked here (:mod:`deepseek_eyes.terminal.arguments`) before it
reaches any state, whichever transport it came through. Sessions have an ``owner`` (an MCP
connection's identity, or None for the console and in-process callers): :meth:`session`
with ``owner`` answers only that owner's sessions, and a plan without a session goes to the
owner's default session, made when needed. Live output is redacted like receipts are.

Who approves is decided here, not by the transports: an approval names its channel
(``via``: ``console`` and ``cli`` are people, ``client`` is the MCP client that planned) and
the credential that gave it (``by``, recorded in the receipt). With ``approvals = "person"``
(the default) an approval ``via`` the client is refused with
``TERMINAL_SELF_APPROVAL_REFUSED``; ``"mcp-client"`` allows it, by explicit choice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from deepseek_eyes import telemetry
from deepseek_eyes.audit import AuditLog, message_digest
from deepseek_eyes.errors import PolicyBlockedError, TerminalError
from deepseek_eyes.terminal.arguments import invalid, number, optional_string, string_list
from deepseek_eyes.terminal.execution.events import EventBus, SessionEvents
from deepseek_eyes.terminal.execution.process import ProcessOutcome, RunningProcess
from deepseek_eyes.terminal.execution.redact import LiveRedactor, Redactor
from deepseek_eyes.terminal.execution.sandbox import (
    SandboxPlan,
    child_environment,
    make_home,
    remove_home,
    wrap_argv,
)
from deepseek_eyes.terminal.execution.sessions import ExecutionSession, Plan, new_id
from deepseek_eyes.terminal.policy.engine import Mode, PolicyEngine
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.chain import (
    RECEIPT_SCHEMA,
    RECEIPT_SCHEMA_VERSION,
    ReceiptLog,
    share_export,
)
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.records import Receipt, ReceiptStream

__all__ = ["MAX_WAIT_S", "PERSON_CHANNELS", "ServiceConfig", "TerminalService", "Via"]

MAX_WAIT_S = 300.0  # the longest a receipt request may wait for a running plan
#: Plans of ended sessions a console still shows as expired.
MAX_EXPIRED_WAITING = 50

#: Where an approval or a denial came from: the approval console, the runtime's prompt (a
#: person at chat's terminal), or the MCP client that planned the command.
Via = Literal["console", "cli", "client"]
#: The channels a person answers on.
PERSON_CHANNELS: frozenset[str] = frozenset({"console", "cli"})


@dataclass(frozen=True)
class ServiceConfig:
    workspace: Workspace
    mode: Mode = "confirm"
    timeout: float = 60.0
    max_timeout: float = 600.0
    max_output_bytes: int = 1024 * 1024
    max_sessions: int = 8
    session_idle_timeout: float = 900.0
    subscriber_queue: int = 256
    sandbox: str | None = None  # the bwrap path, or None to run without a sandbox
    approvals: str = "person"  # or "mcp-client" (settings.terminal.Approvals)

    def __post_init__(self) -> None:
        for name in ("timeout", "max_timeout", "session_idle_timeout"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"ServiceConfig.{name} must be a positive finite number")
        for name in ("max_output_bytes", "max_sessions", "subscriber_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServiceConfig.{name} must be positive")
        if self.approvals not in ("person", "mcp-client"):
            raise ValueError('ServiceConfig.approvals must be "person" or "mcp-client"')


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


class TerminalService:
    def __init__(
        self,
        config: ServiceConfig,
        keyring: Keyring,
        receipts_dir: Path,
        *,
        audit: AuditLog | None = None,
        redactor: Redactor | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.engine = PolicyEngine(config.workspace, config.mode)
        self.keyring = keyring
        self.receipts = ReceiptLog(receipts_dir, keyring)
        self.audit = audit
        self.redactor = redactor or Redactor()
        self.bus = EventBus(config.subscriber_queue)
        self.clock = clock
        self.sessions: dict[str, ExecutionSession] = {}
        self._defaults: dict[str, str] = {}  # owner -> its default session's id
        #: Plans that were waiting for a person when their session ended (newest last,
        #: bounded): a console shows them as expired, never approvable.
        self.expired_waiting: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=MAX_EXPIRED_WAITING)

    # -- sessions ---------------------------------------------------------------------------

    def open_session(self, *, owner: str | None = None) -> dict[str, Any]:
        """Open a session owned by ``owner`` (None: the console or an in-process caller).

        Raises:
            TerminalError: ``TERMINAL_SESSION_LIMIT``.
        """
        self.reap()
        if len(self.sessions) >= self.config.max_sessions:
            raise TerminalError(
                f"{self.config.max_sessions} execution sessions are already open",
                code="TERMINAL_SESSION_LIMIT",
                details={"max_sessions": self.config.max_sessions},
            )
        sid = new_id()
        session = ExecutionSession(sid, time.time(), self.clock(), self.bus.open(sid),
                                   owner=owner)
        self.sessions[sid] = session
        self._audit("terminal.session.open", sid)
        return {"session_id": sid, "mode": self.config.mode,
                "idle_timeout_s": self.config.session_idle_timeout}

    def default_session(self, owner: str) -> str:
        """The id of ``owner``'s default session, opened now if it has none (or it ended).

        Raises:
            TerminalError: ``TERMINAL_SESSION_LIMIT``.
        """
        self.reap()
        sid = self._defaults.get(owner)
        if sid is not None and sid in self.sessions:
            return sid
        sid = str(self.open_session(owner=owner)["session_id"])
        self._defaults[owner] = sid
        return sid

    def session(self, session_id: str, *, owner: str | None = None) -> ExecutionSession:
        """The live session, marked active now. With ``owner`` (an MCP connection), only a
        session that connection owns: another's is answered as not found, so a connection
        can neither act on nor learn of a session that is not its own.

        Raises:
            TerminalError: ``TERMINAL_SESSION_NOT_FOUND``.
        """
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None and owner is not None and session.owner != owner:
            session = None
        if session is None:
            raise TerminalError("no execution session has that id",
                                code="TERMINAL_SESSION_NOT_FOUND")
        session.last_activity = self.clock()
        return session

    def close_session(self, session_id: str, reason: str = "closed") -> dict[str, Any]:
        session = self.session(session_id)
        self._end_session(session, reason)
        return {"session_id": session_id, "closed": True, "reason": reason}

    def _end_session(self, session: ExecutionSession, reason: str) -> None:
        ended = time.time()
        for plan in session.plans.values():
            if plan.state == "planned" and plan.result.decision.requires_approval:
                # Its owner too: the console still names the conversation that asked.
                self.expired_waiting.append({**plan.to_dict(), "state": "expired",
                                             "owner": session.owner,
                                             "ended": reason, "ended_at": ended})
        if session.process is not None and session.process.running:
            session.process.kill("expired" if reason == "expired" else "cancelled")
        self.sessions.pop(session.session_id, None)
        if session.owner is not None and self._defaults.get(session.owner) == session.session_id:
            del self._defaults[session.owner]
        self.bus.close(session.session_id, reason)
        self._audit(f"terminal.session.{reason}", session.session_id)

    def reap(self, now: float | None = None) -> list[str]:
        """End sessions idle longer than the timeout (their process groups die too)."""
        now = self.clock() if now is None else now
        expired = [s for s in self.sessions.values()
                   if now - s.last_activity > self.config.session_idle_timeout]
        for session in expired:
            self._end_session(session, "expired")
        return [s.session_id for s in expired]

    async def run_reaper(self) -> None:
        """Reap periodically until cancelled (the servers run this as a background task)."""
        interval = max(1.0, min(30.0, self.config.session_idle_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            self.reap()

    def list_sessions(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.sessions.values()]

    def waiting(self) -> list[dict[str, Any]]:
        """Every plan waiting for a person, oldest first, with its session's owner; then the
        plans that were waiting when their session ended (``state: expired``)."""
        self.reap()
        live = [{**plan.to_dict(), "owner": session.owner}
                for session in self.sessions.values() for plan in session.plans.values()
                if plan.state == "planned" and plan.result.decision.requires_approval]
        live.sort(key=lambda p: float(p["created_at"]))
        return live + list(self.expired_waiting)

    def waiting_count(self) -> int:
        """How many live plans wait for a person now (the metrics' gauge; nothing reaped,
        nothing copied)."""
        return sum(1 for session in list(self.sessions.values())
                   for plan in list(session.plans.values())
                   if plan.state == "planned" and plan.result.decision.requires_approval)

    # -- plan and approval --------------------------------------------------------------------

    def plan(
        self,
        *,
        session_id: str | None = None,
        argv: list[str] | None = None,
        command: str | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Judge a command and record the plan (refused plans are recorded too).

        Without ``session_id`` the plan goes to ``owner``'s default session (a new session
        when there is no owner). ``timeout`` (seconds) must be a finite number in
        ``(0, max_timeout]``; None means the configured default.

        Raises:
            TerminalError: ``TERMINAL_ARGUMENT_INVALID``, ``TERMINAL_SESSION_NOT_FOUND``,
                ``TERMINAL_SESSION_LIMIT``, ``TERMINAL_PLAN_LIMIT``.
        """
        argv = string_list(argv, "argv")
        command = optional_string(command, "command")
        cwd = optional_string(cwd, "cwd")
        if (argv is None) == (command is None):
            raise invalid("argv", "give exactly one of argv or command")
        default = min(self.config.timeout, self.config.max_timeout)
        limit = default if timeout is None else number(
            timeout, "timeout_s", minimum=0.0, maximum=self.config.max_timeout,
            exclusive_minimum=True)
        if session_id is None:
            session_id = (self.default_session(owner) if owner is not None
                          else self.open_session()["session_id"])
        session = self.session(session_id, owner=owner)
        session.make_room()
        if cwd is not None and not os.path.isabs(cwd):
            cwd = os.path.join(self.config.workspace.roots[0], cwd)
        result = self.engine.evaluate(argv=argv, command=command, cwd=cwd)
        plan = Plan(
            plan_id=new_id(), session_id=session_id, created_at=time.time(), result=result,
            cwd_requested=cwd, timeout=limit,
            max_output_bytes=self.config.max_output_bytes,
            state="planned" if result.decision.allowed else "refused",
        )
        session.add_plan(plan)
        session.events.publish("plan", plan=plan.to_dict())
        self._audit("terminal.plan", plan.plan_id, session=session_id,
                    allowed=result.decision.allowed, risk=result.decision.risk,
                    effects=list(result.decision.effects),
                    argv_sha256=message_digest("\x00".join(result.argv)))
        return plan.to_dict()

    def get_plan(self, session_id: str, plan_id: str) -> Plan:
        """Raises:
            TerminalError: ``TERMINAL_SESSION_NOT_FOUND``, ``TERMINAL_PLAN_NOT_FOUND``.
        """
        plan = self.session(session_id).plans.get(plan_id) if isinstance(plan_id, str) else None
        if plan is None:
            raise TerminalError("no plan has that id in this session",
                                code="TERMINAL_PLAN_NOT_FOUND")
        return plan

    def approve(
        self, session_id: str, plan_id: str, *, via: Via, by: str
    ) -> dict[str, Any]:
        """Approve a planned command, ``via`` a channel, ``by`` a credential (recorded in the
        plan and its receipt: a console login's id, ``tty``, ``mcp-token``, ``mcp-stdio``).

        Raises:
            PolicyBlockedError: the policy refused the plan; it can never be approved.
            TerminalError: ``TERMINAL_PLAN_STATE``, or ``TERMINAL_SELF_APPROVAL_REFUSED``
                when ``via`` is the MCP client and approvals are a person's.
        """
        plan = self.get_plan(session_id, plan_id)
        if plan.state == "refused":
            raise PolicyBlockedError("the policy refused this plan; it cannot be approved",
                                     details=plan.result.decision.to_dict())
        if plan.state != "planned":
            raise TerminalError(f"the plan is {plan.state}", code="TERMINAL_PLAN_STATE",
                                details={"state": plan.state})
        if via not in PERSON_CHANNELS and self.config.approvals != "mcp-client":
            self._audit("terminal.approve.refused", plan.plan_id, session=plan.session_id,
                        via=via)
            raise TerminalError(
                "a person approves this plan, not the client that planned it: ask the user "
                "to approve it in the terminal's approval console (the server prints its "
                'login link); terminal.approvals = "mcp-client" would let clients approve '
                "their own plans", code="TERMINAL_SELF_APPROVAL_REFUSED",
                details={"plan_id": plan.plan_id, "approvals": self.config.approvals})
        plan.state = "approved"
        plan.approval = {"approved": True, "via": via, "by": by[:64],
                         "at": _iso(time.time())}
        self._settled(plan, "approved")
        return plan.to_dict()

    def deny(self, session_id: str, plan_id: str, *, via: Via, by: str = "") -> dict[str, Any]:
        """Deny a plan (anyone who may act on it may: a denial only takes power away)."""
        plan = self.get_plan(session_id, plan_id)
        if plan.state not in ("planned", "approved"):
            raise TerminalError(f"the plan is {plan.state}", code="TERMINAL_PLAN_STATE",
                                details={"state": plan.state})
        plan.state = "denied"
        plan.approval = {"approved": False, "via": via, "at": _iso(time.time())}
        if by:
            plan.approval["by"] = by[:64]
        self._settled(plan, "denied")
        return plan.to_dict()

    def _settled(self, plan: Plan, what: str) -> None:
        session = self.sessions.get(plan.session_id)
        if session is not None:
            session.events.publish("state", plan_id=plan.plan_id, state=plan.state)
        self._audit(f"terminal.{what}", plan.plan_id, session=plan.session_id)

    # -- execution ----------------------------------------------------------------------------

    async def execute(self, session_id: str, plan_id: str, *, wait: bool = True) -> dict[str, Any]:
        """Run an allowed (and, where needed, approved) plan.

        Returns the signed receipt when ``wait``; otherwise ``{"state": "running", …}`` at
        once (the receipt follows in the session's events and from :meth:`receipt_for_plan`).

        Raises:
            PolicyBlockedError: the plan was refused.
            TerminalError: ``TERMINAL_APPROVAL_REQUIRED``, ``TERMINAL_PLAN_STATE``,
                ``TERMINAL_SESSION_BUSY``, ``TERMINAL_PLAN_CHANGED``, ``TERMINAL_SPAWN_FAILED``.
        """
        session = self.session(session_id)
        plan = self.get_plan(session_id, plan_id)
        return await self._execute(session, plan, wait=wait, judged_now=False)

    async def run(
        self,
        *,
        session_id: str | None = None,
        argv: list[str] | None = None,
        command: str | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """:meth:`plan`, then, only when the policy allows the plan without approval,
        :meth:`execute` it: ``{"plan", "executed", "receipt"?}``. A plan that needs approval
        (or was refused) is recorded and not run.

        The plan is executed in the same step of the event loop as it was judged, with
        nothing awaited in between: the evaluation :meth:`execute` repeats for a plan
        judged earlier (the executable and the paths may have changed since) would judge
        the same files a few microseconds later, so it is not made twice.

        Raises:
            As :meth:`plan` and :meth:`execute`.
        """
        view = self.plan(session_id=session_id, argv=argv, command=command, cwd=cwd,
                         timeout=timeout, owner=owner)
        decision = view["decision"]
        if not decision["allowed"] or decision["requires_approval"]:
            return {"plan": view, "executed": False}
        session = self.session(view["session_id"])
        plan = self.get_plan(view["session_id"], view["plan_id"])
        receipt = await self._execute(session, plan, wait=True, judged_now=True)
        return {"plan": view, "executed": True, "receipt": receipt}

    async def _execute(self, session: ExecutionSession, plan: Plan, *, wait: bool,
                       judged_now: bool) -> dict[str, Any]:
        """:meth:`execute` of ``plan``; ``judged_now``: the policy judged it in this same
        step of the loop (:meth:`run`), so it is not judged again."""
        session_id = session.session_id
        decision = plan.result.decision
        if plan.state == "refused" or not decision.allowed:
            raise PolicyBlockedError("the policy refused this plan", details=decision.to_dict())
        if plan.state == "planned" and decision.requires_approval:
            raise TerminalError("this plan needs approval before it can run",
                                code="TERMINAL_APPROVAL_REQUIRED",
                                details={"risk": decision.risk, "reasons": list(decision.reasons)})
        if plan.state not in ("planned", "approved"):
            raise TerminalError(f"the plan is {plan.state}", code="TERMINAL_PLAN_STATE",
                                details={"state": plan.state})
        if session.active_plan is not None:
            raise TerminalError("the session already has an active process",
                                code="TERMINAL_SESSION_BUSY",
                                details={"active_plan": session.active_plan})
        if not judged_now:
            self._recheck(plan)
        res = plan.result.resolution
        if res is None:  # an allowed plan always has one; refuse rather than guess
            raise PolicyBlockedError("the plan has no resolution", details=decision.to_dict())
        home = make_home()
        sandbox = SandboxPlan(
            "bwrap" if self.config.sandbox else "none",
            network=decision.network,
            workspace_writable=decision.writes,
        )
        workspace = self.config.workspace
        argv, program = wrap_argv(list(plan.result.argv), res.executable, res.cwd, home,
                                  workspace.roots, sandbox, self.config.sandbox,
                                  workspace.protected)
        env = child_environment(home, workspace.roots) | {"PWD": res.cwd}
        events = session.events
        live = {name: LiveRedactor(self.redactor) for name in ("stdout", "stderr")}

        def on_output(stream: str, text: str) -> None:
            text = live[stream].feed(text, publish=bool(events.subscribers))
            _publish_output(events, plan.plan_id, stream, text)

        try:
            process = RunningProcess.start(
                argv, executable=program, cwd=res.cwd, env=env,
                limit=plan.max_output_bytes, on_output=on_output,
            )
        except OSError as exc:
            remove_home(home)
            now = time.time()
            outcome = ProcessOutcome("spawn_failed", None, None, now, now, 0.0)
            self._finish(plan, outcome, None, sandbox, list(env))
            raise TerminalError(f"the process could not be started: {exc.strerror or exc}",
                                code="TERMINAL_SPAWN_FAILED") from exc
        plan.state = "running"
        session.active_plan = plan.plan_id
        session.process = process
        events.publish("state", plan_id=plan.plan_id, state="running")
        session.task = asyncio.create_task(
            self._complete(session, plan, process, sandbox, sorted(env), home, live)
        )
        if not wait:
            return {"state": "running", "plan_id": plan.plan_id, "session_id": session_id}
        return dict(await asyncio.shield(session.task))

    def _recheck(self, plan: Plan) -> None:
        again = self.engine.evaluate(argv=list(plan.result.argv), cwd=plan.cwd_requested)
        before, after = plan.result, again
        changed = []
        if not after.decision.allowed:
            changed.append("the policy now refuses it: " + "; ".join(after.decision.reasons[:3]))
        elif after.decision.requires_approval and not before.decision.requires_approval:
            changed.append("it now needs approval")
        if before.resolution != after.resolution:
            changed.append("a path or the executable resolves differently")
        if before.inner_executables != after.inner_executables:
            changed.append("a wrapped program resolves differently")
        if changed:
            raise TerminalError("the plan no longer matches what it resolved to: "
                                + "; ".join(changed), code="TERMINAL_PLAN_CHANGED",
                                details={"changes": changed})

    async def _complete(
        self, session: ExecutionSession, plan: Plan, process: RunningProcess,
        sandbox: SandboxPlan, env_names: list[str], home: str, live: dict[str, LiveRedactor],
    ) -> Receipt:
        decision = plan.result.decision
        # No argv, cwd or output on the span: identities, the policy's verdict, the outcome.
        with telemetry.span("terminal.execute", {
                "deepseek_eyes.terminal.plan_id": plan.plan_id,
                "deepseek_eyes.terminal.risk": decision.risk,
                "deepseek_eyes.terminal.sandbox": sandbox.kind,
                "deepseek_eyes.terminal.approved": bool(plan.approval
                                                        and plan.approval.get("approved")),
        }) as span:
            try:
                outcome = await process.finished(plan.timeout)
            finally:
                remove_home(home)
                session.active_plan = None
                session.process = None
                for stream, redactor in live.items():  # the held-back tails, redacted
                    _publish_output(session.events, plan.plan_id, stream, redactor.flush())
            if span is not None:
                span.set_attribute("deepseek_eyes.terminal.status", outcome.status)
                if outcome.exit_code is not None:
                    span.set_attribute("process.exit.code", outcome.exit_code)
                if outcome.status != "completed":
                    telemetry.fail(span, outcome.status)
            return self._finish(plan, outcome, process, sandbox, env_names)

    def _finish(
        self, plan: Plan, outcome: ProcessOutcome, process: RunningProcess | None,
        sandbox: SandboxPlan, env_names: list[str],
    ) -> Receipt:
        res = plan.result.resolution
        if res is None:
            raise PolicyBlockedError("the plan has no resolution")
        redactions = 0

        def scrub(text: str) -> str:
            nonlocal redactions
            out, n = self.redactor.redact(text)
            redactions += n
            return out

        streams: dict[str, ReceiptStream] = {}
        for name in ("stdout", "stderr"):
            cap = process.captures[name] if process else None
            streams[name] = {
                "text": scrub(cap.text()) if cap else "",
                "bytes": cap.total if cap else 0,
                "sha256": cap.sha256 if cap else "",
                "truncated": cap.truncated if cap else False,
            }
        decision = plan.result.decision
        body: Receipt = {
            "schema": RECEIPT_SCHEMA,
            "schema_version": RECEIPT_SCHEMA_VERSION,
            "receipt_id": new_id(),
            "session_id": plan.session_id,
            "plan_id": plan.plan_id,
            "plan_hash": plan.plan_hash,
            "mode": decision.mode,
            "command": {
                "argv": [scrub(a) for a in plan.result.argv],
                "display": scrub(plan.result.display),
                "cwd": scrub(res.cwd),
                "executable": res.executable,
                "executable_sha256": res.executable_sha256,
                "env_names": sorted(env_names),
            },
            "policy": decision.to_dict() | {"reasons": [scrub(r) for r in decision.reasons]},
            "approval": plan.approval or {"approved": False, "required": False},
            "sandbox": sandbox.to_dict(),
            "limits": {"timeout_s": plan.timeout, "max_output_bytes": plan.max_output_bytes},
            "started_at": _iso(outcome.started_at),
            "ended_at": _iso(outcome.ended_at),
            "duration_ms": round(outcome.duration_ms, 3),
            "status": outcome.status,
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "stdout": streams["stdout"],
            "stderr": streams["stderr"],
            "redactions": redactions,
            "sharing_redacted": False,
        }
        body["approval"]["required"] = decision.requires_approval
        receipt, signed_hash = self.receipts.append_hashed(body)
        plan.state = "finished"
        plan.receipt_id = receipt["receipt_id"]
        session = self.sessions.get(plan.session_id)
        if session is not None:
            session.add_receipt(receipt["receipt_id"])
            session.events.publish("finished", plan_id=plan.plan_id, status=outcome.status,
                                   exit_code=outcome.exit_code, signal=outcome.signal,
                                   receipt_id=receipt["receipt_id"])
        self._audit("terminal.execute", plan.plan_id, session=plan.session_id,
                    status=outcome.status, exit_code=outcome.exit_code,
                    duration_ms=round(outcome.duration_ms, 3), sandbox=sandbox.kind,
                    executable_sha256=res.executable_sha256,
                    receipt=receipt["receipt_id"], receipt_sequence=receipt.get("sequence"),
                    # the receipt's exact signed bytes, so the audit chain commits to them
                    receipt_hash=signed_hash)
        return receipt

    # -- control ------------------------------------------------------------------------------

    def _active(self, session_id: str) -> tuple[ExecutionSession, RunningProcess]:
        session = self.session(session_id)
        if session.process is None or not session.process.running:
            raise TerminalError("the session has no running process",
                                code="TERMINAL_NO_ACTIVE_PROCESS")
        return session, session.process

    def pause(self, session_id: str) -> dict[str, Any]:
        session, process = self._active(session_id)
        process.pause()
        session.events.publish("state", plan_id=session.active_plan, state="paused")
        self._audit("terminal.pause", session.active_plan, session=session_id)
        return {"session_id": session_id, "plan_id": session.active_plan, "state": "paused"}

    def resume(self, session_id: str) -> dict[str, Any]:
        session, process = self._active(session_id)
        process.resume()
        session.events.publish("state", plan_id=session.active_plan, state="running")
        self._audit("terminal.resume", session.active_plan, session=session_id)
        return {"session_id": session_id, "plan_id": session.active_plan, "state": "running"}

    async def cancel(self, session_id: str) -> dict[str, Any]:
        session, process = self._active(session_id)
        plan_id = session.active_plan
        task = session.task
        process.kill("cancelled")
        self._audit("terminal.cancel", plan_id, session=session_id)
        if task is not None:
            return dict(await asyncio.shield(task))
        return {"session_id": session_id, "plan_id": plan_id, "state": "cancelled"}

    # -- receipts -----------------------------------------------------------------------------

    # The public methods answer plain dicts: the transports and the runtime take
    # dict[str, Any]. The shapes are terminal.records' (Receipt, PlanView, ...).

    def receipt(self, receipt_id: str) -> dict[str, Any]:
        return dict(self.receipts.get(receipt_id))

    async def receipt_for_plan(
        self, session_id: str, plan_id: str, wait_s: float = 0.0
    ) -> dict[str, Any] | None:
        """The plan's receipt, waiting up to ``wait_s`` (a finite number of seconds in
        ``[0, MAX_WAIT_S]``) for a running plan to finish.

        Raises:
            TerminalError: ``TERMINAL_ARGUMENT_INVALID``, ``TERMINAL_SESSION_NOT_FOUND``,
                ``TERMINAL_PLAN_NOT_FOUND``.
        """
        wait_s = number(wait_s, "wait_s", minimum=0.0, maximum=MAX_WAIT_S)
        plan = self.get_plan(session_id, plan_id)
        session = self.sessions.get(session_id)
        if plan.receipt_id is None and wait_s > 0 and session and session.task and (
            session.active_plan == plan_id
        ):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(session.task), wait_s)
        return dict(self.receipts.get(plan.receipt_id)) if plan.receipt_id else None

    def share(self, receipt_id: str) -> dict[str, Any]:
        return dict(share_export(self.receipts.get(receipt_id), self.keyring))

    # -- lifecycle ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """End every session and wait for their processes' receipts."""
        tasks = [s.task for s in self.sessions.values() if s.task and not s.task.done()]
        for session in list(self.sessions.values()):
            self._end_session(session, "closed")
        for task in tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 15.0)
        self.receipts.close()

    def _audit(self, kind: str, subject: str | None, **fields: Any) -> None:
        if self.audit is not None:
            self.audit.append(kind, subject, **fields)


def _publish_output(events: SessionEvents, plan_id: str, stream: str, text: str) -> None:
    if text:
        events.publish("output", plan_id=plan_id, stream=stream, data=text)
