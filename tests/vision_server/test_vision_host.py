"""Our own MCP host calling ``deepseek-eyes vision serve --stdio`` as any MCP host would: a
stdio server entry, the catalog, the read-only risk the annotations earn, and ``see`` on the
default, offline route (the embedded local OCR engine) reading a receipt."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from deepseek_eyes.mcp.audit import McpAudit
from deepseek_eyes.mcp.host import McpHost
from deepseek_eyes.mcp.manager import McpManager
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))
RECEIPTS = Path(__file__).resolve().parents[2] / "examples"


def vision_entry() -> McpServerSettings:
    # The host starts servers with a minimal environment; the data directory (and, in a
    # checkout run without installing, the source path) are passed on by reference.
    env = {"DEEPSEEK_EYES_HOME": {"env": "DEEPSEEK_EYES_HOME"}}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = {"env": "PYTHONPATH"}
    return McpServerSettings.model_validate({
        "id": "eyes", "transport": "stdio", "command": EXE,
        "args": ["vision", "serve", "--stdio", "--root", str(RECEIPTS)],
        "env": env, "call_timeout": 90, "connect_timeout": 30,
        "risk_policy": "read-only", "allow": {"tools": ["see", "look"]},
    })


async def test_our_host_calls_see_and_look_on_the_local_route(tmp_path: Path) -> None:
    settings = McpSettings.model_validate({"servers": [vision_entry().model_dump()]})
    host = McpHost(McpManager(settings), blobs=BlobStore(tmp_path / "blobs"),
                   artifacts=tmp_path / "artifacts", audit=McpAudit(None))
    await host.manager.start()
    try:
        state = host.manager.servers["eyes"]
        assert state.status == "ready", state.view()
        exposed = {t.name: t for t in host.exposed()}
        assert set(exposed) == {"see", "look"}  # read-only policy: both are read-only
        assert all(t.risk == "read" for t in exposed.values())
        seen = await host.call_tool("mcp__eyes__see", {"image": "receipt.png"})
        assert not seen.is_error, seen.preview
        assert "TOTAL 64.03" in seen.preview
        assert "evidence from route local" in seen.preview
        assert seen.preview.endswith("fresh)")
        again = await host.call_tool("mcp__eyes__see", {"image": "receipt.png"})
        assert again.preview.endswith("from the cache)")
        looked = await host.call_tool("mcp__eyes__look", {"image": "receipt.png",
                                                          "question": "What is the total?"})
        assert not looked.is_error, looked.preview
        assert "answer: " in looked.preview
        refused = await host.call_tool("mcp__eyes__see", {"image": "/etc/passwd"})
        assert refused.is_error
        assert "VISION_PATH_OUTSIDE_ROOTS" in refused.preview
    finally:
        await host.manager.stop()
