"""``mcp register --sign-in`` (and the web console's form): an HTTP server a person signs
in to is written with ``oauth = { type = "authorization_code" }``, valid for the loader;
a stdio server has no sign-in."""

from __future__ import annotations

import pytest

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.registration import registered_entry
from deepseek_eyes.settings import McpAuthorizationCodeSettings, McpServerSettings


def test_an_http_server_that_signs_in_is_written_for_the_authorization_code_flow() -> None:
    entry = registered_entry("remote", url="https://mcp.example/mcp", sign_in=True)
    assert entry["oauth"] == {"type": "authorization_code"}
    loaded = McpServerSettings.model_validate(entry)
    assert isinstance(loaded.oauth, McpAuthorizationCodeSettings)
    assert "oauth" not in registered_entry("plain", url="https://mcp.example/mcp")


def test_a_stdio_server_has_no_sign_in() -> None:
    with pytest.raises(McpError) as refused:
        registered_entry("local", command=["server"], sign_in=True)
    assert refused.value.code == "MCP_ARGUMENTS_INVALID"
