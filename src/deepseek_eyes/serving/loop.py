"""The event loop a server runs on: uvloop where it is installed, asyncio's otherwise.

``uvicorn`` picks uvloop only when it creates the loop itself (``uvicorn.run``); a server
started inside our own ``asyncio.run`` (the gateway, which opens its data directory and
runtime first) ran on asyncio's pure-Python selector loop. uvloop (a dependency on Linux
and macOS) runs the same coroutines, subprocesses and signal handlers with a loop written
in C: less time per turn spent scheduling callbacks and polling sockets.

:func:`settle_heap` tunes the cyclic garbage collector once a server has started. A turn
allocates a container object for every message of the history its client resends, and
CPython's default (a young collection every 700 allocations, a full one whenever the
survivors grew by a quarter) made the collector walk the whole heap, the imported
modules included, again and again: about 12 ms of every continued turn at 10,000
messages (``bench/history.py``), and a full collection now and then on a short turn.
What start-up built lives as long as the process, so it is frozen out of every
collection; the young generation is collected every :data:`YOUNG_COLLECTION` allocations
instead. Only reference cycles wait longer for it (most of a turn's garbage is freed by
reference counting the moment it is dropped), so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["YOUNG_COLLECTION", "run", "settle_heap"]

T = TypeVar("T")

#: Allocations between two collections of the young generation once settled (CPython: 700).
YOUNG_COLLECTION = 50_000


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop when it can be imported."""
    try:
        import uvloop
    except ImportError:  # Windows, or a platform without a wheel
        return asyncio.run(main)
    return uvloop.run(main)


def settle_heap() -> None:
    """Freeze what start-up built out of the collector's reach and collect the young
    generation less often (see the module docstring). Call once, when serving starts."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION, middle, old)
