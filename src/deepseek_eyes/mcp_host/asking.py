"""Ask-first tool calls: a call to a tool named in ``mcp.servers[].ask`` waits for a person.

The wait happens in :meth:`McpHost._dispatch <deepseek_eyes.mcp_host.host.McpHost>`, the one
function every tool call goes through, *before* anything is sent to the server: a denial, a
timeout (``mcp.ask_timeout``) or a closed session (the waiting turn was cancelled) is a
refusal with a stable code, and the server never hears of the call.

Why one queue in the host: a person may answer in the web console (which lists this queue
beside the terminal plans) or at ``chat``'s terminal (an :data:`Asker` the turn passes);
whichever answers first decides, and the other is told nothing more. Requests are kept in
memory only: a request outlives nothing but its waiting call, so a restart has nothing to
approve. A bounded ring of decided ones stays listed (as approved, denied, timed out or
expired) so a person sees what became of a request.

Replicas: when the gateway shares its queue (:meth:`AskQueue.share`, ``serve`` does), each
waiting request is also a row of :class:`~deepseek_eyes.store.approvals.PendingApprovals`,
so a console on any replica lists it and decides it (one compare-and-set: the first
decision wins, a second is ``MCP_APPROVAL_DECIDED``). This queue then polls its own rows
every :data:`POLL_S` while anything waits (nothing when nothing waits), and a decision
taken in this process's own console still releases the call at once. The audit row of a
decision is written here, by the queue the call waits in, whichever replica took it: once.

The arguments are shown as canonical ASCII JSON (invisible and non-ASCII characters
escaped), cut to :data:`MAX_SHOWN_ARGUMENT_CHARS`; the audit keeps only their hash.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from deepseek_eyes.errors import McpError, McpPolicyError, StoreError
from deepseek_eyes.mcp_host.policy import matches
from deepseek_eyes.mcp_host.results import canonical_json
from deepseek_eyes.settings import McpServerSettings
from deepseek_eyes.store.approvals import HEARTBEAT_S, Pending, PendingApprovals, replica_name

__all__ = [
    "MAX_SHOWN_ARGUMENT_CHARS",
    "AskQueue",
    "AskRequest",
    "AskState",
    "Asker",
    "asks_first",
    "decide_shared",
    "shared_listing",
]

#: Characters of a call's arguments a person is shown (the rest is cut, and said so).
MAX_SHOWN_ARGUMENT_CHARS = 2000
#: Requests waiting at once; one more is refused rather than queued without bound.
MAX_WAITING = 256
#: How often a queue that shares its requests looks for decisions taken on other replicas.
POLL_S = 0.15

AskState = Literal["waiting", "approved", "denied", "timeout", "expired"]

#: Asks a person elsewhere (chat's terminal) about a request (its :meth:`AskRequest.view`);
#: answers ``approved``, ``denied`` or ``timeout`` (not answered there).
Asker = Callable[[Mapping[str, Any]], Awaitable[str]]


def asks_first(server: McpServerSettings, tool: str) -> bool:
    """Whether a call to ``tool`` of ``server`` waits for a person (``*`` asks for all)."""
    return "*" in server.ask or matches(server.ask, tool)


def shown_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments as a person sees them: canonical ASCII JSON, cut and marked."""
    text = canonical_json(dict(arguments))[0].decode("ascii")
    if len(text) <= MAX_SHOWN_ARGUMENT_CHARS:
        return text
    return text[:MAX_SHOWN_ARGUMENT_CHARS] + f"... [{len(text)} characters, cut]"


@dataclass
class AskRequest:
    """One call waiting for (or decided by) a person."""

    ask_id: str
    server: str
    tool: str
    arguments: str
    arguments_sha256: str
    session_id: str | None
    created_at: float
    state: AskState = "waiting"
    via: str | None = None
    by: str | None = None
    decided_at: float | None = None
    _done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def view(self, now: float | None = None) -> dict[str, Any]:
        """What the console lists and chat's terminal shows (no event, no hash)."""
        now = time.time() if now is None else now
        return {"kind": "mcp", "ask_id": self.ask_id, "server": self.server,
                "tool": self.tool, "arguments": self.arguments,
                "session_id": self.session_id, "state": self.state,
                "created_at": self.created_at, "age_s": round(now - self.created_at, 1),
                "via": self.via, "by": self.by}


def _shown(request: AskRequest) -> dict[str, Any]:
    """What another replica's console lists of a request (its view, less what changes)."""
    return {"server": request.server, "tool": request.tool, "arguments": request.arguments,
            "session_id": request.session_id}


def shared_listing(board: PendingApprovals, known: set[str]) -> list[dict[str, Any]]:
    """The requests waiting in other processes (``board``'s rows this queue does not hold),
    oldest first: ``waiting`` while their process runs, else ``expired`` (never
    approvable), each with the replica it waits in."""
    now = time.time()
    out = []
    for row in board.listing("mcp"):
        if row.id in known:
            continue
        live = row.live(now)
        out.append({**_shared_view(row, now, "waiting" if live else "expired"),
                    "reason": None if live else "its gateway replica is gone"})
    return out


def _shared_view(row: Pending, now: float, state: str, *, via: str | None = None,
                 by: str | None = None) -> dict[str, Any]:
    """A request waiting in another process, in the shape of :meth:`AskRequest.view`."""
    return {"kind": "mcp", "ask_id": row.id, "server": row.shown.get("server"),
            "tool": row.shown.get("tool"), "arguments": row.shown.get("arguments"),
            "session_id": row.shown.get("session_id"), "state": state,
            "created_at": row.created_at, "age_s": round(now - row.created_at, 1),
            "via": via, "by": by, "replica": replica_name(row.owner)}


def decide_shared(board: PendingApprovals, ask_id: str, verdict: Literal["approve", "deny"],
                  *, via: str, by: str) -> dict[str, Any]:
    """A person's answer to a request waiting in another process (any replica): the
    compare-and-set of its row; the process it waits in learns of it at its next look.

    Raises:
        McpError: ``MCP_APPROVAL_NOT_FOUND``, ``MCP_APPROVAL_DECIDED`` (another decision
            came first), ``MCP_APPROVAL_EXPIRED`` (its replica is gone).
        StoreError: the store's codes.
    """
    outcome, row = board.decide("mcp", ask_id, verdict, via=via, by=by)
    details: dict[str, Any] = {"ask_id": ask_id}
    if outcome == "missing" or row is None:
        raise McpError(f"no ask-first call waits under {ask_id!r}",
                       code="MCP_APPROVAL_NOT_FOUND", details=details)
    details["replica"] = replica_name(row.owner)
    if outcome == "taken":
        raise McpError(f"the ask-first call {ask_id!r} was {row.decision}d already by "
                       f"{row.by or 'someone'}; that decision stands",
                       code="MCP_APPROVAL_DECIDED",
                       details={**details, "decision": row.decision, "by": row.by})
    if outcome == "expired":
        raise McpError(f"the ask-first call {ask_id!r} waited in a gateway replica that is "
                       "gone; nothing can release it", code="MCP_APPROVAL_EXPIRED",
                       details=details)
    return _shared_view(row, time.time(), "approved" if verdict == "approve" else "denied",
                        via=via, by=by)


class AskQueue:
    """The ask-first requests of one host: those waiting, then the last decided ones.

    ``record`` receives one audit row per step (``asked``, ``approved``, ``denied``,
    ``timeout``, ``expired``) with the request's identities and argument hash.
    """

    def __init__(self, record: Callable[..., None] | None = None, *, keep: int = 64) -> None:
        self._record = record
        self._waiting: OrderedDict[str, AskRequest] = OrderedDict()
        self._recent: deque[AskRequest] = deque(maxlen=keep)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Where the waiting requests are shared with other replicas (None: this process
        #: alone, as before replicas), and the task that looks for their decisions there.
        self.board: PendingApprovals | None = None
        self._follower: asyncio.Task[None] | None = None

    def share(self, board: PendingApprovals) -> None:
        """List and decide this queue's requests from every replica's console (``serve``
        calls it; see the module docstring)."""
        self.board = board

    def listing(self) -> list[dict[str, Any]]:
        """Waiting requests (oldest first), then the recently decided (newest first)."""
        now = time.time()
        return ([r.view(now) for r in self._waiting.values()]
                + [r.view(now) for r in reversed(self._recent)])

    def waiting_count(self) -> int:
        return len(self._waiting)

    def _audit(self, request: AskRequest, status: str) -> None:
        if self._record is not None:
            self._record(server=request.server, tool=request.tool, status=status,
                         ask_id=request.ask_id, arguments_sha256=request.arguments_sha256,
                         session_id=request.session_id, via=request.via, by=request.by)

    def _finish(self, request: AskRequest, state: AskState, via: str | None = None,
                by: str | None = None) -> None:
        request.state, request.via, request.by = state, via, by
        request.decided_at = time.time()
        self._waiting.pop(request.ask_id, None)
        self._recent.append(request)
        self._audit(request, state)
        if self.board is not None:
            # A row left behind is listed expired once this process is gone.
            with contextlib.suppress(StoreError):
                self.board.remove("mcp", request.ask_id)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(request._done.set)  # safe from the console's thread too
        else:
            request._done.set()

    def decide(self, ask_id: str, verdict: Literal["approve", "deny"], *, via: str,
               by: str) -> dict[str, Any]:
        """A person's answer to a waiting request.

        Raises:
            McpError: ``MCP_APPROVAL_NOT_FOUND`` (decided already, expired, or unknown).
        """
        request = self._waiting.get(ask_id)
        if request is None:
            if self.board is not None and not any(r.ask_id == ask_id for r in self._recent):
                return decide_shared(self.board, ask_id, verdict, via=via, by=by)
            raise McpError(f"no ask-first call waits under {ask_id!r}",
                           code="MCP_APPROVAL_NOT_FOUND", details={"ask_id": ask_id})
        if self.board is not None:
            # The same compare-and-set as on any other replica, so two consoles clicking
            # at once cannot both decide; then the fast path: released here, now. With
            # the database away, this process decides alone, as before replicas.
            try:
                outcome, row = self.board.decide("mcp", ask_id, verdict, via=via, by=by)
            except StoreError:
                outcome, row = "missing", None
            if outcome == "taken" and row is not None:
                raise McpError(f"the ask-first call {ask_id!r} was {row.decision}d already "
                               f"by {row.by or 'someone'}; that decision stands",
                               code="MCP_APPROVAL_DECIDED",
                               details={"ask_id": ask_id, "decision": row.decision,
                                        "by": row.by})
        self._finish(request, "approved" if verdict == "approve" else "denied", via, by)
        return request.view()

    def expire_session(self, session_id: str) -> int:
        """Expire every request of a closed session; how many there were."""
        closed = [r for r in self._waiting.values() if r.session_id == session_id]
        for request in closed:
            self._finish(request, "expired")
        return len(closed)

    async def ask(self, server: str, tool: str, arguments: Mapping[str, Any], *,
                  session_id: str | None, timeout: float, asker: Asker | None = None) -> None:
        """Wait until a person approves the call; return only then.

        Raises:
            McpPolicyError: ``MCP_CALL_DENIED`` (denied, or its session closed),
                ``MCP_APPROVAL_TIMEOUT`` (nobody decided within ``timeout``).
        """
        if len(self._waiting) >= MAX_WAITING:
            raise McpPolicyError(f"{MAX_WAITING} calls wait for a person already; this one "
                                 "was refused", code="MCP_CALL_DENIED",
                                 details={"reason": "queue full"})
        self._loop = asyncio.get_running_loop()
        request = AskRequest(secrets.token_hex(8), server, tool, shown_arguments(arguments),
                             canonical_json(dict(arguments))[1], session_id, time.time())
        self._waiting[request.ask_id] = request
        self._audit(request, "asked")
        if self.board is not None:
            self._publish(request)
        timed_out = False
        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as group:
                    if asker is not None:
                        group.start_soon(self._ask_elsewhere, request, asker)
                    await request._done.wait()
                    group.cancel_scope.cancel()
            timed_out = scope.cancelled_caught
        finally:
            if request.state == "waiting":
                # Still waiting here: either the time ran out, or the waiting turn itself
                # was cancelled (its session closed) and this is the way out.
                self._finish(request, "timeout" if timed_out else "expired")
        if request.state == "approved":
            return
        details = {"ask_id": request.ask_id, "server": server, "tool": tool}
        if request.state == "timeout":
            raise McpPolicyError(f"nobody approved the call to {tool} of {server} within "
                                 f"{timeout:g} s; it was not made",
                                 code="MCP_APPROVAL_TIMEOUT", details=details)
        raise McpPolicyError(f"the call to {tool} of {server} was {request.state} by a "
                             "person's decision or its session's end; it was not made",
                             code="MCP_CALL_DENIED",
                             details={**details, "state": request.state})

    def _publish(self, request: AskRequest) -> None:
        """Share a new request with the other replicas, and follow its row."""
        assert self.board is not None
        try:
            self.board.put("mcp", request.ask_id, _shown(request), request.created_at)
        except StoreError:
            return  # still decided here, as a single process does
        if self._follower is None or self._follower.done():
            self._follower = asyncio.create_task(self._follow(self.board),
                                                 name="mcp-asks-follow")

    async def _follow(self, board: PendingApprovals) -> None:
        """While anything waits: every :data:`POLL_S`, the decisions other replicas took
        on this queue's rows (and, every :data:`HEARTBEAT_S`, that this process lives)."""
        beat_at = time.monotonic()
        while self._waiting:
            await asyncio.sleep(POLL_S)
            if not self._waiting:
                return
            try:
                decided = await asyncio.to_thread(board.decided_here, "mcp")
                if time.monotonic() - beat_at >= HEARTBEAT_S:
                    beat_at = time.monotonic()
                    await asyncio.to_thread(board.beat)
            except StoreError:
                continue  # the database is away for a moment: look again next time
            for row in decided:
                request = self._waiting.get(row.id)
                if request is not None and request.state == "waiting":
                    self._finish(request, "approved" if row.decision == "approve"
                                 else "denied", row.via, row.by)

    async def _ask_elsewhere(self, request: AskRequest, asker: Asker) -> None:
        answer = await asker(request.view())
        if request.state != "waiting" or answer not in ("approved", "denied"):
            return  # decided in the console meanwhile, or not answered at the terminal
        via, by = "cli", "tty"
        if self.board is not None:
            try:
                outcome, row = self.board.decide(
                    "mcp", request.ask_id, "approve" if answer == "approved" else "deny",
                    via=via, by=by)
            except StoreError:
                outcome, row = "missing", None
            if outcome == "taken" and row is not None:  # a console on a replica came first
                answer = "approved" if row.decision == "approve" else "denied"
                via, by = row.via or "console", row.by or ""
        self._finish(request, "approved" if answer == "approved" else "denied", via, by)

