from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from deepseek_eyes.mcp_host.names import public_name
from deepseek_eyes.settings import Settings


def server(**fields: Any) -> dict[str, Any]:
    return {"id": "s1", "transport": "stdio", "command": "x", **fields}


@pytest.mark.parametrize(("entry", "fragment"), [
    (server(args=["--api-key=abc"]), r"args\[0\]: argument 1 \(--api-key=…\) passes a credential"),
    (server(env={"TOKEN": "literal"}), "literal secret"),
    (server(url="https://h/mcp"), "takes no url"),
    (server(allow={"tools": ["*"]}), "a bare"),
    (server(allow={"tools": ["a*b"]}), "prefix followed by one trailing"),
    (server(id="Bad Id"), "id must be"),
    ({"id": "h", "transport": "streamable-http", "url": "https://u:p@h/mcp"}, "user information"),
    ({"id": "h", "transport": "streamable-http", "url": "https://h/mcp?token=1"}, "credential"),
    ({"id": "h", "transport": "streamable-http", "url": "http://example.com/mcp"}, "https://"),
    ({"id": "h", "transport": "streamable-http", "url": "https://h/mcp",
      "headers": {"Authorization": {"env": "A"}},
      "oauth": {"client_id": {"env": "I"}, "client_secret": {"env": "S"}}},
     "no Authorization header"),
    ({"id": "h", "transport": "streamable-http", "url": "https://h/mcp",
      "oauth": {"client_id": {"env": "I"}, "client_secret": "literal"}}, "literal secret"),
])
def test_invalid_servers_are_refused(entry: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        Settings.model_validate({"mcp": {"servers": [entry]}})


def test_ids_and_names_are_unique_case_insensitively() -> None:
    with pytest.raises(ValidationError, match="used twice"):
        Settings.model_validate({"mcp": {"servers": [server(), server()]}})
    with pytest.raises(ValidationError, match="case-insensitive"):
        Settings.model_validate({"mcp": {"servers": [
            server(name="Files"), server(id="s2", name="FILES")]}})


def test_defaults_and_loopback_http() -> None:
    settings = Settings.model_validate({"mcp": {"servers": [
        {"id": "h", "transport": "streamable-http", "url": "http://127.0.0.1:9/mcp"}]}})
    entry = settings.mcp.servers[0]
    assert settings.mcp.enabled
    assert entry.tools_enabled
    assert not entry.resources_enabled
    assert entry.allow.tools == ()
    assert entry.risk_policy == "allow"


def test_public_names_are_stable_and_bounded() -> None:
    assert public_name("fs", "read_file") == "mcp__fs__read_file"
    dotted = public_name("fs", "read.file")
    assert dotted != public_name("fs", "read_file")
    assert dotted == public_name("fs", "read.file")
    assert len(public_name("fs", "x" * 300)) == 64


def test_oauth_issuer_must_be_https_unless_loopback() -> None:
    from deepseek_eyes.settings import McpOAuthSettings

    creds = {"client_id": {"env": "CID"}, "client_secret": {"env": "CSECRET"}}
    assert McpOAuthSettings.model_validate({**creds, "issuer": "https://auth.example"}).issuer
    assert McpOAuthSettings.model_validate({**creds, "issuer": "http://127.0.0.1:9/"}).issuer
    with pytest.raises(ValueError, match="https"):
        McpOAuthSettings.model_validate({**creds, "issuer": "http://auth.example"})


def test_config_check_accepts_persist_results(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from deepseek_eyes.cli import cli

    assert Settings.model_validate({}).mcp.persist_results
    path = tmp_path / "eyes.toml"
    path.write_text("[mcp]\npersist_results = false\nmax_result_chars = 2000\n",
                    encoding="utf-8")
    done = CliRunner().invoke(cli, ["config", "check", str(path)])
    assert done.exit_code == 0, done.output
    assert done.stdout.endswith(": valid\n")
    path.write_text('[mcp]\npersist_results = "sometimes"\n', encoding="utf-8")
    refused = CliRunner().invoke(cli, ["config", "check", str(path)])
    assert refused.exit_code != 0  # a bool, not any string
