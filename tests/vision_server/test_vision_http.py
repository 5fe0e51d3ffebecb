"""``deepseek-eyes vision serve``: the real process. Over HTTP on a loopback port, driven by
the official SDK's Streamable HTTP client and by plain HTTP for the security layer; the
command line's own refusals; stdio's standard output carrying nothing but protocol."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from deepseek_eyes.vision_server.http import ENV_TOKEN
from vision.loopback import LoopbackVisionServer, solid_png

pytestmark = pytest.mark.anyio

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))


def write_config(path: Path, loopback: LoopbackVisionServer, tag: str) -> Path:
    path.write_text(f"""
[vision]
route_priority = ["loop"]

[[vision.routes]]
name = "loop"
base_url = "{loopback.url('healthy~' + tag)}"
model = "vision-1"
""", encoding="utf-8")
    return path


@dataclass
class Served:
    url: str
    token: str
    described: dict[str, Any]
    root: Path

    def headers(self, **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}", **extra}


@pytest.fixture(scope="module")
def served(loopback: LoopbackVisionServer, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[Served]:
    """The real server, announced on standard output once its socket is bound."""
    base = tmp_path_factory.mktemp("vision-http")
    root = base / "shots"
    root.mkdir()
    (root / "blue.png").write_bytes(solid_png(20, 20, (0, 0, 200)))
    (base / "secret.png").write_bytes(solid_png(20, 20))
    config = write_config(base / "eyes.toml", loopback, "vserve-http")
    token = secrets.token_urlsafe(32)
    process = subprocess.Popen(  # noqa: S603 - our own command
        [EXE, "--config", str(config), "vision", "serve", "--http", "--port", "0", "--json",
         "--root", str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, ENV_TOKEN: token, "DEEPSEEK_EYES_HOME": str(base / "home")},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # bounded by the test timeout
        assert line, process.stderr.read() if process.stderr else ""
        described = json.loads(line)
        yield Served(described["listening"]["url"].removesuffix("/mcp"), token, described, root)
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_the_announcement(served: Served) -> None:
    assert served.described["transport"] == "http"
    assert served.described["tools"] == ["see", "look"]
    assert served.described["roots"] == [str(served.root.resolve())]
    assert served.described["client_roots"] is False  # vision.serve.http_client_roots


def test_no_token_wrong_token_host_and_origin_are_refused(served: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    url = served.url + "/mcp"
    with httpx.Client(timeout=10) as http:
        none = http.post(url, json=body)
        assert none.status_code == 401
        assert none.json()["error"]["code"] == "VISION_UNAUTHORIZED"
        assert "deepseek-eyes-vision" in none.headers["www-authenticate"]
        wrong = http.post(url, json=body, headers={"authorization": "Bearer " + "x" * 43})
        assert wrong.json()["error"]["code"] == "VISION_UNAUTHORIZED"
        origin = http.post(url, json=body, headers=served.headers(origin="https://evil.example"))
        assert origin.status_code == 403
        assert origin.json()["error"]["code"] == "VISION_FORBIDDEN"
        host = http.post(url, json=body, headers=served.headers(host="evil.example"))
        assert host.json()["error"]["code"] == "VISION_FORBIDDEN"


async def test_see_and_look_over_http(served: Served) -> None:
    async with (
        httpx2.AsyncClient(headers=served.headers(), timeout=60) as http_client,
        Client(streamable_http_client(served.url + "/mcp", http_client=http_client),
               mode="legacy") as client,
    ):
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"see", "look"}
        seen = await client.call_tool("see", {"image": "blue.png"})
        assert not seen.is_error, seen.content
        assert seen.structured_content is not None
        assert "summary" in seen.structured_content
        again = await client.call_tool("see", {"image": str(served.root / "blue.png")})
        assert again.meta is not None
        assert again.meta["deepseekeyes"]["cached"] is True
        outside = await client.call_tool("see", {"image": "../secret.png"})
        assert outside.is_error
        assert isinstance(outside.content[0], TextContent)
        assert json.loads(outside.content[0].text)["error"]["code"] == \
            "VISION_PATH_OUTSIDE_ROOTS"
        looked = await client.call_tool("look", {"image": "blue.png", "question": "Colour?"})
        assert not looked.is_error, looked.content
        listed = await client.list_resources()
        assert len(listed.resources) == 2  # the evidence and the reread


async def test_http_ignores_client_roots_by_default(served: Served, tmp_path: Path) -> None:
    """A remote client's file:// roots name its own disk: offering one widens nothing."""
    (tmp_path / "mine.png").write_bytes(solid_png(8, 8))

    async def list_roots(_: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri())])

    async with (
        httpx2.AsyncClient(headers=served.headers(), timeout=60) as http_client,
        Client(streamable_http_client(served.url + "/mcp", http_client=http_client),
               mode="legacy", list_roots_callback=list_roots) as client,
    ):
        refused = await client.call_tool("see", {"image": str(tmp_path / "mine.png")})
        assert refused.is_error
        assert isinstance(refused.content[0], TextContent)
        assert json.loads(refused.content[0].text)["error"]["code"] == \
            "VISION_PATH_OUTSIDE_ROOTS"


async def test_the_stateless_revision_works_too(served: Served) -> None:
    async with (
        httpx2.AsyncClient(headers=served.headers(), timeout=60) as http_client,
        Client(streamable_http_client(served.url + "/mcp", http_client=http_client),
               mode="auto") as client,
    ):
        seen = await client.call_tool("see", {"image": "blue.png"})
        assert not seen.is_error, seen.content
        assert seen.structured_content is not None


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own command
        [EXE, *args], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
    )


def test_http_needs_a_strong_token() -> None:
    missing = run("vision", "serve", "--http", "--json", "--port", "0")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"]["code"] == "VISION_TOKEN_MISSING"
    weak = run("vision", "serve", "--http", "--json", "--port", "0", env={ENV_TOKEN: "abc"})
    assert json.loads(weak.stdout)["error"]["code"] == "VISION_TOKEN_WEAK"


def test_usage_errors(tmp_path: Path) -> None:
    both = run("vision", "serve", "--stdio", "--port", "1", "--json")
    assert both.returncode == 2
    assert json.loads(both.stdout)["error"]["code"] == "CLI_USAGE"
    not_dir = run("vision", "serve", "--root", str(tmp_path / "nope"), "--json")
    assert not_dir.returncode == 2
    assert json.loads(not_dir.stdout)["error"]["code"] == "CLI_USAGE"


async def test_stdio_carries_only_protocol(loopback: LoopbackVisionServer,
                                           tmp_path: Path) -> None:
    """The SDK client over the real stdio process: a see, and standard error holding the
    description that --json puts there (standard output is the protocol's alone)."""
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "g.png").write_bytes(solid_png(16, 16, (0, 160, 0)))
    config = write_config(tmp_path / "eyes.toml", loopback, "vserve-stdio")
    errlog = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=EXE, args=["--config", str(config), "vision", "serve", "--stdio", "--json",
                           "--root", str(tmp_path / "shots")],
        env={**os.environ, "DEEPSEEK_EYES_HOME": str(tmp_path / "home")},
    )
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            seen = await client.call_tool("see", {"image": "g.png"})
            assert not seen.is_error, seen.content
    described = json.loads(errlog.read_text().splitlines()[0])
    assert described["transport"] == "stdio"
