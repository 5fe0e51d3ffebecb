"""The event loop a server runs on: uvloop where it is installed, asyncio's otherwise.

``uvicorn`` picks uvloop only when it creates the loop itself (``uvicorn.run``); a server
started inside our own ``asyncio.run`` (the gateway, which opens its data directory and
runtime first) ran on asyncio's pure-Python selector loop. uvloop (a dependency on Linux
and macOS) runs the same coroutines, subprocesses and signal handlers with a loop written
in C: less time per turn spent scheduling callbacks and polling sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop when it can be imported."""
    try:
        import uvloop
    except ImportError:  # Windows, or a platform without a wheel
        return asyncio.run(main)
    return uvloop.run(main)
