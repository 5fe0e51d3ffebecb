"""What one ``serve`` process shares with the other replicas for the web console.

Behind a load balancer a person's console lands on any replica, while an ask-first MCP
call waits in the replica that runs it and each replica holds its own MCP connections. So
``serve`` shares its ask-first queue (:meth:`~deepseek_eyes.mcp_host.asking.AskQueue.share`:
listed and decided from any replica) and its terminal's waiting plans
(:class:`~deepseek_eyes.terminal.shared_plans.SharedPlans`), and writes its MCP servers'
status snapshot (:class:`~deepseek_eyes.mcp_host.status_share.StatusShare`) to the store
every replica reads. One process alone behaves as before: it is the only replica its console lists.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.status_share import StatusShare
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.store.approvals import PendingApprovals
from deepseek_eyes.store.replica_status import ReplicaStatus

__all__ = ["share_with_replicas"]


def share_with_replicas(runtime: Runtime, home: DataHome) -> Callable[[], Awaitable[None]]:
    """Share this replica's asks and MCP status (started on the running loop); returns
    the coroutine function that stops sharing (the replica's status rows removed)."""
    host, manager = runtime.mcp_host, runtime.mcp_manager
    if host is not None:
        host.asks.share(PendingApprovals(home.db))
    tasks = []
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
