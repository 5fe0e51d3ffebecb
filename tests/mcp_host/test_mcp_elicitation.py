"""Elicitation through the host: a real SDK server asks, a scripted person answers at the
chat's terminal prompt (``cli/elicit.py``), or nobody can and no capability is declared."""

from __future__ import annotations

import io
import os
import select
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from deepseek_eyes.cli.elicit import TerminalForm, ask_form, ask_url
from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.elicitation import (
    Answer,
    FormField,
    elicitation_callback,
    install_elicitor,
    parse_form,
)
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio


class Booking(BaseModel):
    name: str = Field(description="Who travels")
    seats: int = Field(default=1, ge=1, le=9)
    window: bool = False


def elicit_server() -> MCPServer:
    mcp = MCPServer("asker")

    @mcp.tool(annotations={"readOnlyHint": True})  # type: ignore[misc]
    async def book(ctx: Context) -> str:
        """Book seats, asking the person for details."""
        result = await ctx.elicit("Details for the booking, please", Booking)
        if result.action == "accept":
            return f"booked {result.data.seats} for {result.data.name} window={result.data.window}"
        return f"not booked: {result.action}"

    return mcp


def make_host(tmp_path: Path) -> McpHost:
    settings = McpSettings.model_validate({"servers": [
        # The handshake revisions carry server-to-client requests (the stateless one has
        # no back-channel for them).
        {"id": "asker", "transport": "stdio", "command": "unused", "protocol": "legacy",
         "allow": {"tools": ["book"]}}]})

    def connector(_: McpServerSettings) -> Any:
        return elicit_server()

    return McpHost(McpManager(settings, connector=connector), blobs=BlobStore(tmp_path / "b"),
                   artifacts=tmp_path / "a", audit=McpAudit(None))


class Scripted:
    """A person at the chat prompt, typing these lines."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        self.shown: list[str] = []

    def read(self) -> str | None:
        return self.lines.pop(0) if self.lines else None

    async def form(self, server: str, message: str, fields: Sequence[FormField]) -> Answer:
        return ask_form(server, message, fields, self.read, self.shown.append)

    async def url(self, server: str, message: str, url: str) -> Answer:
        return ask_url(server, message, url, self.read, self.shown.append)


@pytest.fixture(autouse=True)
def no_elicitor() -> Iterator[None]:
    install_elicitor(None)
    yield
    install_elicitor(None)


@pytest.mark.parametrize(("lines", "preview"), [
    # A wrong integer is explained and asked again; an empty line takes the default.
    (["Ada", "ten", "2", "", ""], "booked 2 for Ada window=False"),
    (["Ada", "", "yes", "y"], "booked 1 for Ada window=True"),
    (["", "Ada", "", "", "n"], "not booked: decline"),  # name is required: asked again
    (["!decline"], "not booked: decline"),
    (["Ada", "!cancel"], "not booked: cancel"),
    ([], "not booked: cancel"),  # end of input
])
async def test_chat_person_answers_a_real_servers_form(
        tmp_path: Path, lines: list[str], preview: str) -> None:
    person = Scripted(lines)
    install_elicitor(person)
    host = make_host(tmp_path)
    await host.manager.start()
    try:
        assert host.manager.servers["asker"].status == "ready"
        result = await host.call_tool("mcp__asker__book", {})
        assert not result.is_error, result.preview
        assert preview in result.preview
        shown = "".join(person.shown)
        assert "Details for the booking, please" in shown
        assert "asks (its words, not ours)" in shown
    finally:
        await host.manager.stop()


async def test_without_a_person_no_capability_and_the_request_is_refused(
        tmp_path: Path) -> None:
    assert elicitation_callback("asker") is None  # the gateway, ask: nothing declared
    host = make_host(tmp_path)
    await host.manager.start()
    try:
        # The server asks anyway; the SDK refuses it (no callback, no capability), and the
        # server's tool fails with that refusal.
        with pytest.raises(McpError, match="Elicitation not supported"):
            await host.call_tool("mcp__asker__book", {})
    finally:
        await host.manager.stop()


def test_schema_subset_parsed_and_outside_it_refused() -> None:
    fields = parse_form({
        "type": "object", "required": ["mail"],
        "properties": {
            "mail": {"type": "string", "format": "email"},
            "level": {"type": "string", "oneOf": [{"const": "lo", "title": "Low"},
                                                  {"const": "hi", "title": "High"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                     "maxItems": 1},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        }})
    mail, level, tags, ratio = fields
    assert mail.required
    assert not level.required
    assert mail.convert("a@example.org") == "a@example.org"
    with pytest.raises(ValueError, match="email"):
        mail.convert("not-an-address")
    assert level.convert("2") == "hi"
    assert level.convert("Low") == "lo"
    assert tags.convert("a") == ["a"]
    with pytest.raises(ValueError, match="at most 1"):
        tags.convert("a, b")
    with pytest.raises(ValueError, match="at most 1"):
        ratio.convert("1.5")
    with pytest.raises(ValueError, match="finite"):
        ratio.convert("nan")
    for bad in [{"type": "object", "properties": {"x": {"type": "object"}}},
                {"type": "object", "properties": {"x": {"type": "string", "format": "ipv4"}}},
                {"type": "object", "properties": {}, "required": ["y"]},
                {"type": "array"}]:
        with pytest.raises(ValueError, match="outside what elicitation allows"):
            parse_form(bad)


async def test_terminal_form_reads_and_writes_its_terminal_streams() -> None:
    written = io.StringIO()
    form = TerminalForm(opener=lambda: (io.StringIO("Ada\n\n\n\n"), written))
    fields = parse_form(Booking.model_json_schema())
    answer = await form.form("asker", "Details\x1b[31m", fields)
    assert answer.action == "accept"
    assert answer.content == {"name": "Ada", "seats": 1, "window": False}
    assert "\x1b" not in written.getvalue()  # the server's control characters are removed
    url = TerminalForm(opener=lambda: (io.StringIO("y\n"), io.StringIO()))
    assert (await url.url("asker", "Sign in", "https://example.org/x")).action == "accept"


def _read_until(master: int, wanted: str, timeout: float = 10.0) -> str:
    """What the terminal showed, read until ``wanted`` appears: the kernel hands what the
    slave side wrote to the master side through a work queue, so one read may see only a
    part of it on a busy machine."""
    shown = ""
    deadline = time.monotonic() + timeout
    while wanted not in shown:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([master], [], [], left)[0]:
            break
        shown += os.read(master, 65536).decode(errors="replace")
    return shown


async def test_terminal_form_on_a_pseudo_terminal() -> None:
    """The prompt opens its terminal by path, as it opens /dev/tty in chat."""
    master, slave = os.openpty()
    try:
        os.write(master, b"Ada\n3\nyes\n\n")
        form = TerminalForm(tty=os.ttyname(slave))
        answer = await form.form("asker", "Details", parse_form(Booking.model_json_schema()))
        assert answer.action == "accept"
        assert answer.content == {"name": "Ada", "seats": 3, "window": True}
        assert "Send these answers?" in _read_until(master, "Send these answers?")
    finally:
        os.close(master)
        os.close(slave)
