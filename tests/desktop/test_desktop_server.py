"""The desktop MCP server, driven by the official SDK client: in memory for the tool
contract, the real ``deepseek-eyes desktop serve --stdio --xvfb`` process once (with its own
private headless desktop), and ``desktop observe --json``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import ImageContent, TextContent

from deepseek_eyes.desktop.server import build_desktop_server
from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.desktop.tools import TOOLS
from desktop.support import GtkApp, require_desktop

pytestmark = pytest.mark.anyio


def _text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert isinstance(content[0], TextContent)
    return content[0].text


async def test_tools_schemas_annotations_and_a_stale_refusal(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    async with Client(build_desktop_server(service), mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert list(listed) == [t.name for t in TOOLS]
        for tool in TOOLS:
            published = listed[tool.name]
            assert published.input_schema == dict(tool.parameters)
            assert published.annotations is not None
            assert published.annotations.read_only_hint is tool.annotations.read_only
            assert published.annotations.destructive_hint is tool.annotations.destructive
        seen = await client.call_tool("desktop_observe", {"scope": "window",
                                                          "window": gtk_app.title})
        assert not seen.is_error, _text(seen)
        data = seen.structured_content
        assert data is not None
        assert data["origin"] == [40, 40]
        assert data["semanticStatus"]["truncated"] is False
        observe_again = await client.call_tool("desktop_observe", {"scope": "window"})
        stale = await client.call_tool("desktop_click", {"state_id": data["state_id"],
                                                         "x": 10, "y": 10})
        assert stale.is_error
        assert stale.structured_content is not None
        assert stale.structured_content["error"]["code"] == "DESKTOP_STATE_STALE"
        assert observe_again.structured_content is not None
        bad = await client.call_tool("desktop_scroll", {"state_id": "d1", "direction": "down",
                                                        "amount": "2"})
        assert "DESKTOP_ARGUMENT_INVALID" in _text(bad)  # a string is not coerced
        shot = await client.call_tool("desktop_screenshot", {})
        assert isinstance(shot.content[1], ImageContent)
        assert shot.content[1].mime_type == "image/png"
    assert gtk_app.state()["clicks"] == {"Apply": 0, "Clear": 0}


async def test_the_stdio_command_with_its_own_headless_desktop() -> None:
    require_desktop()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY",
                                                           "DBUS_SESSION_BUS_ADDRESS")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "deepseek_eyes", "desktop", "serve", "--stdio",
                                      "--xvfb"], env=env)
    async with Client(params, mode="legacy") as client:
        seen = await client.call_tool("desktop_observe", {})
        assert not seen.is_error, _text(seen)
        assert seen.structured_content is not None
        assert seen.structured_content["screenshot"]["width"] == 1280
        assert seen.structured_content["windows"] == []  # a fresh, private desktop
        closed = await client.call_tool("desktop_close", {})
        assert closed.structured_content is not None
        assert closed.structured_content["report"]["summary"]["steps"] == 1


def test_the_observe_command(desktop_env: dict[str, str], gtk_app: GtkApp,
                             capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    from deepseek_eyes.cli import main

    for name, value in desktop_env.items():
        monkeypatch.setenv(name, value)
    main(["desktop", "observe", "--window", gtk_app.title, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["scope"] == "window"
    assert 'push button "Apply"' in data["observation"]
    with pytest.raises(SystemExit) as refused:
        main(["desktop", "observe", "--window", "No Such Window", "--json"])
    assert refused.value.code == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "DESKTOP_TARGET_GONE"
