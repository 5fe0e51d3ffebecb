"""``gateway/settings_watch.py``: a settings file's new version is validated whole, applied
only when ``[mcp]`` changed, and an invalid one refused once, the running set kept. A
recording manager stands in for :class:`McpManager` (the real one, with real servers, is
exercised through a real ``serve`` in ``test_control_api.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.gateway.settings_watch import SettingsWatch
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings, validate_settings_file

SERVER = '[[mcp.servers]]\nid = "s"\ntransport = "stdio"\ncommand = "/bin/true"\n'


class Recording(McpManager):
    def __init__(self, settings: McpSettings) -> None:
        super().__init__(settings)
        self.applied: list[McpSettings] = []

    async def reconfigure(self, settings: McpSettings, *, wait: float = 30.0) -> None:
        self.applied.append(settings)
        self.settings = settings


def watch_of(path: Path) -> tuple[SettingsWatch, Recording, list[str]]:
    said: list[str] = []
    manager = Recording(validate_settings_file(path).mcp)
    return SettingsWatch(path, manager, say=said.append), manager, said


@pytest.mark.anyio
async def test_a_valid_change_of_mcp_is_applied_and_comments_alone_are_not(
        tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text(SERVER, encoding="utf-8")
    watch, manager, said = watch_of(path)
    assert (await watch.check()).applied
    assert manager.applied == []  # nothing new

    path.write_text("# a note\n" + SERVER, encoding="utf-8")
    assert (await watch.check()).applied
    assert manager.applied == []  # same [mcp]: the servers are left be

    path.write_text(SERVER + 'allow = { tools = ["x"] }\n', encoding="utf-8")
    last = await watch.check()
    assert last.applied
    assert [s.servers[0].allow.tools for s in manager.applied] == [("x",)]
    assert said == ["settings change applied (1 MCP server(s))"]


@pytest.mark.anyio
async def test_an_invalid_edit_is_refused_once_and_the_running_set_kept(
        tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text(SERVER, encoding="utf-8")
    watch, manager, said = watch_of(path)
    path.write_text(SERVER + 'connect_timeout = "soon"\n', encoding="utf-8")
    first = await watch.check()
    again = await watch.check()
    assert (first.applied, again.applied) == (False, False)
    assert first.error is not None
    assert first.error["code"] == "CONFIG_INVALID"
    assert manager.applied == []
    assert len(said) == 1  # said once per version of the file
    assert said[0].startswith("settings change refused, the running MCP servers are kept: "
                              "CONFIG_INVALID")
    assert "connect_timeout" in said[0]

    path.write_text("not toml [", encoding="utf-8")
    assert (await watch.check()).error["code"] == "CONFIG_UNREADABLE"  # type: ignore[index]
    assert manager.applied == []
