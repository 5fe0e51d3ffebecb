"""The gateway's event loop: uvloop where installed (it is a dependency on Linux), and the
served process really runs on it."""

from __future__ import annotations

import asyncio
import sys

import pytest

from deepseek_eyes.serving import loop


def test_run_returns_the_result_on_uvloop_when_installed() -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    module = loop.run(main())
    if sys.platform.startswith("linux"):
        assert module.startswith("uvloop")  # a dependency on Linux: it must be used
    else:
        assert module


def test_run_propagates_the_coroutine_error() -> None:
    async def main() -> None:
        raise LookupError("from the coroutine")

    with pytest.raises(LookupError, match="from the coroutine"):
        loop.run(main())


def test_settle_heap_freezes_start_up_and_collects_the_young_less_often() -> None:
    import gc

    before = gc.get_threshold()
    try:
        kept = [{"built": "at start-up"} for _ in range(100)]
        loop.settle_heap()
        assert gc.get_freeze_count() >= len(kept)  # out of every later collection
        assert gc.get_threshold() == (loop.YOUNG_COLLECTION, *before[1:])
        assert before[0] < loop.YOUNG_COLLECTION
    finally:  # the rest of the test run collects as it did
        gc.unfreeze()
        gc.set_threshold(*before)
