"""The runtime's terminal tools are the terminal MCP server's: same names, same arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.runtime.terminal_tools import _SPECS, TOOL_NAMES
from deepseek_eyes.settings import Settings
from deepseek_eyes.terminal.config import build_service
from deepseek_eyes.terminal.transport.server import build_mcp_server

pytestmark = pytest.mark.anyio


async def test_names_and_arguments_match_the_mcp_server(tmp_path: Path) -> None:
    settings = Settings.model_validate({"terminal": {"workspaces": [str(tmp_path)]}})
    service = build_service(settings)
    try:
        served = {t.name: t for t in await build_mcp_server(service, reaper=False).list_tools()}
        assert set(TOOL_NAMES) <= set(served)
        assert not {"terminal_approve", "terminal_deny"} & set(TOOL_NAMES)
        for spec in _SPECS:
            ours = set(spec.parameters.get("properties", {}))
            theirs = set(served[spec.name].input_schema.get("properties", {}))
            # A subset: the runtime always waits (no "wait") and finds receipts by id only;
            # every argument it takes is named as the server names it.
            assert ours <= theirs, (spec.name, ours - theirs)
    finally:
        await service.aclose()
