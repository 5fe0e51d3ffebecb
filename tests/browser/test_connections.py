"""The browser pool: a service per owner, bounded, idle ones closed (no browser starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.support import settings
from deepseek_eyes.browser.connections import BrowserPool

pytestmark = pytest.mark.anyio


async def test_a_service_per_owner_bounded_and_idle_ones_closed(tmp_path: Path) -> None:
    now = [0.0]
    pool = BrowserPool(settings(max_sessions=2, session_idle_timeout=60),
                       downloads_dir=tmp_path, clock=lambda: now[0])
    a = await pool.service("a")
    assert await pool.service("a") is a
    b = await pool.service("b")
    assert b is not a
    now[0] = 10
    await pool.service("a")  # a is now the most recently used
    await pool.service("c")  # the third owner closes the least recently used: b
    assert pool.owners() == ["a", "c"]
    now[0] = 65
    assert await pool.close_idle() == []  # a was used at 10, c at 10: not yet idle
    now[0] = 71
    pool.touch("c")
    assert await pool.close_idle() == ["a"]
    assert pool.owners() == ["c"]
    await pool.aclose()
    assert pool.owners() == []
