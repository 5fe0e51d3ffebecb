"""A gateway's terminal plans that wait for a person, listed and decided from any replica.

The terminal service runs inside ``serve``'s process, and a plan waits in it: the turn
that planned it watches the plan's state (:class:`~deepseek_eyes.runtime.approval.
ConsoleWait`). Behind a load balancer the person's console may be another replica's, so
each waiting plan is also a row of :class:`~deepseek_eyes.store.approvals.PendingApprovals`
(kind ``plan``, id ``<session>/<plan>``), with what the console shows of it (the plan's
own view: the command as judged, no output, no environment).

:class:`SharedPlans` keeps those rows true: every :data:`POLL_S` while a plan waits (no
database work when none waits) it writes the plans that began to wait, applies the
decisions other replicas took (the service's own ``approve``/``deny``, ``via`` the
console, ``by`` the person who decided), and removes the rows of plans that stopped
waiting. A decision in this replica's own console takes the same compare-and-set first
(:func:`decide_plan`), then applies at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Literal

from deepseek_eyes.errors import StoreError, TerminalError
from deepseek_eyes.store.approvals import HEARTBEAT_S, PendingApprovals, replica_name
from deepseek_eyes.terminal.service import TerminalService

__all__ = ["POLL_S", "SharedPlans", "decide_plan", "plan_key", "shared_plans"]

#: How often waiting plans are synchronised with the shared rows.
POLL_S = 0.2
#: The fields of a plan's view other replicas' consoles are shown.
_SHOWN = ("plan_id", "session_id", "created_at", "argv_visible", "display", "cwd",
          "decision", "owner", "limits", "state")


def plan_key(session_id: str, plan_id: str) -> str:
    return f"{session_id}/{plan_id}"


def _apply(service: TerminalService, session_id: str, plan_id: str, verdict: str,
           by: str) -> dict[str, Any]:
    """A decision applied to the plan here (once: a plan already in that state is left)."""
    plan = service.get_plan(session_id, plan_id)
    wanted = "approved" if verdict == "approve" else "denied"
    if plan.state == wanted:
        return plan.to_dict()
    if verdict == "approve":
        return service.approve(session_id, plan_id, via="console", by=by)
    return service.deny(session_id, plan_id, via="console", by=by)


def decide_plan(service: TerminalService | None, board: PendingApprovals, session_id: str,
                plan_id: str, verdict: Literal["approve", "deny"], person: str
                ) -> dict[str, Any]:
    """A person's decision on a plan waiting here or on another replica: the shared row's
    compare-and-set (the first decision wins), then, for a plan of this process, at once.

    Raises:
        TerminalError: ``TERMINAL_PLAN_STATE`` (decided already, here or elsewhere),
            ``TERMINAL_SESSION_NOT_FOUND`` (its session ended, or its replica is gone),
            ``TERMINAL_PLAN_NOT_FOUND``; the service's own refusals.
        StoreError: the store's codes.
    """
    key = plan_key(session_id, plan_id)
    try:
        outcome, row = board.decide("plan", key, verdict, via="console", by=person)
    except StoreError:
        if service is None or session_id not in service.sessions:
            raise
        outcome, row = "missing", None  # the database away: this process decides alone
    if outcome == "taken" and row is not None:
        raise TerminalError(f"the plan was {row.decision}d already by {row.by or 'someone'}",
                            code="TERMINAL_PLAN_STATE",
                            details={"state": "approved" if row.decision == "approve"
                                     else "denied"})
    if service is not None and (session_id in service.sessions or outcome == "missing"):
        # This process's plan (or nobody's): the service decides, and refuses, as ever.
        if verdict == "approve":
            return service.approve(session_id, plan_id, via="console", by=person)
        return service.deny(session_id, plan_id, via="console", by=person)
    if outcome == "expired" and row is not None:
        raise TerminalError("the plan waited in a gateway replica that is gone",
                            code="TERMINAL_SESSION_NOT_FOUND",
                            details={"replica": replica_name(row.owner)})
    if outcome == "missing" or row is None:
        raise TerminalError("no plan has that id in this session",
                            code="TERMINAL_PLAN_NOT_FOUND")
    return {**row.shown, "state": "approved" if verdict == "approve" else "denied",
            "replica": replica_name(row.owner)}


def shared_plans(board: PendingApprovals, known: set[str]) -> list[dict[str, Any]]:
    """Plans waiting in other processes (rows this console's service does not hold),
    oldest first, ``expired`` when their replica is gone."""
    now = time.time()
    out = []
    for row in board.listing("plan"):
        if row.id in known:
            continue
        live = row.live(now)
        out.append({**row.shown, "state": "planned" if live else "expired",
                    "ended": None if live else "its gateway replica is gone",
                    "replica": replica_name(row.owner)})
    return out


class SharedPlans:
    """Keeps ``board``'s plan rows true to ``service`` while :meth:`run` runs."""

    def __init__(self, service: TerminalService, board: PendingApprovals) -> None:
        self._service = service
        self._board = board
        self._published: set[str] = set()
        self._beat_at = 0.0

    async def run(self) -> None:
        """Until cancelled; the rows this process wrote are removed then."""
        try:
            while True:
                await asyncio.sleep(POLL_S)
                if not self._published and not self._service.waiting_count():
                    continue  # nothing waits: no database work at all
                with contextlib.suppress(StoreError):
                    await self.sync()
        finally:
            with contextlib.suppress(StoreError):
                for key in list(self._published):
                    await asyncio.to_thread(self._board.remove, "plan", key)

    async def sync(self) -> None:
        """One look: publish, apply decisions, withdraw (see the module docstring).

        Raises:
            StoreError: the store's codes (the next look tries again).
        """
        service, board = self._service, self._board
        for row in await asyncio.to_thread(board.decided_here, "plan"):
            session_id, _, plan_id = row.id.partition("/")
            with contextlib.suppress(TerminalError):
                _apply(service, session_id, plan_id, str(row.decision), row.by or "")
        waiting = {plan_key(str(p["session_id"]), str(p["plan_id"])): p
                   for p in service.waiting() if p.get("state") == "planned"}
        for key, plan in waiting.items():
            if key not in self._published:
                shown = {k: plan.get(k) for k in _SHOWN}
                await asyncio.to_thread(board.put, "plan", key, shown,
                                        float(plan["created_at"]))
                self._published.add(key)
        for key in self._published - waiting.keys():
            await asyncio.to_thread(board.remove, "plan", key)
            self._published.discard(key)
        if self._published and time.monotonic() - self._beat_at >= HEARTBEAT_S:
            self._beat_at = time.monotonic()
            await asyncio.to_thread(board.beat)
