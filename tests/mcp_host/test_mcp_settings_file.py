from __future__ import annotations

import datetime as dt
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.errors import ConfigError, McpError
from deepseek_eyes.mcp_host.importer import import_servers, server_id_for
from deepseek_eyes.mcp_host.settings_file import (
    add_servers,
    drop_selectors,
    dumps,
    edit_selectors,
    remove_server,
    set_server_value,
)

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
    ({"mcpServers": {"a": {"command": "x", "args": ["${workspaceFolder}"]}}},
     "argument 1: ${workspaceFolder} is a VS Code variable"),
    ({"mcpServers": {"a": {"command": "x", "args": ["--k", "${env:KEY}"]}}},
     "argument 2: ${env:KEY} is an environment reference, and interpolation in arguments"),
    ({"mcpServers": {"a": {"command": "x", "env": {"K": "${input:key}"}}}},
     "env.K: ${input:key} is a VS Code input"),
    ({"mcpServers": {"a": {"command": "x", "env": {"K": "${TOKEN:-sk-default}"}}}},
     "env.K: ${TOKEN:-…} is a shell-style default or check, which is not expanded here; set "
     "TOKEN in the environment and write \"${TOKEN}\""),
    ({"mcpServers": {"a": {"command": "x", "env": {"K": "${workspaceFolder}"}}}},
     "env.K: ${workspaceFolder} is a VS Code variable"),
    ({"mcpServers": {"a": {"url": "https://h/mcp", "headers": {"A": "${input:tok}"}}}},
     "headers.A: ${input:tok} is a VS Code input"),
    ({"servers": {"a": {"command": "x", "envFile": ".env"}}}, "envFile"),
    ({"mcpServers": {"A": {"command": "x"}, "a": {"command": "y"}}}, "twice"),
    ({"other": {}}, "no mcpServers"),
])
def test_import_refusals(tmp_path: Path, doc: dict[str, Any], fragment: str) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(McpError) as refused:
        import_servers(path, strict=True)  # each refusal's own words
    assert refused.value.code == "MCP_IMPORT_INVALID"
    assert fragment in refused.value.message


def test_import_vscode_settings_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uvx = tmp_path / "bin" / "uvx"
    uvx.parent.mkdir()
    uvx.write_text("#!/bin/sh\n", encoding="utf-8")
    uvx.chmod(0o755)
    monkeypatch.setenv("PATH", str(uvx.parent))
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mcp": {"servers": {"time": {
        "type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}}))
    result = import_servers(path)
    assert result.servers == [{"id": "time", "name": "time", "enabled": True,
                               "transport": "stdio", "command": "uvx",
                               "args": ["mcp-server-time"]}]


@pytest.mark.parametrize(("spec", "fragment"), [
    ({"command": "npx", "args": ["-y", "srv", "--api-key", "k-123456"]},
     "argument 3 (--api-key) is followed by a credential"),
    ({"command": "npx", "args": ["srv", "--token=k-123456"]}, "argument 2 (--token=…)"),
    ({"command": "docker", "args": ["run", "-e", "GITHUB_TOKEN=k-123456", "img"]},
     "argument 3 (GITHUB_TOKEN=…)"),
    ({"url": "https://bot:k-123456@h.example/mcp"}, "the url carries a password"),
])
def test_import_refuses_credentials_in_arguments(tmp_path: Path, spec: dict[str, Any],
                                                 fragment: str) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"mcpServers": {"a": spec}}))
    with pytest.raises(McpError) as refused:
        import_servers(path)
    assert refused.value.code == "MCP_CREDENTIAL_IN_ARGUMENTS"
    assert fragment in refused.value.message
    assert "k-123456" not in refused.value.message


COMMENTED = """# DeepSeekEyes settings, kept by hand.
[runtime]
tool_sources = ["look", "mcp"]  # the order tools are offered in

# The servers, most trusted first.
[[mcp.servers]]
id = "a"              # the id is the tool prefix
transport = "stdio"
command = "a-server"
allow = { tools = ["x"] }  # only x for now

[[mcp.servers]]
# b is experimental
id = "b"
transport = "stdio"
command = "b-server"

[mcp]
max_tools = 10  # shared by every server
"""


def test_edits_keep_comments_and_order(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(COMMENTED)
    edit_selectors(path, "a", "allow", "tools", ("y*",))
    set_server_value(path, "b", "enabled", False)
    set_server_value(path, "a", "resources_enabled", True)
    add_servers(path, [{"id": "c", "transport": "stdio", "command": "c-server",
                        "env": {"C_TOKEN": {"env": "MY_C_TOKEN"}}}])
    text = path.read_text()
    for comment in ("# DeepSeekEyes settings, kept by hand.", "# the order tools are offered in",
                    "# The servers, most trusted first.", "# the id is the tool prefix",
                    "# only x for now", "# b is experimental", "# shared by every server"):
        assert comment in text, comment
    data = tomllib.loads(text)
    servers = data["mcp"]["servers"]
    assert [s["id"] for s in servers] == ["a", "b", "c"]
    assert servers[0]["allow"]["tools"] == ["x", "y*"]
    assert servers[0]["resources_enabled"] is True
    assert servers[1]["enabled"] is False
    assert servers[2]["env"] == {"C_TOKEN": {"env": "MY_C_TOKEN"}}
    assert data["mcp"]["max_tools"] == 10
    assert text.index("[runtime]") < text.index("[[mcp.servers]]") < text.index("[mcp]")
    remove_server(path, "b")
    text = path.read_text()
    assert "# b is experimental" not in text
    assert "# only x for now" in text
    assert [s["id"] for s in tomllib.loads(text)["mcp"]["servers"]] == ["a", "c"]
    before = path.read_bytes()
    with pytest.raises(McpError) as exists:
        add_servers(path, [{"id": "a", "transport": "stdio", "command": "z"}])
    assert exists.value.code == "MCP_SERVER_EXISTS"
    with pytest.raises(ConfigError) as invalid:
        set_server_value(path, "a", "risk_policy", "yolo")
    assert invalid.value.code == "CONFIG_INVALID"
    with pytest.raises(McpError) as unknown:
        remove_server(path, "zz")
    assert unknown.value.code == "MCP_SERVER_UNKNOWN"
    assert path.read_bytes() == before


def test_first_server_in_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "new.toml"
    add_servers(path, [{"id": "t", "transport": "stdio", "command": "t"}])
    assert tomllib.loads(path.read_text()) == {
        "mcp": {"servers": [{"id": "t", "transport": "stdio", "command": "t"}]}}


def test_drop_selectors_removes_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[mcp.servers]]\nid = "t"\ntransport = "stdio"\ncommand = "t"\n'
                    'allow = { tools = ["a", "b"] }  # kept by hand\n')
    drop_selectors(path, "t", "allow", "tools", ("a", "zzz"))  # one listed, one not
    drop_selectors(path, "t", "deny", "tools", ("a",))  # no deny list: no change
    text = path.read_text()
    assert tomllib.loads(text)["mcp"]["servers"][0]["allow"] == {"tools": ["b"]}
    assert "# kept by hand" in text
    assert "deny" not in text
    with pytest.raises(McpError) as unknown:
        drop_selectors(path, "nope", "allow", "tools", ("a",))
    assert unknown.value.code == "MCP_SERVER_UNKNOWN"
