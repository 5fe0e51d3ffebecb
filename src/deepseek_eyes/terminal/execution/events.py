"""Live events per execution session: bounded queues, drop-and-mark, isolation.

Every execution session has its own :class:`SessionEvents`; a subscriber only ever sees the
events of the session it subscribed to. Each subscriber owns a bounded queue. Publishing
never waits: when a subscriber's queue is full the event is dropped *for that subscriber*
and counted, and the next event it does receive is preceded by a ``dropped`` event with the
count. So a slow console never slows the command or other subscribers, and it always knows
that it missed something.

Closing a session (close, expiry) ends every subscriber's stream with a ``closed`` event and
removes the queues.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["EventBus", "SessionEvents", "Subscriber"]

_CLOSE = object()


class Subscriber:
    def __init__(self, maxsize: int) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.closed = False

    def offer(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.dropped and self.queue.maxsize - self.queue.qsize() >= 2:
            self.queue.put_nowait({"type": "dropped", "count": self.dropped})
            self.dropped = 0
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        while self.queue.full():  # make room for the end marker; the stream is ending anyway
            self.queue.get_nowait()
        self.queue.put_nowait(_CLOSE)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """Events until the session closes or the subscriber is removed."""
        while True:
            item = await self.queue.get()
            if item is _CLOSE:
                return
            yield item


class SessionEvents:
    """The subscribers of one execution session."""

    def __init__(self, session_id: str, maxsize: int, max_subscribers: int = 32) -> None:
        self.session_id = session_id
        self.maxsize = maxsize
        self.max_subscribers = max_subscribers
        self.subscribers: set[Subscriber] = set()
        self.sequence = 0
        self.closed = False

    def subscribe(self) -> Subscriber | None:
        """A new subscriber, or None when the session is closed or has too many."""
        if self.closed or len(self.subscribers) >= self.max_subscribers:
            return None
        sub = Subscriber(self.maxsize)
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)
        sub.closed = True

    def publish(self, kind: str, **fields: Any) -> None:
        if self.closed:
            return
        self.sequence += 1
        event = {"id": self.sequence, "type": kind, "session_id": self.session_id,
                 "ts": time.time(), **fields}
        for sub in self.subscribers:
            sub.offer(event)

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.publish("closed", reason=reason)
        self.closed = True
        for sub in self.subscribers:
            sub.close()
        self.subscribers.clear()


class EventBus:
    """All sessions' events; a session's entry lives exactly as long as the session."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._sessions: dict[str, SessionEvents] = {}

    def open(self, session_id: str) -> SessionEvents:
        events = SessionEvents(session_id, self.maxsize)
        self._sessions[session_id] = events
        return events

    def get(self, session_id: str) -> SessionEvents | None:
        return self._sessions.get(session_id)

    def close(self, session_id: str, reason: str) -> None:
        events = self._sessions.pop(session_id, None)
        if events is not None:
            events.close(reason)

    def subscriber_count(self) -> int:
        return sum(len(s.subscribers) for s in self._sessions.values())
