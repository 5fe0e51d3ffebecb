"""The browser MCP server, driven by the official SDK client: in memory for the tools and
their contract, and the real ``deepseek-eyes browser serve --stdio`` process once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import ImageContent, TextContent

from browser.site import Site
from browser.support import ref, require_browser, settings
from deepseek_eyes.browser.server import build_browser_server
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.browser.tools import TOOLS

pytestmark = pytest.mark.anyio

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))


def _text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert isinstance(content[0], TextContent)
    return content[0].text


async def test_tools_schemas_annotations_and_a_stale_refusal(site: Site, tmp_path: Path) -> None:
    require_browser()
    service = BrowserService(settings(), downloads_dir=tmp_path / "downloads")
    async with Client(build_browser_server(service), mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert list(listed) == [t.name for t in TOOLS]
        for tool in TOOLS:
            published = listed[tool.name]
            assert published.input_schema == dict(tool.parameters)
            assert published.annotations is not None
            assert published.annotations.read_only_hint is tool.annotations.read_only
            assert published.annotations.destructive_hint is tool.annotations.destructive
            assert published.annotations.open_world_hint is tool.annotations.open_world
        assert listed["browser_observe"].annotations.read_only_hint is True  # type: ignore[union-attr]
        assert listed["browser_click"].annotations.destructive_hint is True  # type: ignore[union-attr]
        first = await client.call_tool("browser_navigate", {"url": site.url("/form.html")})
        assert not first.is_error
        data = first.structured_content
        assert data is not None
        assert "observation" not in data  # the text carries it, once
        assert _text(first).startswith(f"state {data['state_id']}\n")
        counter = ref(_text(first), "Clicked 0 times")
        clicked = await client.call_tool("browser_click", {"state_id": data["state_id"],
                                                           "ref": counter})
        assert clicked.structured_content is not None
        assert clicked.structured_content["delta"]["changed"]
        stale = await client.call_tool("browser_click", {"state_id": data["state_id"],
                                                         "ref": counter})
        assert stale.is_error
        assert stale.structured_content is not None
        assert stale.structured_content["error"]["code"] == "BROWSER_STATE_STALE"
        assert stale.structured_content["state_id"] not in (
            data["state_id"], clicked.structured_content["state_id"])
        # Numbers as strings and booleans as numbers are refused, not coerced.
        bad = await client.call_tool("browser_observe", {"page": "2"})
        assert bad.is_error
        assert "BROWSER_ARGUMENT_INVALID" in _text(bad)
        shot = await client.call_tool("browser_screenshot", {})
        assert isinstance(shot.content[1], ImageContent)
        assert shot.content[1].mime_type == "image/png"
        report = await client.call_tool("browser_report", {"format": "json"})
        assert report.structured_content is not None
        steps = report.structured_content["report"]["steps"]
        assert [s["outcome"] for s in steps][:3] == ["ok", "ok", "refused"]


async def test_the_stdio_command_with_the_sdk_client(site: Site, tmp_path: Path) -> None:
    require_browser()
    config = tmp_path / "deepseek-eyes.toml"  # the test site is on loopback
    config.write_text("[browser]\nallow_private_network = true\n")
    params = StdioServerParameters(
        command=EXE, args=["--config", str(config), "browser", "serve", "--stdio"],
        env={**os.environ})
    async with Client(params, mode="legacy") as client:
        first = await client.call_tool("browser_navigate", {"url": site.url("/tabs.html")})
        assert not first.is_error, _text(first)
        assert first.structured_content is not None
        state_id = first.structured_content["state_id"]
        tab = ref(_text(first), 'tab "Billing"')
        clicked = await client.call_tool("browser_click", {"state_id": state_id, "ref": tab})
        assert 'tab "Billing" selected' in _text(clicked)
        closed = await client.call_tool("browser_close", {})
        assert closed.structured_content is not None
        assert closed.structured_content["report_sha256"]


def test_the_observe_command(site: Site, capsys: pytest.CaptureFixture[str],
                             tmp_path: Path) -> None:
    require_browser()
    from deepseek_eyes.cli import main

    guarded = ["browser", "observe", site.url("/table.html"), "--json"]
    with pytest.raises(SystemExit):  # by default a page may not be on the private network
        main(guarded)
    assert "allow_private_network" in capsys.readouterr().out
    (tmp_path / "deepseek-eyes.toml").write_text("[browser]\nallow_private_network = true\n")
    main(guarded)  # the working directory's settings file (the tests run in tmp_path)
    data = json.loads(capsys.readouterr().out)
    assert data["state_id"] == "s1"
    assert 'table "Orders" (11 rows):' in data["observation"]
    main(["browser", "observe", site.url("/long.html"), "--find", "needle"])
    assert '"NEEDLE-at-the-end"' in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["browser", "observe", "file:///etc/passwd", "--json"])
    assert refused.value.code == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "BROWSER_NAVIGATION_BLOCKED"
