from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
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


def http_server(url: str) -> dict[str, Any]:
    return {"id": "h", "transport": "streamable-http", "url": url}


def accepted(host: str) -> bool:
    try:
        Settings.model_validate({"mcp": {"servers": [http_server(f"http://{host}:9/mcp")]}})
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("host", [
    "localhost", "LOCALHOST", "foo.localhost", "a.b-c.localhost", "127.0.0.1",
    "127.255.255.254", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]",
    "[0:0:0:0:0:ffff:7f00:1]", "[::ffff:127.9.8.7]",
])
def test_every_loopback_spelling_of_the_seed_may_use_plain_http(host: str) -> None:
    assert accepted(host)


@pytest.mark.parametrize("host", [
    "example.com", "localhost.example.com", "foolocalhost", "localhost-x", ".localhost",
    "-a.localhost", "a..localhost", "[::ffff:10.0.0.1]", "[::ffff:8.8.8.8]", "[::10.0.0.1]",
    "[::]", "[::2]", "0.0.0.0",  # noqa: S104 -- a URL host that must be refused, no bind
    "127.1", "2130706433", "10.0.0.1", "[fe80::1]",
    "[::ffff:0:127.0.0.1]", "[64:ff9b::127.0.0.1]",
])
def test_every_other_spelling_needs_https(host: str) -> None:
    assert not accepted(host)


@given(st.ip_addresses(v=4))
def test_ipv4_mapped_and_compatible_forms_follow_the_ipv4_address(address: Any) -> None:
    loopback = address.is_loopback
    assert accepted(str(address)) is loopback
    assert accepted(f"[::ffff:{address}]") is loopback
    # ::0.0.0.1 is ::1 itself, the IPv6 loopback.
    assert accepted(f"[::{address}]") is (loopback or str(address) == "0.0.0.1")


@given(st.ip_addresses(v=6))
def test_ipv6_is_loopback_only_as_one_of_its_spellings(address: Any) -> None:
    mapped = address.ipv4_mapped
    compatible = address.packed[:12] == bytes(12)
    expected = address.is_loopback or (mapped is not None and mapped.is_loopback) or (
        compatible and address.packed[12] == 127)
    assert accepted(f"[{address}]") is expected


@given(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True),
       st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True))
def test_names_under_localhost_only(label: str, name: str) -> None:
    assert accepted(f"{label}.localhost")
    if name != "localhost" and not name.endswith(".localhost"):
        assert not accepted(name)
