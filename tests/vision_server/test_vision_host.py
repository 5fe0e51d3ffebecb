"""Our own MCP host calling ``deepseek-eyes vision serve --stdio`` as any MCP host would: a
stdio server entry, the catalog, the read-only risk the annotations earn, and ``see`` on the
default, offline route (the embedded local OCR engine) reading a receipt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
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


def test_stdio_standard_output_is_only_json_rpc(tmp_path: Path) -> None:
    """Raw pipes, the offline OCR route loading its models: every line the process writes
    on standard output is a JSON-RPC message; its chatter goes to standard error."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "see", "arguments": {"image": "receipt.png"}}},
    ]
    process = subprocess.Popen(  # noqa: S603 - our own command
        [EXE, "vision", "serve", "--stdio", "--json", "--root", str(RECEIPTS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "DEEPSEEK_EYES_HOME": str(tmp_path / "home")},
    )
    assert process.stdin is not None
    assert process.stdout is not None
    for message in messages:
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
    lines = []
    while len([m for m in lines if "id" in m]) < 2:  # bounded by the test timeout
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        lines.append(json.loads(line))
    rest, err = process.communicate(timeout=60)
    lines += [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert all(m.get("jsonrpc") == "2.0" for m in lines)
    answer = next(m for m in lines if m.get("id") == 2)
    assert "TOTAL 64.03" in answer["result"]["content"][0]["text"]
    assert json.loads(err.splitlines()[0])["transport"] == "stdio"
