"""What the model reads of a result that does not fit ``max_result_chars``: never a silent
cut, always a marker with what is missing and where the whole is kept (or that it is not)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.server import Server

from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.results import MARKER_CHARS, preview_text, truncation_marker
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio

LONG = "".join(f"{i:05d}" for i in range(1000))  # 5,000 characters, every offset readable
RESULTS: dict[str, list[Any]] = {
    "tlong": [types.TextContent(type="text", text=LONG)],
    "tblocks": [types.TextContent(type="text", text="a" * 1500),
                types.TextContent(type="text", text="b" * 1500),
                types.TextContent(type="text", text="c" * 1500)],
    "tshort": [types.TextContent(type="text", text="short")],
}
MARKER = re.compile(r"\n\[truncated: ([\d,]+) of ([\d,]+) characters left out; (.*)\]\Z")


async def host_for(tmp_path: Path, **fields: Any) -> McpHost:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=n, input_schema={"type": "object"}) for n in RESULTS])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=list(RESULTS[params.name]))

    server = Server("results", on_list_tools=list_tools, on_call_tool=call_tool)
    cfg = McpSettings.model_validate({"servers": [{
        "id": "res", "transport": "stdio", "command": "unused", "call_timeout": 10,
        "connect_timeout": 10, "allow": {"tools": ["t*"]}}], **fields})
    host = McpHost(McpManager(cfg, connector=lambda _s: server),
                   blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))
    await host.manager.start(wait=10)
    return host


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_a_cut_result_ends_with_a_marker_and_its_artifact(tmp_path: Path) -> None:
    host = await host_for(tmp_path, max_result_chars=2000)
    try:
        result = await host.call_tool("mcp__res__tlong", {})
        blocks = await host.call_tool("mcp__res__tblocks", {})
        short = await host.call_tool("mcp__res__tshort", {})
    finally:
        await host.manager.stop()
    assert result.truncated
    assert len(result.preview) <= 2000
    found = MARKER.search(result.preview)
    assert found is not None, result.preview[-200:]
    left_out, total = (int(g.replace(",", "")) for g in found.groups()[:2])
    assert total == 5000
    shown = result.preview[:found.start()]
    assert LONG.startswith(shown)
    assert len(shown) + left_out == total
    assert found.group(3) == f"the whole result is kept as artifact {result.result_sha256}"
    assert result.artifact is not None
    kept = json.loads(Path(result.artifact).read_text(encoding="ascii"))
    assert kept["content"][0]["text"] == LONG
    assert Path(result.artifact).stem == result.result_sha256.removeprefix("sha256:")
    # Several blocks: the count is of the whole joined preview (three blocks, two newlines).
    more = MARKER.search(blocks.preview)
    assert more is not None
    assert more.group(2) == "4,502"
    assert not short.truncated
    assert short.preview == "short"
    assert short.artifact is None


async def test_with_persist_results_off_nothing_is_written_and_the_marker_says_so(
        tmp_path: Path) -> None:
    host = await host_for(tmp_path, max_result_chars=2000, persist_results=False)
    try:
        result = await host.call_tool("mcp__res__tlong", {})
    finally:
        await host.manager.stop()
    found = MARKER.search(result.preview)
    assert found is not None
    assert len(result.preview) <= 2000
    assert found.group(3) == "the rest was not kept (mcp.persist_results = false)"
    assert result.artifact is None
    assert files(tmp_path / "a") == []


def test_the_marker_fits_its_room_at_the_largest_counts() -> None:
    digest = "sha256:" + "f" * 64
    assert len(truncation_marker(99_999_999_999, 99_999_999_999, digest)) <= MARKER_CHARS
    assert len(truncation_marker(99_999_999_999, 99_999_999_999, None)) <= MARKER_CHARS


def test_preview_total_counts_what_was_not_built() -> None:
    value = {"content": [{"type": "text", "text": "x" * 300},
                         {"type": "resource", "resource": {"uri": "u://1", "text": "y" * 400}},
                         {"type": "audio"}]}
    whole, total_whole, _ = preview_text(value, [], 10_000)
    cut, total, text_only = preview_text(value, [], 256)
    assert total == total_whole == len(whole)
    assert cut == whole[:256]
    assert not text_only
    structured = {"content": [], "structuredContent": {"k": "v" * 1000}}
    text, total, _ = preview_text(structured, [], 256)
    assert len(text) == 256
    assert total == len(json.dumps(structured["structuredContent"]))
