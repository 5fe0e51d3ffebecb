"""``deepseek-eyes browser serve --http``: the real process on a loopback port, driven by the
official SDK's Streamable HTTP client and by plain HTTP for the security layer."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from browser.site import Site
from browser.support import ref, require_browser
from deepseek_eyes.browser.http import ENV_TOKEN

pytestmark = pytest.mark.anyio

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))


@dataclass
class Served:
    url: str
    token: str
    described: dict[str, Any]

    def headers(self, **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}", **extra}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The real server, announced on standard output once its socket is bound (the test
    site is on loopback: the private-network guard lets it through)."""
    require_browser()
    token = secrets.token_urlsafe(32)
    root = tmp_path_factory.mktemp("browser-http")
    config = root / "deepseek-eyes.toml"
    config.write_text("[browser]\nallow_private_network = true\n")
    process = subprocess.Popen(  # noqa: S603 - our own command
        [EXE, "--config", str(config), "browser", "serve", "--http", "--port", "0", "--json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A data directory of its own: a module fixture runs outside the per-test one.
        env={**os.environ, ENV_TOKEN: token, "DEEPSEEK_EYES_HOME": str(root / "home")},
    )
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
async def client(served: Served, mode: str = "legacy") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=served.headers(), timeout=60) as http_client,
        Client(streamable_http_client(served.url + "/mcp", http_client=http_client),
               mode=mode) as connected,
    ):
        yield connected


def _text(result: Any) -> str:
    content = result.content
    assert isinstance(content[0], TextContent)
    return content[0].text


def test_the_announcement(served: Served) -> None:
    where = served.described["listening"]
    assert served.described["transport"] == "http"
    assert where["host"] == "127.0.0.1"
    assert where["port"] > 0
    assert where["url"] == f"http://127.0.0.1:{where['port']}/mcp"


async def test_no_or_a_wrong_token_is_401(served: Served) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        for headers in ({}, {"authorization": "Bearer wrong"},
                        {"authorization": served.token}):
            response = await http.post("/mcp", json=ping, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "BROWSER_UNAUTHORIZED"
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert served.token not in response.text


async def test_a_foreign_origin_or_host_is_refused(served: Served) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        for origin in ("http://evil.example", "null"):
            response = await http.post("/mcp", json=ping,
                                       headers=served.headers(origin=origin))
            assert response.status_code == 403, origin
            assert response.json()["error"]["code"] == "BROWSER_FORBIDDEN"
        rebinding = await http.post("/mcp", json=ping,
                                    headers=served.headers(host="evil.example:80"))
        assert rebinding.status_code == 421
        assert rebinding.json()["error"]["code"] == "BROWSER_FORBIDDEN"
        assert rebinding.headers["x-content-type-options"] == "nosniff"


async def test_navigate_observe_click_and_separate_clients(served: Served, site: Site) -> None:
    async with client(served) as one, client(served) as two:
        first = await one.call_tool("browser_navigate", {"url": site.url("/form.html")})
        assert not first.is_error, _text(first)
        assert first.structured_content is not None
        state = first.structured_content["state_id"]
        counter = ref(_text(first), "Clicked 0 times")
        clicked = await one.call_tool("browser_click", {"state_id": state, "ref": counter})
        assert not clicked.is_error, _text(clicked)
        assert clicked.structured_content is not None
        newest = clicked.structured_content["state_id"]
        observed = await one.call_tool("browser_observe", {"state_id": newest})
        assert "Clicked 1 times" in _text(observed)

        # The second connection has a browser of its own: nothing of the first's page, and
        # the first's newest state id is not its newest state.
        other = await two.call_tool("browser_navigate", {"url": site.url("/table.html")})
        assert not other.is_error, _text(other)
        assert "Clicked" not in _text(other)
        assert other.structured_content is not None
        foreign = await two.call_tool("browser_click", {"state_id": newest, "ref": counter})
        assert foreign.is_error
        assert foreign.structured_content is not None
        assert foreign.structured_content["error"]["code"] == "BROWSER_STATE_STALE"
        assert 'table "Orders"' in _text(foreign)  # its own page, re-observed
        again = await one.call_tool("browser_observe", {"state_id": newest})
        assert not again.is_error, _text(again)
        assert "Clicked 1 times" in _text(again)  # untouched by the other client


async def test_the_stateless_revision_is_one_owner(served: Served, site: Site) -> None:
    async with client(served, "2026-07-28") as stateless:
        first = await stateless.call_tool("browser_navigate", {"url": site.url("/tabs.html")})
        assert not first.is_error, _text(first)
        assert first.structured_content is not None
        state = first.structured_content["state_id"]
        tab = ref(_text(first), 'tab "Billing"')
        # A second request, without a connection: the same owner, the same browser.
        clicked = await stateless.call_tool("browser_click", {"state_id": state, "ref": tab})
        assert not clicked.is_error, _text(clicked)
        assert 'tab "Billing" selected' in _text(clicked)


@pytest.mark.parametrize(("token", "code"), [("", "BROWSER_TOKEN_MISSING"),
                                             ("password123", "BROWSER_TOKEN_WEAK")])
def test_http_refuses_to_start_without_a_strong_token(token: str, code: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV_TOKEN}
    if token:
        env[ENV_TOKEN] = token
    done = subprocess.run(  # noqa: S603 - our own command
        [EXE, "browser", "serve", "--http", "--port", "0"], capture_output=True, text=True,
        timeout=60, check=False, env=env, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert code in done.stderr
    assert "password123" not in done.stderr
