"""The event bus: bounded queues, drop-and-mark, isolation, cleanup."""

from __future__ import annotations

import pytest

from deepseek_eyes.terminal.execution.events import EventBus

pytestmark = pytest.mark.anyio


async def test_slow_subscriber_drops_and_is_told_while_fast_one_gets_all() -> None:
    bus = EventBus(maxsize=4)
    events = bus.open("s1")
    slow = events.subscribe()
    fast = events.subscribe()
    assert slow is not None
    assert fast is not None
    got_fast = []
    for i in range(10):
        events.publish("output", data=str(i))
        got_fast.append((await fast.queue.get())["data"])  # the fast one keeps up
    assert got_fast == [str(i) for i in range(10)]
    assert slow.queue.qsize() == 4
    assert slow.dropped == 6
    for _ in range(4):
        slow.queue.get_nowait()
    events.publish("output", data="after")
    marker = slow.queue.get_nowait()
    assert marker == {"type": "dropped", "count": 6}
    assert slow.queue.get_nowait()["data"] == "after"


async def test_sessions_are_isolated_and_closing_ends_streams() -> None:
    bus = EventBus(maxsize=16)
    a = bus.open("a")
    b = bus.open("b")
    sub_a = a.subscribe()
    sub_b = b.subscribe()
    assert sub_a is not None
    assert sub_b is not None
    a.publish("output", data="for a")
    b.publish("output", data="for b")
    bus.close("a", "expired")
    seen_a = [e async for e in sub_a.events()]
    assert [e["type"] for e in seen_a] == ["output", "closed"]
    assert all(e["session_id"] == "a" for e in seen_a)
    assert sub_b.queue.get_nowait()["data"] == "for b"
    assert bus.get("a") is None
    assert a.subscribe() is None
    assert bus.subscriber_count() == 1


async def test_close_makes_room_for_the_end_marker() -> None:
    bus = EventBus(maxsize=2)
    events = bus.open("s")
    sub = events.subscribe()
    assert sub is not None
    for i in range(5):
        events.publish("output", data=str(i))
    bus.close("s", "closed")
    seen = [e async for e in sub.events()]
    assert len(seen) <= 2
