"""A vision server's token is a scope (issue #34 item 3): what ``see`` tells its clients
of the shared evidence cache is what that token's clients sent, not what anyone did."""

from __future__ import annotations

import base64
import json
import time

import pytest
from mcp import Client

from deepseek_eyes.store import scopes
from deepseek_eyes.vision_server.roots import NO_ROOTS
from deepseek_eyes.vision_server.server import build_vision_server
from deepseek_eyes.vision_server.service import VisionService
from vision.loopback import LoopbackVisionServer, solid_png
from vision_server.test_vision_server import rig_of, text_of

pytestmark = pytest.mark.anyio


async def test_cached_is_told_per_token(loopback: LoopbackVisionServer) -> None:
    image = "data:image/png;base64," + base64.b64encode(
        solid_png(48, 32, (10, 120, 240))).decode()
    async with rig_of(loopback, "scopes") as rig:
        mine = VisionService(rig.bridge, NO_ROOTS, scope=scopes.vision("a" * 43))
        theirs = VisionService(rig.bridge, NO_ROOTS, scope=scopes.vision("b" * 43))
        async with Client(build_vision_server(mine, close_on_exit=False),
                          mode="legacy") as a, \
                Client(build_vision_server(theirs, close_on_exit=False),
                       mode="legacy") as b:

            async def cached(client: Client) -> tuple[bool, float]:
                started = time.monotonic()
                result = await client.call_tool("see", {"image": image})
                took = time.monotonic() - started
                assert not result.is_error, text_of(result)
                return bool(result.meta["deepseekeyes"]["cached"]), took  # type: ignore[index]

            assert (await cached(a))[0] is False
            calls = rig.calls  # the acquisition (and the route's probe before it)
            assert (await cached(a))[0] is True
            seen, took = await cached(b)  # another token: new to it, and as slow
            assert seen is False
            (row,) = rig.home.db.query(
                "SELECT acquired_ms FROM evidence_scopes WHERE acquired_ms IS NOT NULL")
            assert took >= row["acquired_ms"] / 1000
            assert (await cached(b))[0] is True
        assert rig.calls == calls  # one acquisition underneath
        assert json.dumps(rig.home.db.query_one(
            "SELECT COUNT(*) AS n FROM evidence_scopes")["n"]) == "2"
