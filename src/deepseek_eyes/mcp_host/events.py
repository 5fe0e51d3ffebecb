"""Server status changes as a stream, for ``mcp watch`` and any other management surface.

A subscriber first gets every server's current view, then one event each time a server's
status, plane statuses, generation, last error or pending retry changes. Changes made in
one step (a failure sets the status and the error together) are published once, at the
next turn of the event loop, and only when the published fields really differ from that
server's previous event.

A slow subscriber never blocks the manager and never grows without bound: what waits for
it is at most one event per server, the newest (an older pending event of the same server
is replaced), so it may skip intermediate states but never sees a stale one last.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["EVENT_FIELDS", "StatusEvents", "Subscription"]

#: The view fields whose change makes an event.
EVENT_FIELDS = ("status", "tools_status", "content_status", "generation", "last_error",
                "retry_delay_s")


class Subscription:
    """Events for one subscriber; iterate it (``async for event in sub``)."""

    def __init__(self) -> None:
        self._pending: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._ready = asyncio.Event()
        self._last: dict[str, tuple[Any, ...]] = {}

    def put(self, server_id: str, event: dict[str, Any]) -> None:
        """Queue ``event`` unless it says what this subscriber was last told."""
        key = tuple(event.get(f) for f in EVENT_FIELDS)
        if self._last.get(server_id) == key:
            return
        self._last[server_id] = key
        self._pending.pop(server_id, None)
        self._pending[server_id] = event
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            await self._ready.wait()
            while self._pending:
                _, event = self._pending.popitem(last=False)
                yield event
            self._ready.clear()


class StatusEvents:
    """Fan-out of the manager's status changes; ``view`` returns a server's current view
    (or ``None`` once it is gone)."""

    def __init__(self, view: Callable[[str], dict[str, Any] | None],
                 ids: Callable[[], list[str]]) -> None:
        self._view = view
        self._ids = ids
        self._subscribers: list[Subscription] = []
        self._scheduled: set[str] = set()

    def changed(self, server_id: str) -> None:
        """A watched field of ``server_id`` changed; publish at the next loop turn."""
        if not self._subscribers or server_id in self._scheduled:
            return
        self._scheduled.add(server_id)
        try:
            asyncio.get_running_loop().call_soon(self._flush, server_id)
        except RuntimeError:  # no loop (a state changed outside one): publish now
            self._flush(server_id)

    def _flush(self, server_id: str) -> None:
        self._scheduled.discard(server_id)
        view = self._view(server_id)
        if view is None:
            return
        event = {"event": "status", "ts": round(time.time(), 3), **view}
        for sub in self._subscribers:
            sub.put(server_id, event)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        """Every server's current view first, then its changes, while the block runs."""
        sub = Subscription()
        for server_id in self._ids():
            view = self._view(server_id)
            if view is not None:
                sub.put(server_id, {"event": "status", "ts": round(time.time(), 3), **view})
        self._subscribers.append(sub)
        try:
            yield sub
        finally:
            self._subscribers.remove(sub)
