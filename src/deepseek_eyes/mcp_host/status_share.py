"""This replica's MCP servers' status, written where every replica's console reads it.

The manager's watch stream (:class:`~deepseek_eyes.mcp_host.events.StatusEvents`) says
when a server changed; this writes the servers' snapshot
(:class:`~deepseek_eyes.store.replica_status.ReplicaStatus`) after a change, at most once
per :data:`MIN_INTERVAL_S` (a flapping server costs one write a second, not one per
flap), and every :data:`~deepseek_eyes.store.replica_status.REFRESH_S` whatever happened,
so the other replicas can tell a quiet replica from a stopped one. A failed write is tried
at the next change or refresh: the status is a snapshot, nothing accumulates.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store.replica_status import REFRESH_S, ReplicaStatus, ServerStatus

if TYPE_CHECKING:
    from deepseek_eyes.mcp_host.manager import McpManager

__all__ = ["MIN_INTERVAL_S", "StatusShare"]

#: The least time between two snapshots (a change waits for the next one).
MIN_INTERVAL_S = 1.0


def _status(view: dict[str, Any]) -> ServerStatus:
    latency = view.get("latency_ms")
    return ServerStatus(str(view.get("id")), view.get("status"),
                        float(latency) if isinstance(latency, int | float) else None,
                        view.get("last_error"))


class StatusShare:
    """Writes ``manager``'s status snapshot to ``board`` while :meth:`run` runs."""

    def __init__(self, manager: McpManager, board: ReplicaStatus) -> None:
        self._manager = manager
        self._board = board
        self._changed = asyncio.Event()

    async def run(self) -> None:
        """Until cancelled; the replica's rows are removed then."""
        try:
            async with self._manager.events.subscribe() as events:
                follower = asyncio.create_task(self._follow(events))
                try:
                    await self._write_loop()
                finally:
                    follower.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await follower
        finally:
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(self._board.forget)

    async def _follow(self, events: Any) -> None:
        async for _ in events:
            self._changed.set()

    async def _write_loop(self) -> None:
        wrote_none = False  # the last snapshot written held no server: nothing to refresh
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), REFRESH_S)
            self._changed.clear()
            servers = [_status(v) for v in self._manager.status()]
            if servers or not wrote_none:  # a gateway without MCP servers writes once
                with contextlib.suppress(StoreError):
                    await asyncio.to_thread(self._board.write, servers, only=True)
                    wrote_none = not servers
            await asyncio.sleep(MIN_INTERVAL_S)
