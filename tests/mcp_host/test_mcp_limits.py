"""Result limits the hostile-server tests do not reach: decoded image data, raw bytes, and a
persistence fault that must leave no temp file and no partial image list."""

from __future__ import annotations

import base64
import errno
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.server import Server

from deepseek_eyes.errors import DeepSeekEyesError, McpError, StoreError
from deepseek_eyes.mcp_host.admission import admit
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.blobs import BlobRef, BlobStore

pytestmark = pytest.mark.anyio

PNG_A = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"a" * 32).decode()
PNG_B = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"b" * 32).decode()
RESULTS = {
    # 27 MiB of base64: under the 28 MiB encoded limit, 20.25 MiB decoded (over 20 MiB).
    "tdecoded": [types.ImageContent(type="image", data="A" * (27 << 20), mime_type="image/png")],
    "tone": [types.ImageContent(type="image", data=PNG_A, mime_type="image/png")],
    "ttwo": [types.ImageContent(type="image", data=PNG_A, mime_type="image/png"),
             types.ImageContent(type="image", data=PNG_B, mime_type="image/png")],
}


async def host_for(tmp_path: Path) -> McpHost:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=n, input_schema={"type": "object"}) for n in RESULTS])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=list(RESULTS[params.name]))

    server = Server("limits", on_list_tools=list_tools, on_call_tool=call_tool)
    cfg = McpSettings.model_validate({"servers": [{
        "id": "lim", "transport": "stdio", "command": "unused", "call_timeout": 10,
        "connect_timeout": 10, "allow": {"tools": ["t*"]}}]})
    host = McpHost(McpManager(cfg, connector=lambda _s: server),
                   blobs=BlobStore(tmp_path / "b"), artifacts=tmp_path / "a",
                   audit=McpAudit(None))
    await host.manager.start(wait=10)
    return host


def leftovers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_decoded_image_limit_refuses_with_no_side_effects(tmp_path: Path) -> None:
    host = await host_for(tmp_path)
    try:
        with pytest.raises(McpError) as refused:
            await host.call_tool("mcp__lim__tdecoded", {})
        assert refused.value.code == "MCP_RESULT_IMAGE_DECODED_LIMIT"
        assert leftovers(tmp_path / "a") == leftovers(tmp_path / "b") == []
        assert [r["code"] for r in host.audit.recent()] == ["MCP_RESULT_IMAGE_DECODED_LIMIT"]
    finally:
        await host.manager.stop()


def test_raw_bytes_limit() -> None:
    # model_dump(mode="json") never yields bytes, so only embedders passing Python values
    # reach this limit; a server cannot (see the report on blob contents).
    with pytest.raises(McpError) as refused:
        admit({"content": [], "payload": [b"\0" * (10 << 20), b"\0" * ((10 << 20) + 1)]})
    assert refused.value.code == "MCP_RESULT_BYTES_LIMIT"
    assert admit({"content": [], "payload": b"\0" * (20 << 20)}).raw_bytes == 20 << 20


@pytest.mark.parametrize(("error", "code"), [
    (errno.EIO, "MCP_RESULT_PERSIST_FAILED"),
    (errno.ENOSPC, "STORE_FULL"),  # a full disk is the store's, not the result's, fault
])
async def test_artifact_write_failure_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int, code: str
) -> None:
    host = await host_for(tmp_path)
    temps: list[str] = []
    real_replace = os.replace

    def failing_replace(src: str, dst: Any) -> None:
        if not str(src).startswith(str(tmp_path / "a")):
            return real_replace(src, dst)  # blob writes go through; only the artifact fails
        temps.append(src)
        assert Path(src).is_file()  # the temp file existed when the rename failed
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(os, "replace", failing_replace)
    try:
        with pytest.raises(DeepSeekEyesError) as failed:
            await host.call_tool("mcp__lim__tone", {})
        assert failed.value.code == code
        assert host.audit.recent()[-1]["code"] == code
        assert len(temps) == 1
        assert not os.path.exists(temps[0])
        assert leftovers(tmp_path / "a") == []
    finally:
        await host.manager.stop()


async def test_blob_fault_returns_no_partial_image_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = await host_for(tmp_path)
    real_put = BlobStore.put
    puts: list[int] = []

    def flaky_put(self: BlobStore, data: bytes, *, sha256: str | None = None) -> BlobRef:
        puts.append(len(data))
        if len(puts) == 2:
            raise StoreError("disk full", code="STORE_WRITE_FAILED")
        return real_put(self, data, sha256=sha256)

    monkeypatch.setattr(BlobStore, "put", flaky_put)
    try:
        with pytest.raises(McpError) as failed:
            await host.call_tool("mcp__lim__ttwo", {})
        assert failed.value.code == "MCP_RESULT_PERSIST_FAILED"
        assert failed.value.details["stored_before_fault"] == 1
        assert leftovers(tmp_path / "a") == []  # no artifact for a result that was not kept
        assert host.audit.recent()[-1]["code"] == "MCP_RESULT_PERSIST_FAILED"
    finally:
        await host.manager.stop()


def test_resource_blobs_count_as_bytes_not_characters() -> None:
    from deepseek_eyes.mcp_host.admission import admit

    def resource(size: int) -> dict[str, object]:
        blob = base64.b64encode(b"\0" * size).decode()
        return {"contents": [{"uri": "file:///x.bin", "mimeType": "application/octet-stream",
                              "blob": blob}]}

    # 13 MiB of bytes is 17.3 Mi characters of base64: over the text limit, under the bytes one.
    admitted = admit(resource(13 * 1024 * 1024))
    assert admitted.raw_bytes == 13 * 1024 * 1024
    assert admitted.string_chars < 1000
    with pytest.raises(McpError) as info:
        admit(resource(20 * 1024 * 1024 + 3))
    assert info.value.code == "MCP_RESULT_BYTES_LIMIT"
