from __future__ import annotations

import datetime as dt
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.errors import ConfigError, McpError
from deepseek_eyes.mcp.importer import import_servers, server_id_for
from deepseek_eyes.mcp.settings_file import dumps, edit_selectors

SAMPLES: list[dict[str, Any]] = [
    {},
    {"a": 1, "b": -2.5, "c": True, "d": "x\"y\\z\n\t\u0001é", "e": [1, 2], "f": []},
    {"mcp": {"enabled": False, "servers": [
        {"id": "a", "env": {"PATH": {"env": "P"}}, "allow": {"tools": ["x", "y*"]}},
        {"id": "b", "args": ["--x", "y z"], "deny": {}, "nested": {"deep": {"k": [[1], ["s"]]}}},
    ]}},
    {"weird key": {"dotted.key": 1, "": "empty"}, "dates": {"d": dt.date(2026, 1, 2)}},
    {"mixed": [1, {"a": 1}], "tables": [{"x": {"y": {"z": 1}}}, {}]},
    {"f": {"inf": float("inf"), "ninf": float("-inf")}, "long": {"v": "x" * 200}},
]


@pytest.mark.parametrize("data", SAMPLES)
def test_toml_writer_round_trips(data: dict[str, Any]) -> None:
    assert tomllib.loads(dumps(data)) == data


def test_edit_selectors_keeps_other_sections(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[runtime]\n\n[[mcp.servers]]\nid = "t"\ntransport = "stdio"\n'
                    'command = "t"\n')
    edit_selectors(path, "t", "allow", "tools", ("a", "b*", "a"))
    edit_selectors(path, "t", "deny", "tools", ("b2",))
    data = tomllib.loads(path.read_text())
    assert data["mcp"]["servers"][0]["allow"] == {"tools": ["a", "b*"]}
    assert data["mcp"]["servers"][0]["deny"] == {"tools": ["b2"]}
    assert "runtime" in data
    with pytest.raises(ConfigError) as bad:
        edit_selectors(path, "t", "allow", "prompts", ("*",))
    assert bad.value.code == "CONFIG_INVALID"
    assert bad.value.details["path"] == str(path.absolute())
    with pytest.raises(McpError) as unknown:
        edit_selectors(path, "nope", "allow", "tools", ("a",))
    assert unknown.value.code == "MCP_SERVER_UNKNOWN"


@pytest.mark.parametrize(("name", "expected"), [
    ("My Server.v2", "my-server-v2"), ("a__b", "a_b"), ("!!!", "server"),
    ("x" * 40, "x" * 32)])
def test_server_ids(name: str, expected: str) -> None:
    assert server_id_for(name) == expected


@pytest.mark.parametrize(("doc", "fragment"), [
    ({"mcpServers": {"a": {"command": "x", "env": {"K": "literal"}}}}, "env.K holds a literal"),
    ({"mcpServers": {"a": {"url": "https://h/mcp", "headers": {"X": "Bearer ${T}"}}}},
     "headers.X holds a literal"),
    ({"mcpServers": {"a": {"type": "sse", "url": "https://h/sse"}}}, "SSE transport"),
    ({"mcpServers": {"a": {"command": "x", "args": ["${workspaceFolder}"]}}}, "interpolation"),
    ({"mcpServers": {"a": {"command": "x", "env": {"K": "${input:key}"}}}}, "literal"),
    ({"servers": {"a": {"command": "x", "envFile": ".env"}}}, "envFile"),
    ({"mcpServers": {"A": {"command": "x"}, "a": {"command": "y"}}}, "twice"),
    ({"other": {}}, "no mcpServers"),
])
def test_import_refusals(tmp_path: Path, doc: dict[str, Any], fragment: str) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(McpError) as refused:
        import_servers(path)
    assert refused.value.code == "MCP_IMPORT_INVALID"
    assert fragment in refused.value.message


def test_import_vscode_settings_shape(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mcp": {"servers": {"time": {
        "type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}}))
    result = import_servers(path)
    assert result.servers == [{"id": "time", "name": "time", "enabled": True,
                               "transport": "stdio", "command": "uvx",
                               "args": ["mcp-server-time"]}]
