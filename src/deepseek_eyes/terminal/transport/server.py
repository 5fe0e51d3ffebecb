"""The MCP surface of the terminal: tools, one prompt, and resources, on the official SDK.

The tools are thin: each maps to one :class:`TerminalService` call and turns a
:class:`DeepSeekEyesError` into a tool error whose text is ``{"code", "message",
"details"}``. Their names and truthful annotations are the terminal's one table
(:mod:`~deepseek_eyes.terminal.transport.tools`), which the runtime's ``terminal`` source
reads too.

The same server object serves stdio and Streamable HTTP; the SDK negotiates the protocol
revision (the stateless ``2026-07-28`` and the session-based handshake revisions).

Connections own sessions. Each tool call is attributed to a connection
(:func:`~deepseek_eyes.serving.connections.connection_owner`, shared with the browser):
over stdio, the process's one client; over HTTP with a handshake revision, the MCP session
(``Mcp-Session-Id``, as the SDK's ``Connection`` records it); over HTTP with the stateless
``2026-07-28`` revision there is no connection at all (the SDK builds a fresh ``Connection``
per request, with no session id, and the envelope's client info is whatever the client says),
so every stateless request is one owner, the holder of the bearer token speaking that
revision. A plan without ``session_id`` goes to its owner's default session, and every tool
that names a session acts only on a session its caller owns (another's is
``TERMINAL_SESSION_NOT_FOUND``); the console API, authenticated by the HTTP token, may act on
every session.

Numeric arguments are taken raw (the SDK would otherwise coerce ``"5"``, ``true`` and
``"NaN"`` into floats) and checked by the service: finite numbers in range, or
``TERMINAL_ARGUMENT_INVALID``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import WithJsonSchema

from deepseek_eyes.errors import DeepSeekEyesError, TerminalError
from deepseek_eyes.serving.connections import STATELESS_OWNER, STDIO_OWNER, connection_owner
from deepseek_eyes.serving.log_level import accept_log_level
from deepseek_eyes.terminal.arguments import number
from deepseek_eyes.terminal.service import MAX_WAIT_S, TerminalService
from deepseek_eyes.terminal.transport.tools import ANNOTATIONS
from deepseek_eyes.toolkit.registration import capability_server, mcp_annotations

__all__ = ["STATELESS_OWNER", "STDIO_OWNER", "Advisor", "build_mcp_server", "connection_owner"]


# Numbers arrive unconverted (Any) so the service can refuse bools, strings and NaN itself;
# the published schema still says "number".
TimeoutArg = Annotated[Any, WithJsonSchema({
    "type": ["number", "null"], "exclusiveMinimum": 0,
    "description": "Seconds before the process group is killed; at most the server's "
                   "max_timeout (terminal://policy). Default: the server's timeout.",
})]
WaitArg = Annotated[Any, WithJsonSchema({
    "type": "number", "minimum": 0, "maximum": MAX_WAIT_S,
    "description": "Seconds to wait for a running plan to finish.",
})]

INSTRUCTIONS = (
    "A terminal that never runs model output directly. Call terminal_plan with an argv list "
    "(or a command string, parsed without any shell features), read the decision (allowed, "
    "requires_approval, risk, reasons), get approval when asked (a person approves in the "
    "terminal's approval console; terminal_approve works only where the server lets clients "
    "approve), then terminal_execute the plan. Every run ends in a signed receipt."
)

WORKFLOW_PROMPT = """You have a policy-guarded terminal. Use it like this:

1. terminal_plan(argv=[...], cwd=..., session_id=...): describe ONE command as an argv list.
   A command string is accepted but is split without shell features: pipes, redirections,
   `;`, `&&`, `$(...)`, `$VAR`, globs and newlines are refused, not run.
2. Read the decision: `allowed`, `requires_approval`, `risk` (low/medium/high/critical),
   `effects` and `reasons`. A refused plan can never run; plan something else.
3. If `requires_approval` is true, ask the user to approve it. {approve_step}
4. terminal_execute(session_id, plan_id) runs it without a shell, in a reduced
   environment, with a timeout and output limits, and returns a signed receipt.
5. terminal_pause / terminal_resume / terminal_cancel act on the session's running process.
6. terminal_receipt_get / terminal_receipt_share fetch receipts; the share export hides
   the command, cwd, argv and output.

The mode is {mode}. Workspace roots: {roots}.
"""

_APPROVE_STEPS = {
    "person": "A person approves it in the terminal's approval console; terminal_approve is "
              "refused here (TERMINAL_SELF_APPROVAL_REFUSED). Wait for the user, then execute.",
    "mcp-client": "Once the user agreed, call terminal_approve(session_id, plan_id) (or the "
                  "user approves in the console). Never approve on your own initiative.",
}


class Advisor(Protocol):
    """An optional model that explains plans or suggests commands, as text only."""

    async def advise(self, question: str) -> str: ...


#: What every tool answers: the value as ``structuredContent`` and as its JSON text. The
#: SDK publishes the ``outputSchema`` of the ``dict`` (an object) and checks each answer
#: against it, as it did when the tools returned the dict itself; the text is compact
#: JSON, built here once, where the SDK's own conversion indented it (a third more bytes
#: for the client to read, on every ``terminal_run``).
Answer = Annotated[CallToolResult, dict[str, Any]]


def _answer(value: dict[str, Any]) -> CallToolResult:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=value)


def _error_text(exc: DeepSeekEyesError) -> str:
    return json.dumps(exc.to_dict(), ensure_ascii=False)


async def _guard(call: Awaitable[dict[str, Any]]) -> CallToolResult:
    try:
        return _answer(await call)
    except DeepSeekEyesError as exc:
        raise ToolError(_error_text(exc)) from None


async def _value(value: CallToolResult) -> CallToolResult:
    return value


def _sync(fn: Callable[[], dict[str, Any]]) -> Coroutine[Any, Any, CallToolResult]:
    try:
        return _value(_answer(fn()))
    except DeepSeekEyesError as exc:
        raise ToolError(_error_text(exc)) from None


def _registrar(mcp: MCPServer) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that adds a tool under its function's name with the table's annotations
    (:data:`~deepseek_eyes.terminal.transport.tools.ANNOTATIONS`); its typed signature is
    the schema the SDK publishes and checks, its docstring the description."""

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        mcp.add_tool(fn, annotations=mcp_annotations(ANNOTATIONS[fn.__name__]))
        return fn

    return add


def build_mcp_server(
    service: TerminalService, advisor: Advisor | None = None, *, reaper: bool = True
) -> MCPServer:
    """The terminal's MCP server. With ``reaper`` its lifespan runs the session reaper (for
    stdio; the HTTP app runs one reaper for the whole process instead, because the SDK
    enters this lifespan once per HTTP session)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        if not reaper:
            yield None
            return
        task = asyncio.create_task(service.run_reaper())
        try:
            yield None
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    mcp = capability_server("terminal", "terminal", INSTRUCTIONS, lifespan)
    tool = _registrar(mcp)

    @tool
    async def terminal_plan(
        ctx: Context,
        argv: list[str] | None = None,
        command: str | None = None,
        cwd: str | None = None,
        session_id: str | None = None,
        timeout_s: TimeoutArg = None,
    ) -> Answer:
        """Judge one command (argv list, or a string parsed WITHOUT shell features) and
        record a plan. Returns the decision (allowed, requires_approval, risk, effects,
        reasons). Runs nothing. Without session_id the plan goes to this connection's
        default session (opened when needed)."""
        return await _sync(lambda: service.plan(
            session_id=session_id, argv=argv, command=command, cwd=cwd, timeout=timeout_s,
            owner=connection_owner(ctx)))

    def own(ctx: Context, session_id: str) -> None:
        service.session(session_id, owner=connection_owner(ctx))

    async def owned(
        ctx: Context, session_id: str, act: Callable[[], dict[str, Any]]
    ) -> CallToolResult:
        """``act`` on a session of the caller's own connection (else not found)."""
        def call() -> dict[str, Any]:
            own(ctx, session_id)
            return act()
        return await _sync(call)

    async def owned_async(
        ctx: Context, session_id: str, act: Callable[[], Awaitable[dict[str, Any]]]
    ) -> CallToolResult:
        async def call() -> dict[str, Any]:
            own(ctx, session_id)
            return await act()
        return await _guard(call())

    def credential(ctx: Context) -> str:
        """What a client's approval is recorded as given by: the stdio pipe, or the MCP
        bearer token (every HTTP connection holds the same one)."""
        return "mcp-stdio" if connection_owner(ctx) == STDIO_OWNER else "mcp-token"

    @tool
    async def terminal_approve(ctx: Context, session_id: str, plan_id: str) -> Answer:
        """Approve a plan whose decision requires approval, only after the user agreed, and
        only where the server lets clients approve their own plans (terminal.approvals =
        "mcp-client"); otherwise a person approves in the console and this is refused with
        TERMINAL_SELF_APPROVAL_REFUSED."""
        return await owned(ctx, session_id, lambda: service.approve(
            session_id, plan_id, via="client", by=credential(ctx)))

    @tool
    async def terminal_deny(ctx: Context, session_id: str, plan_id: str) -> Answer:
        """Deny a plan; it can never run."""
        return await owned(ctx, session_id, lambda: service.deny(
            session_id, plan_id, via="client", by=credential(ctx)))

    @tool
    async def terminal_execute(
        ctx: Context, session_id: str, plan_id: str, wait: bool = True
    ) -> Answer:
        """Run an allowed (and, when required, approved) plan without a shell, inside the
        limits. Returns the signed receipt, or {"state": "running"} when wait is false."""
        return await owned_async(ctx, session_id,
                                 lambda: service.execute(session_id, plan_id, wait=wait))

    @tool
    async def terminal_run(
        ctx: Context,
        argv: list[str] | None = None,
        command: str | None = None,
        cwd: str | None = None,
        session_id: str | None = None,
        timeout_s: TimeoutArg = None,
    ) -> Answer:
        """Plan one command and, only when the policy allows it WITHOUT approval, execute it
        in the same call. Returns {"plan", "executed", "receipt"?}: a plan that needs
        approval (or was refused) is recorded and not run; approve it and call
        terminal_execute as usual."""
        return await _guard(service.run(
            session_id=session_id, argv=argv, command=command, cwd=cwd, timeout=timeout_s,
            owner=connection_owner(ctx)))

    @tool
    async def terminal_cancel(ctx: Context, session_id: str) -> Answer:
        """Kill the session's running process group; returns its receipt."""
        return await owned_async(ctx, session_id, lambda: service.cancel(session_id))

    @tool
    async def terminal_pause(ctx: Context, session_id: str) -> Answer:
        """Stop (SIGSTOP) the session's running process group."""
        return await owned(ctx, session_id, lambda: service.pause(session_id))

    @tool
    async def terminal_resume(ctx: Context, session_id: str) -> Answer:
        """Continue (SIGCONT) the session's paused process group."""
        return await owned(ctx, session_id, lambda: service.resume(session_id))

    @tool
    async def terminal_session_open(ctx: Context) -> Answer:
        """Open an execution session (plans, receipts, one process at a time) owned by this
        connection."""
        return await _sync(lambda: service.open_session(owner=connection_owner(ctx)))

    @tool
    async def terminal_session_close(ctx: Context, session_id: str) -> Answer:
        """Close a session; its running process group is killed."""
        return await owned(ctx, session_id, lambda: service.close_session(session_id))

    @tool
    async def terminal_session_status(ctx: Context, session_id: str) -> Answer:
        """The session's plans, active process and receipt ids."""
        return await _sync(
            lambda: service.session(session_id, owner=connection_owner(ctx)).to_dict())

    @tool
    async def terminal_receipt_get(
        ctx: Context,
        receipt_id: str | None = None,
        session_id: str | None = None,
        plan_id: str | None = None,
        wait_s: WaitArg = 0.0,
    ) -> Answer:
        """A signed receipt, by receipt_id or by session_id + plan_id (optionally waiting up
        to wait_s seconds for a running plan to finish)."""
        async def get() -> dict[str, Any]:
            number(wait_s, "wait_s", minimum=0.0, maximum=MAX_WAIT_S)
            if receipt_id is not None:
                return service.receipt(receipt_id)
            if session_id is None or plan_id is None:
                raise TerminalError("give receipt_id, or session_id and plan_id",
                                    code="TERMINAL_RECEIPT_NOT_FOUND")
            own(ctx, session_id)
            found = await service.receipt_for_plan(session_id, plan_id, wait_s)
            if found is None:
                raise TerminalError("the plan has no receipt yet",
                                    code="TERMINAL_RECEIPT_NOT_FOUND")
            return found
        return await _guard(get())

    @tool
    async def terminal_receipt_share(receipt_id: str) -> Answer:
        """A share-safe export of a receipt: command, cwd, argv and output redacted, signed."""
        return await _sync(lambda: service.share(receipt_id))

    @tool
    async def terminal_advise(question: str) -> Answer:
        """Ask the optional advisory model to explain a plan or suggest a command. The answer
        is text only: nothing it says runs unless you plan, get approval and execute it."""
        if advisor is None:
            raise ToolError(_error_text(TerminalError(
                "no advisory model is configured", code="TERMINAL_ADVISOR_UNAVAILABLE")))
        try:
            text = await asyncio.wait_for(advisor.advise(question[:4000]), 120)
        except (TimeoutError, DeepSeekEyesError) as exc:
            raise ToolError(_error_text(TerminalError(
                f"the advisory model failed: {type(exc).__name__}",
                code="TERMINAL_ADVISOR_UNAVAILABLE"))) from None
        return _answer({"advice": text, "executed": False,
                        "note": "Advisory text only. Nothing was planned or run."})

    @mcp.prompt(name="terminal_workflow", title="How to use the terminal")
    def terminal_workflow() -> str:
        """The plan → approve → execute workflow, the modes and the refusals."""
        return WORKFLOW_PROMPT.format(
            mode=service.config.mode, roots=", ".join(service.config.workspace.roots),
            approve_step=_APPROVE_STEPS.get(service.config.approvals, _APPROVE_STEPS["person"]))

    @mcp.resource("terminal://policy", name="policy", mime_type="application/json",
                  description="The mode, workspace roots, sandbox and what each mode allows.")
    def policy_resource() -> str:
        return json.dumps(policy_summary(service), indent=2)

    @mcp.resource("terminal://receipts", name="receipts", mime_type="application/json",
                  description="The most recent signed receipts (newest last).")
    def receipts_resource() -> str:
        return json.dumps(service.receipts.recent(20))

    @mcp.resource("terminal://receipts/{receipt_id}", name="receipt",
                  mime_type="application/json", description="One signed receipt.")
    def receipt_resource(receipt_id: str) -> str:
        return json.dumps(service.receipt(receipt_id))

    accept_log_level(mcp)
    return mcp


def policy_summary(service: TerminalService) -> dict[str, Any]:
    return {
        "mode": service.config.mode,
        "workspaces": list(service.config.workspace.roots),
        "sandbox": "bwrap" if service.config.sandbox else "none",
        "approvals": service.config.approvals,
        "limits": {"timeout_s": service.config.timeout, "max_timeout_s": service.config.max_timeout,
                   "max_output_bytes": service.config.max_output_bytes,
                   "max_sessions": service.config.max_sessions,
                   "session_idle_timeout_s": service.config.session_idle_timeout},
        "modes": {
            "read-only": "reads run; everything else is refused",
            "confirm": "reads run; writes, code, network and unknowns need approval",
            "trusted": "reads, writes and code run; network and unknowns need approval",
        },
        "always_refused": ["shell composition in a command string", "paths outside the "
                           "workspace", "privileged and system programs", "control or invisible "
                           "characters", "programs outside the system directories"],
    }
