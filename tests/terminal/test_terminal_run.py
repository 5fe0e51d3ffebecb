"""``terminal_run``: one round trip for a plan that needs no approval, and never a way
around approval for one that does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import TextContent

from deepseek_eyes.terminal.transport.server import build_mcp_server
from terminal.support import ServiceFactory

pytestmark = pytest.mark.anyio


async def test_terminal_run_executes_only_what_needs_no_approval(
    make_service: ServiceFactory, workspace: Path
) -> None:
    service = make_service(mode="confirm")
    async with Client(build_mcp_server(service)) as client:
        ran = (await client.call_tool("terminal_run", {"argv": ["cat", "a.txt"]}))
        body = ran.structured_content
        assert body is not None
        assert body["executed"] is True
        assert body["receipt"]["stdout"]["text"] == "alpha\n"
        assert body["plan"]["plan_id"] == body["receipt"]["plan_id"]
        # The text is the same answer as JSON, for clients that read only text.
        (text,) = ran.content
        assert isinstance(text, TextContent)
        assert json.loads(text.text) == body

        write = (await client.call_tool("terminal_run", {"argv": ["touch", "new.txt"]}))
        body = write.structured_content
        assert body is not None
        assert body["executed"] is False
        assert body["plan"]["decision"]["requires_approval"] is True
        assert "receipt" not in body
        assert not (workspace / "new.txt").exists()

        refused = (await client.call_tool("terminal_run", {"argv": ["cat", "/etc/passwd"]}))
        body = refused.structured_content
        assert body is not None
        assert body["executed"] is False
        assert body["plan"]["state"] == "refused"
        # The plan that needed approval is still there to approve, then execute as usual.
        session = write.structured_content["plan"]["session_id"]  # type: ignore[index]
        plan_id = write.structured_content["plan"]["plan_id"]  # type: ignore[index]
        # (a person approves: the client that planned may not, by default)
        service.approve(session, plan_id, via="console", by="console-test")
        done = await client.call_tool("terminal_execute",
                                      {"session_id": session, "plan_id": plan_id})
        assert done.structured_content is not None
        assert done.structured_content["status"] == "completed"
    assert (workspace / "new.txt").exists()
