"""Issue #37 item 5c: ``mcp import`` of a real, mixed Claude Desktop / Cursor / VS Code file.

What is valid is imported; each refused entry is listed with its code and its fix, never its
secret; only ``--strict`` refuses the whole file (and writes nothing).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.cli import main

TOKEN = "ghp_realLookingSecretValue1234567890"


def mixed(root: Path) -> Path:
    """A Claude Desktop file as a user has it: two good servers among four that cannot be
    carried over as they are."""
    path = root / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {
        "filesystem": {"command": "files-server", "args": ["/home/me/docs"]},
        "github": {"command": "files-server", "args": ["github"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": TOKEN}},
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "${REMOTE_AUTH}"}},
        "leaky": {"command": "files-server", "args": ["--api-key", TOKEN]},
        "gone": {"command": "no-such-server-7f3a"},
        "old": {"type": "sse", "url": "https://old.example.com/sse"},
    }}))
    return path


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "files-server"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


EXPECTED_REFUSALS = {
    "github": "MCP_IMPORT_INVALID",
    "leaky": "MCP_CREDENTIAL_IN_ARGUMENTS",
    "gone": "MCP_COMMAND_NOT_FOUND",
    "old": "MCP_IMPORT_INVALID",
}


@pytest.mark.usefixtures("on_path")
def test_a_mixed_file_imports_what_is_valid_and_lists_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eyes.toml"
    source = mixed(tmp_path)
    code, out, err = cli(capsys, "--config", str(config), "mcp", "import", str(source))
    assert code == 0, err
    assert TOKEN not in out + err
    assert "imported filesystem (stdio)" in out
    assert "imported remote (streamable-http)" in out
    assert "2 server(s) added, 0 replaced, 4 refused" in out
    refused_lines = [line for line in err.splitlines() if line.startswith("refused ")]
    assert len(refused_lines) == 4, err
    for name, error_code in EXPECTED_REFUSALS.items():
        line = next(line for line in refused_lines if line.startswith(f"refused {name}:"))
        assert f": {error_code}: " in line
    # Each says its fix.
    assert "${GITHUB_PERSONAL_ACCESS_TOKEN}" in err
    assert "environment" in next(line for line in refused_lines if "leaky" in line)
    assert "install it" in err
    assert "Streamable HTTP endpoint" in err
    servers = tomllib.loads(config.read_text())["mcp"]["servers"]
    assert [s["id"] for s in servers] == ["filesystem", "remote"]
    assert TOKEN not in config.read_text()


@pytest.mark.usefixtures("on_path")
def test_json_lists_each_refusal_with_its_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eyes.toml"
    code, out, _ = cli(capsys, "--config", str(config), "mcp", "import",
                       str(mixed(tmp_path)), "--json")
    assert code == 0
    answer: dict[str, Any] = json.loads(out)
    assert [s["id"] for s in answer["imported"]] == ["filesystem", "remote"]
    assert {r["server"]: r["code"] for r in answer["refused"]} == EXPECTED_REFUSALS
    assert TOKEN not in out


@pytest.mark.usefixtures("on_path")
def test_strict_refuses_the_whole_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text("# mine\n")
    code, out, err = cli(capsys, "--config", str(config), "mcp", "import",
                         str(mixed(tmp_path)), "--strict")
    assert code == 1
    assert err.startswith("error MCP_IMPORT_INVALID: github: env.GITHUB_PERSONAL_ACCESS_TOKEN")
    assert TOKEN not in out + err
    assert config.read_text() == "# mine\n"


@pytest.mark.usefixtures("on_path")
def test_a_file_with_nothing_to_import_is_refused_listing_each(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eyes.toml"
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"servers": {
        "leaky": {"command": "files-server", "args": ["--token", TOKEN]},
        "gone": {"command": "no-such-server-7f3a"}}}))
    code, _, err = cli(capsys, "--config", str(config), "mcp", "import", str(source))
    assert code == 1
    assert err.splitlines()[0].startswith("error MCP_IMPORT_INVALID:")
    assert "  leaky: MCP_CREDENTIAL_IN_ARGUMENTS: " in err
    assert "  gone: MCP_COMMAND_NOT_FOUND: " in err
    assert TOKEN not in err
    assert not config.exists()
