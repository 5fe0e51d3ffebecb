"""Tool definitions: risk derived from the annotations, and every table honest about it."""

from __future__ import annotations

import pytest

from deepseek_eyes.browser.tools import TOOLS as BROWSER_TOOLS
from deepseek_eyes.desktop.tools import TOOLS as DESKTOP_TOOLS
from deepseek_eyes.terminal.transport.tools import ANNOTATIONS, RUNTIME_TOOLS
from deepseek_eyes.toolkit.spec import READ, Annotations, ToolDef, object_schema
from deepseek_eyes.vision_server.server import vision_tools

WRITE = Annotations(read_only=False, destructive=True, idempotent=False, open_world=False)
TABLES = {"browser": BROWSER_TOOLS, "desktop": DESKTOP_TOOLS, "terminal": RUNTIME_TOOLS,
          "vision": vision_tools(open_world=True)}


def test_risk_is_derived_from_the_annotations_unless_overridden() -> None:
    schema = object_schema({})
    assert ToolDef("t_read", "", schema, READ).risk == "read"
    assert ToolDef("t_write", "", schema, WRITE).risk == "write"
    assert ToolDef("t_exec", "", schema, WRITE, "exec").risk == "exec"


def test_object_schema_is_closed() -> None:
    assert object_schema({"a": {"type": "string"}}, ("a",)) == {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
        "additionalProperties": False}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_table_is_honest(table: str) -> None:
    tools = TABLES[table]
    assert len({t.name for t in tools}) == len(tools)
    for tool in tools:
        assert tool.parameters["type"] == "object"
        # A read-only tool is never gated as more than a read; one that is not read-only
        # is a read only where its table says why (an override), never by accident.
        if tool.annotations.read_only:
            assert tool.risk == "read", tool.name
        elif tool.risk == "read":
            assert tool.risk_override == "read", tool.name


def test_the_terminal_runtime_face_shares_the_mcp_annotations() -> None:
    for tool in RUNTIME_TOOLS:
        assert tool.annotations is ANNOTATIONS[tool.name]
    risks = {t.name: t.risk for t in RUNTIME_TOOLS}
    assert risks == {"terminal_plan": "read", "terminal_execute": "exec", "terminal_run": "exec",
                     "terminal_session_status": "read", "terminal_receipt_get": "read"}
    assert not {"terminal_approve", "terminal_deny"} & set(risks)
