"""What one ``serve`` process shares with the other replicas for the web console.

Behind a load balancer a person's console lands on any replica, while an ask-first MCP
call waits in the replica that runs it and each replica holds its own MCP connections. So
``serve`` shares its ask-first queue (:meth:`~deepseek_eyes.mcp_host.asking.AskQueue.share`:
listed and decided from any replica) and its terminal's waiting plans
(:class:`~deepseek_eyes.terminal.shared_plans.SharedPlans`), and writes its MCP servers'
status snapshot (:class:`~deepseek_eyes.mcp_host.status_share.StatusShare`) to the store
every replica reads. One process alone behaves as before: it is the only replica its console lists.

Every replica also sweeps what gone replicas left: at start and every :data:`SWEEP_EVERY_S`
seconds, the pending approvals whose process died more than an hour ago are deleted
(:meth:`~deepseek_eyes.store.approvals.PendingApprovals.sweep`); one that holds a decision
its process never applied is audited as ``approval.unapplied`` in the same transaction
(:func:`audit_unapplied`). Several replicas sweeping at once delete each row once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from deepseek_eyes.audit.log import AuditLog
from deepseek_eyes.errors import StoreError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.status_share import StatusShare
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.store.approvals import Pending, PendingApprovals, replica_name
from deepseek_eyes.store.replica_status import ReplicaStatus

__all__ = ["SWEEP_EVERY_S", "audit_unapplied", "share_with_replicas", "sweep_approvals"]

#: How often a replica sweeps the pending approvals gone replicas left.
SWEEP_EVERY_S = 600.0


def audit_unapplied(audit: AuditLog) -> Callable[[Pending], None]:
    """What a sweep does with a deleted row that holds a decision: one chained
    ``approval.unapplied`` row (identities only, as ``mcp.ask`` rows: never arguments or
    a command), written in the sweep's transaction."""

    def write(row: Pending) -> None:
        named = {key: row.shown[key] for key in ("server", "tool", "session_id")
                 if isinstance(row.shown.get(key), str)}
        audit.write("approval.unapplied", row.kind, id=row.id, decision=row.decision,
                    via=row.via, by=row.by, decided_at=row.decided_at,
                    replica=replica_name(row.owner), **named)

    return write


async def sweep_approvals(board: PendingApprovals, audit: AuditLog, *,
                          every: float = SWEEP_EVERY_S) -> None:
    """Sweep now and every ``every`` seconds, until cancelled; a store that is away is
    swept at the next turn."""
    unapplied = audit_unapplied(audit)
    while True:
        with contextlib.suppress(StoreError):
            await asyncio.to_thread(board.sweep, unapplied=unapplied)
        await asyncio.sleep(every)


def share_with_replicas(runtime: Runtime, home: DataHome) -> Callable[[], Awaitable[None]]:
    """Share this replica's asks and MCP status (started on the running loop); returns
    the coroutine function that stops sharing (the replica's status rows removed)."""
    host, manager = runtime.mcp_host, runtime.mcp_manager
    if host is not None:
        host.asks.share(PendingApprovals(home.db))
    tasks = [asyncio.create_task(sweep_approvals(PendingApprovals(home.db), home.audit),
                                 name="approvals-sweep")]
    if manager is not None:
        tasks.append(asyncio.create_task(StatusShare(manager, ReplicaStatus(home.db)).run(),
                                         name="mcp-status-share"))
    if runtime.terminal is not None:
        # Imported here: the terminal's modules load only where the terminal runs.
        from deepseek_eyes.terminal.shared_plans import SharedPlans

        tasks.append(asyncio.create_task(
            SharedPlans(runtime.terminal, PendingApprovals(home.db)).run(),
            name="terminal-plans-share"))

    async def stop() -> None:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return stop
