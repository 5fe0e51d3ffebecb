"""Fixtures for vision tests: one loopback OpenAI-compatible server for the whole session.

The server decodes every image it is sent (see :mod:`vision.loopback`); tests that need
counters of their own use a tagged behaviour, ``loopback.url("healthy~" + tag)``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vision.loopback import LoopbackVisionServer


@pytest.fixture(scope="session")
def loopback() -> Iterator[LoopbackVisionServer]:
    with LoopbackVisionServer() as server:
        yield server
