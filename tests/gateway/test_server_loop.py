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
