"""``deepseek-eyes desktop serve --http --xvfb``: the real process on a loopback port with
its own headless desktop, driven by the official SDK's Streamable HTTP client and by plain
HTTP for the security layer. Two connections share the one desktop, so one's observation
makes the other's older state stale."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from deepseek_eyes.desktop.http import ENV_TOKEN
from desktop.support import require_desktop

pytestmark = pytest.mark.anyio


@dataclass
class Served:
    url: str
    token: str
    described: dict[str, Any]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_desktop()
    home = tmp_path_factory.mktemp("desktop-http-home")
    token = secrets.token_urlsafe(32)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY",
                                                           "DBUS_SESSION_BUS_ADDRESS")}
    process = subprocess.Popen(
        [sys.executable, "-m", "deepseek_eyes", "desktop", "serve", "--http", "--xvfb",
         "--port", "0", "--json"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**env, ENV_TOKEN: token, "DEEPSEEK_EYES_HOME": str(home)})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # bounded by the test timeout
        assert line, process.stderr.read() if process.stderr else ""
        described = json.loads(line)
        yield Served(described["listening"]["url"].removesuffix("/mcp"), token, described)
    finally:
        process.terminate()
        process.communicate(timeout=30)


@asynccontextmanager
async def client(served: Served) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"},
                           timeout=60) as http_client,
        Client(streamable_http_client(served.url + "/mcp", http_client=http_client),
               mode="legacy") as connected,
    ):
        yield connected


async def test_a_token_is_required_and_a_foreign_origin_refused(served: Served) -> None:
    assert served.described["transport"] == "http"
    assert served.described["headless"] is True
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        for headers in ({}, {"authorization": "Bearer wrong"}):
            response = await http.post("/mcp", json=ping, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "DESKTOP_UNAUTHORIZED"
        foreign = await http.post("/mcp", json=ping, headers={
            "authorization": f"Bearer {served.token}", "origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert foreign.json()["error"]["code"] == "DESKTOP_FORBIDDEN"


async def test_two_connections_share_one_desktop_and_its_states(served: Served) -> None:
    async with client(served) as one, client(served) as two:
        first = await one.call_tool("desktop_observe", {})
        assert not first.is_error
        assert first.structured_content is not None
        state = first.structured_content["state_id"]
        second = await two.call_tool("desktop_observe", {})
        assert second.structured_content is not None
        assert second.structured_content["state_id"] != state
        stale = await one.call_tool("desktop_click", {"state_id": state, "x": 5, "y": 5})
        assert stale.is_error
        assert stale.structured_content is not None
        assert stale.structured_content["error"]["code"] == "DESKTOP_STATE_STALE"


def test_http_refuses_to_start_without_a_strong_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV_TOKEN}
    for token, code in ((None, "DESKTOP_TOKEN_MISSING"), ("short", "DESKTOP_TOKEN_WEAK")):
        done = subprocess.run(
            [sys.executable, "-m", "deepseek_eyes", "desktop", "serve", "--http", "--json"],
            env={**env, **({ENV_TOKEN: token} if token else {})}, capture_output=True,
            text=True, timeout=60, check=False)
        assert done.returncode == 1
        assert json.loads(done.stdout)["error"]["code"] == code
