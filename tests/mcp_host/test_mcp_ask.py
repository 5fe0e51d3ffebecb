"""Ask-first tools (``mcp.servers[].ask``): the rule, the writer, and the wait in the host's
dispatch against a real SDK server whose victim tool records every call it receives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import types
from mcp.server import Server
from pydantic import ValidationError

from deepseek_eyes.console.approvals import approvals, decide_ask
from deepseek_eyes.console.control import ConsoleParts, edit_list, mcp_view
from deepseek_eyes.errors import ConfigError, McpError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.asking import MAX_SHOWN_ARGUMENT_CHARS, asks_first
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.settings_file import set_ask
from deepseek_eyes.runtime.approval import describe_plan
from deepseek_eyes.runtime.mcp_tools import McpToolSource
from deepseek_eyes.runtime.tools import TurnContext
from deepseek_eyes.settings import McpServerSettings, McpSettings

pytestmark = pytest.mark.anyio


def server(**fields: Any) -> McpServerSettings:
    return McpServerSettings.model_validate(
        {"id": "s", "transport": "stdio", "command": "x", **fields})


# -- the rule ---------------------------------------------------------------------------------
def test_ask_selectors_take_names_prefixes_and_a_bare_star() -> None:
    named = server(ask=["write_file", "delete_*"])
    assert asks_first(named, "write_file")
    assert asks_first(named, "delete_all")
    assert not asks_first(named, "read_file")
    assert not asks_first(named, "write_file_2")
    everything = server(ask=["*"])
    assert asks_first(everything, "read_file")
    assert asks_first(everything, "x")
    assert not asks_first(server(), "write_file")


@pytest.mark.parametrize("bad", ["a*b", "", "two words", "**"])
def test_bad_ask_selectors_are_refused_like_allow(bad: str) -> None:
    with pytest.raises(ValidationError, match="selector"):
        server(ask=[bad])


def test_a_bare_star_still_cannot_allow_everything() -> None:
    with pytest.raises(ValidationError, match="bare"):
        server(allow={"tools": ["*"]})


def test_the_writer_adds_once_removes_and_refuses_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[[mcp.servers]]\nid = "s"\ntransport = "stdio"\ncommand = "x"\n'
                    'ask = ["a"]  # keep me\n')
    assert set_ask(path, "s", "b*", True).mcp.servers[0].ask == ("a", "b*")
    assert set_ask(path, "s", "b*", True).mcp.servers[0].ask == ("a", "b*")
    assert set_ask(path, "s", "a", False).mcp.servers[0].ask == ("b*",)
    assert "# keep me" in path.read_text()
    before = path.read_text()
    with pytest.raises(ConfigError) as refused:
        set_ask(path, "s", "x*y", True)
    assert refused.value.code == "CONFIG_INVALID"
    assert path.read_text() == before
    with pytest.raises(McpError) as unknown:
        set_ask(path, "nope", "a", True)
    assert unknown.value.code == "MCP_SERVER_UNKNOWN"


def test_a_terminal_sees_the_call_with_invisible_characters_escaped() -> None:
    text = describe_plan({"kind": "mcp", "server": "s", "tool": "wri\u202ete",
                          "arguments": '{"path":"a"}'})
    assert "\u202e" not in text
    assert "\\u202e" in text
    assert '{"path":"a"}' in text


# -- the wait, against a real server ------------------------------------------------------------
def victim(received: list[dict[str, Any]]) -> Server[Any]:
    """A server whose tools record every call that reaches them."""
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=n, input_schema={"type": "object"},
                       annotations=types.ToolAnnotations(read_only_hint=n == "read"))
            for n in ("write", "read")])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        received.append({"tool": params.name, "arguments": params.arguments})
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    return Server("victim", on_list_tools=list_tools, on_call_tool=call_tool)


class Rig:
    def __init__(self, home: DataHome, host: McpHost, received: list[dict[str, Any]]) -> None:
        self.home, self.host, self.received = home, host, received
        self.parts = ConsoleParts(home, None, mcp_manager=host.manager, mcp_host=host)

    async def waiting(self) -> dict[str, Any]:
        """The first waiting request, as the console lists it (waits on the queue's state,
        checked each loop turn: no fixed sleep)."""
        with anyio.fail_after(10):
            while True:
                listed = [a for a in approvals(self.parts)["asks"] if a["state"] == "waiting"]
                if listed:
                    return listed[0]
                await anyio.lowlevel.checkpoint()

    def ask_rows(self) -> list[tuple[str, str]]:
        rows = self.home.db.query(
            "SELECT subject, details FROM audit WHERE kind = 'mcp.ask' ORDER BY id")
        return [(r["subject"], json.loads(r["details"])["status"]) for r in rows]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    received: list[dict[str, Any]] = []
    # A long wait: a test that decides must never race the timeout on a busy machine.
    cfg = McpSettings.model_validate({"ask_timeout": 60, "servers": [
        {"id": "v", "transport": "stdio", "command": "unused",
         "allow": {"tools": ["write", "read"]}, "ask": ["write"]}]})
    home = DataHome(tmp_path / "data")
    manager = McpManager(cfg, connector=lambda _s: victim(received))
    host = McpHost(manager, blobs=home.blobs, artifacts=tmp_path / "a",
                   audit=McpAudit(home.audit))
    await manager.start(wait=10)
    try:
        yield Rig(home, host, received)
    finally:
        await manager.stop()


async def test_an_ask_first_call_reaches_the_server_only_after_approval(rig: Rig) -> None:
    outcome: dict[str, Any] = {}

    async def call() -> None:
        outcome["result"] = await rig.host.call_tool(
            "mcp__v__write", {"path": "<b>x</b>", "text": "hi"}, session_id="conv-1")

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        listed = await rig.waiting()
        assert rig.received == []  # waiting: nothing was sent
        assert (listed["server"], listed["tool"], listed["session_id"]) == ("v", "write",
                                                                           "conv-1")
        assert listed["arguments"] == '{"path":"<b>x</b>","text":"hi"}'
        assert listed["age_s"] >= 0
        decided = decide_ask(rig.parts, listed["ask_id"], "approve", "person-1")
        assert (decided["state"], decided["via"], decided["by"]) == ("approved", "console",
                                                                    "person-1")
    assert outcome["result"].preview == "done"
    assert rig.received == [{"tool": "write", "arguments": {"path": "<b>x</b>", "text": "hi"}}]
    assert rig.ask_rows() == [("v", "asked"), ("v", "approved")]
    with pytest.raises(McpError) as again:  # decided once: nothing left to decide
        decide_ask(rig.parts, listed["ask_id"], "deny", "person-1")
    assert again.value.code == "MCP_APPROVAL_NOT_FOUND"


async def test_a_denied_call_never_reaches_the_server(rig: Rig) -> None:
    caught: list[McpError] = []

    async def call() -> None:
        try:
            await rig.host.call_tool("mcp__v__write", {"text": "no"}, session_id="conv-2")
        except McpError as exc:
            caught.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        listed = await rig.waiting()
        decide_ask(rig.parts, listed["ask_id"], "deny", "person-1")
    assert [e.code for e in caught] == ["MCP_CALL_DENIED"]
    assert rig.received == []
    # The read tool is not ask-first: it goes straight through.
    await rig.host.call_tool("mcp__v__read", {})
    assert [r["tool"] for r in rig.received] == ["read"]
    assert rig.ask_rows() == [("v", "asked"), ("v", "denied")]
    assert [a["state"] for a in approvals(rig.parts)["asks"]] == ["denied"]
    failed = [r for r in rig.host.audit.recent() if r["tool"] == "write"]
    assert [(r["status"], r["code"]) for r in failed] == [("failed", "MCP_CALL_DENIED")]


async def test_nobody_deciding_in_time_is_a_timeout_and_nothing_is_sent(rig: Rig) -> None:
    manager = rig.host.manager
    manager.settings = manager.settings.model_copy(update={"ask_timeout": 0.3})
    with pytest.raises(McpError) as timed_out:
        await rig.host.call_tool("mcp__v__write", {}, session_id="conv-3")
    assert timed_out.value.code == "MCP_APPROVAL_TIMEOUT"
    assert rig.received == []
    assert rig.ask_rows() == [("v", "asked"), ("v", "timeout")]


async def test_a_closed_session_expires_its_request(rig: Rig) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(partial(rig.host.call_tool, "mcp__v__write", {}, session_id="conv-4"))
        listed = await rig.waiting()
        group.cancel_scope.cancel()  # the turn ends (its client went away)
    assert rig.received == []
    assert [a["state"] for a in approvals(rig.parts)["asks"]] == ["expired"]
    with pytest.raises(McpError) as gone:
        decide_ask(rig.parts, listed["ask_id"], "approve", "person-1")
    assert gone.value.code == "MCP_APPROVAL_NOT_FOUND"


async def test_the_terminal_may_answer_and_long_arguments_are_cut(rig: Rig) -> None:
    shown: list[Mapping[str, Any]] = []

    async def terminal(request: Mapping[str, Any]) -> str:
        shown.append(request)
        return "denied"

    with pytest.raises(McpError) as denied:
        await rig.host.call_tool("mcp__v__write", {"text": "x" * 5000}, session_id="c",
                                 asker=terminal)
    assert denied.value.code == "MCP_CALL_DENIED"
    assert rig.received == []
    (request,) = shown
    assert len(request["arguments"]) < MAX_SHOWN_ARGUMENT_CHARS + 60
    assert request["arguments"].endswith("characters, cut]")
    (decided,) = approvals(rig.parts)["asks"]
    assert (decided["via"], decided["by"]) == ("cli", "tty")


async def test_the_console_lists_and_toggles_ask_first(rig: Rig, tmp_path: Path) -> None:
    view = mcp_view(rig.parts)
    tools = {t["name"]: t["ask"] for t in view["servers"][0]["tools"]}
    assert tools == {"write": True, "read": False}
    assert view["servers"][0]["ask"] == ["write"]
    path = tmp_path / "settings.toml"
    path.write_text('[[mcp.servers]]\nid = "v"\ntransport = "stdio"\ncommand = "x"\n')
    parts = ConsoleParts(rig.home, path)
    await edit_list(parts, "v", "ask", "add", "read")
    assert 'ask = ["read"]' in path.read_text()
    await edit_list(parts, "v", "ask", "remove", "read")
    assert "read" not in path.read_text()


class AtTheTerminal:
    """chat's approver (``via`` ``cli``), answering as told."""

    via = "cli"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[Mapping[str, Any]] = []

    async def decide(self, plan: Mapping[str, Any]) -> str:
        self.asked.append(plan)
        return self.answer


async def test_a_turn_asks_chats_terminal_and_the_model_sees_the_refusal(rig: Rig) -> None:
    source = McpToolSource(rig.host, cast(Any, None))  # no image in these results
    events: list[Mapping[str, Any]] = []
    terminal = AtTheTerminal("denied")
    context = TurnContext("conv-5", {}, max_tool_calls=8, max_rereads=0,
                          notify=events.append, approver=cast(Any, terminal))
    spec = next(s for s in source.tools(context) if s.name == "mcp__v__write")
    refused = await source.call(spec, {"text": "hi"}, context)
    assert refused.is_error
    assert "MCP_CALL_DENIED" in refused.content
    assert rig.received == []
    assert [e["type"] for e in events] == ["approval.wanted", "approval.decided"]
    assert "ask-first MCP tool" in str(events[0]["text"])
    assert terminal.asked[0]["session_id"] == "conv-5"
    terminal.answer = "approved"
    done = await source.call(spec, {"text": "hi"}, context)
    assert not done.is_error
    assert rig.received == [{"tool": "write", "arguments": {"text": "hi"}}]
