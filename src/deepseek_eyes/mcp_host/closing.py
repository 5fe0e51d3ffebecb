"""Closing a server's connection under a bound, and remembering a close that failed.

A connection lives in its own task (the SDK's ``Client`` is entered and left in one task),
so closing it is cancelling that task and waiting for its teardown: the SDK's stdio kill
escalation, an HTTP session's end, an in-process server's lifespan exit. A teardown that
does not end within ``close_timeout`` has *failed*, and the still-running task is kept as
that server's pending handle. Seed 000: "a pending failure blocks a duplicate probe or
replacement transport until retrying that exact handle succeeds": until the very same task
ends, a probe, restart or reconfigured replacement of that server is refused
(``MCP_CLOSE_PENDING``) rather than opening a second process or session beside one that may
still hold the first's resources. Each refusal first retries the handle (cancel again, wait
again), so the block lifts as soon as the teardown finishes.

A teardown that ends by raising is over (the task is gone; there is nothing left to retry),
so it is not pending; its exception is consumed rather than left to asyncio's "never
retrieved" warning.
"""

from __future__ import annotations

import asyncio

from deepseek_eyes.errors import McpError

__all__ = ["CLOSE_TIMEOUT_S", "CloseTracker"]

#: Seconds a connection's teardown may take before its close counts as failed.
CLOSE_TIMEOUT_S = 10.0


class CloseTracker:
    """The pending (failed) close of each server, by server id."""

    def __init__(self, close_timeout: float = CLOSE_TIMEOUT_S) -> None:
        self.close_timeout = close_timeout
        self._pending: dict[str, asyncio.Task[None]] = {}

    def pending(self, server_id: str) -> bool:
        return server_id in self._pending

    async def close(self, server_id: str, task: asyncio.Task[None] | None) -> bool:
        """Cancel ``task`` and wait for it at most ``close_timeout``; False (and the task
        kept as the server's pending handle) when it is still running."""
        if task is None or task.done():
            _consume(task)
            return True
        task.cancel()
        if await _ended(task, self.close_timeout):
            return True
        self._pending[server_id] = task
        return False

    async def require_closed(self, server_id: str) -> None:
        """Retry the server's pending close, if any; return once that exact handle ended.

        Raises:
            McpError: ``MCP_CLOSE_PENDING``, the handle is still running.
        """
        task = self._pending.get(server_id)
        if task is None:
            return
        task.cancel()
        if not await _ended(task, self.close_timeout):
            raise self.refusal(server_id)
        del self._pending[server_id]

    def refusal(self, server_id: str) -> McpError:
        return McpError(
            f"{server_id}'s previous connection has not finished closing; nothing new is "
            "opened beside it until it does", code="MCP_CLOSE_PENDING",
            details={"server": server_id, "close_timeout_s": self.close_timeout})


async def _ended(task: asyncio.Task[None], timeout: float) -> bool:
    # asyncio.wait, not wait_for: a timeout must not cancel (again) the task it waits on,
    # and the waiter being cancelled must leave the handle as it is.
    await asyncio.wait({task}, timeout=timeout)
    if not task.done():
        return False
    _consume(task)
    return True


def _consume(task: asyncio.Task[None] | None) -> None:
    if task is not None and task.done() and not task.cancelled():
        task.exception()  # retrieved: its teardown's failure is over with the task
