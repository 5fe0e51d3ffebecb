"""The MCP host's client, driven by the official conformance suite's client scenarios.

``conformance client --command "python scripts/mcp_conformance_client.py"`` runs this with
the scenario's URL as the last argument and ``MCP_CONFORMANCE_SCENARIO`` (and, for auth
scenarios, ``MCP_CONFORMANCE_CONTEXT`` with the client credentials) in the environment.
Everything goes through our own code: settings validation, :class:`McpManager` (connect,
bounded discovery), :class:`McpHost` (policy, admission, audit) and the OAuth provider.
Credentials from the context are put in this process's environment and referenced as
``{ env = "NAME" }``, exactly as an operator would configure them.

The authorization-code scenarios sign in first with :func:`sign_in`, the code ``mcp login``
runs, then connect through the manager on the stored tokens. Only the "browser" differs:
the suite's authorization server approves at once and redirects, so this harness follows
the authorization URL itself with an HTTP client, which lands on our loopback listener
(``mcp login`` shows the URL to a person instead; nothing in the product follows it). A
scope step-up asked on a tools call is followed the same way, through the one hook the
product never sets (``follow_authorizations_in_connections``).

The elicitation scenario installs the elicitor ``chat`` installs at a terminal, with its
own prompt (``cli/elicit.py``), and a scripted keyboard that presses Enter at each question
(the server's default) and at the confirmation.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2

from deepseek_eyes.cli.elicit import ask_form, ask_url
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.elicitation import Answer, FormField, install_elicitor
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.oauth import follow_authorizations_in_connections, set_token_root
from deepseek_eyes.mcp_host.signin import sign_in
from deepseek_eyes.settings import McpSettings
from deepseek_eyes.store.blobs import BlobStore

#: The tool each scenario expects to be called, and its arguments.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "auth/scope-step-up": ("test-tool", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


class DefaultsPerson:
    """The person at chat's prompt, for the elicitation scenario: an empty line for every
    question (take the server's default) and for the confirmation (send). The prompt
    itself is chat's own (``cli/elicit.py``); only the keyboard is scripted."""

    async def form(self, server: str, message: str, fields: Sequence[FormField]) -> Answer:
        return ask_form(server, message, fields, lambda: "", _show)

    async def url(self, server: str, message: str, url: str) -> Answer:
        return ask_url(server, message, url, lambda: "", _show)


def _show(text: str) -> None:
    print(text, end="")


def server_settings(scenario: str, url: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": "conformance", "transport": "streamable-http", "url": url,
                             "allow": {"tools": _allowed(scenario)},
                             "connect_timeout": 20, "call_timeout": 20}
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}"))
    if scenario in CLIENT_CREDENTIALS:
        os.environ["CONFORMANCE_CLIENT_ID"] = context["client_id"]
        os.environ["CONFORMANCE_CLIENT_SECRET"] = context["client_secret"]
        method = context.get("token_endpoint_auth_method", "client_secret_basic")
        entry["oauth"] = {"client_id": {"env": "CONFORMANCE_CLIENT_ID"},
                          "client_secret": {"env": "CONFORMANCE_CLIENT_SECRET"},
                          "token_endpoint_auth_method": method}
    elif scenario in PRIVATE_KEY_JWT:
        # The suite hands over a fresh key's PEM; an operator would reference it the same way
        # (or name a 0600 file with private_key_file).
        os.environ["CONFORMANCE_CLIENT_ID"] = context["client_id"]
        os.environ["CONFORMANCE_CLIENT_KEY"] = context["private_key_pem"]
        entry["oauth"] = {"client_id": {"env": "CONFORMANCE_CLIENT_ID"},
                          "token_endpoint_auth_method": "private_key_jwt",
                          "private_key": {"env": "CONFORMANCE_CLIENT_KEY"},
                          "signing_algorithm": context.get("signing_algorithm", "RS256")}
    elif scenario.startswith("auth/"):
        oauth: dict[str, Any] = {"type": "authorization_code"}
        if "client_id" in context:
            os.environ["CONFORMANCE_CLIENT_ID"] = context["client_id"]
            oauth["client_id"] = {"env": "CONFORMANCE_CLIENT_ID"}
        if "client_secret" in context:
            os.environ["CONFORMANCE_CLIENT_SECRET"] = context["client_secret"]
            oauth["client_secret"] = {"env": "CONFORMANCE_CLIENT_SECRET"}
        if scenario in CIMD:
            oauth["client_metadata_url"] = CIMD_URL
        entry["oauth"] = oauth
    return entry


#: Scenarios that hand the client pre-registered client_credentials.
CLIENT_CREDENTIALS = {"auth/client-credentials-basic", "auth/pre-registration"}
#: Scenarios that hand the client a private key for private_key_jwt client authentication.
PRIVATE_KEY_JWT = {"auth/client-credentials-jwt"}
#: Scenarios whose authorization server takes a client ID metadata document's URL.
CIMD = {"auth/basic-cimd", "auth/offline-access-scope"}
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def follow(authorization_url: str) -> None:
    """The conformance harness's browser: the suite's server approves and redirects to our
    loopback listener, so following the redirects is the whole sign-in."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=20) as http:
        await http.get(authorization_url)


def _allowed(scenario: str) -> list[str]:
    return [CALLS[scenario][0]] if scenario in CALLS else []


async def main(url: str, scenario: str) -> int:
    settings = McpSettings.model_validate({"servers": [server_settings(scenario, url)]})
    if scenario in CALLS and scenario.startswith("elicitation"):
        install_elicitor(DefaultsPerson())  # as chat does at a terminal, before connecting
    with tempfile.TemporaryDirectory() as tmp:
        set_token_root(Path(tmp) / "tokens")
        server = settings.servers[0]
        if server.oauth is not None and server.oauth.type == "authorization_code":
            # A scope step-up on a tools call is followed here as a person would follow it
            # after MCP_LOGIN_REQUIRED; the product's connections never do this.
            follow_authorizations_in_connections(follow)
            health = await sign_in(server, Path(tmp) / "tokens", open_url=follow, timeout=40)
            print(f"signed in: {health['status']}")
        host = McpHost(McpManager(settings), blobs=BlobStore(Path(tmp) / "blobs"),
                       artifacts=Path(tmp) / "artifacts", audit=McpAudit(None))
        await host.manager.start(wait=25)
        try:
            state = host.manager.servers["conformance"]
            print(f"status={state.status} protocol={state.protocol} "
                  f"last_error={state.last_error}")
            if state.status != "ready":
                return 1
            if scenario in CALLS:
                name, arguments = CALLS[scenario]
                result = await host.call_tool(host.public_name_of("conformance", name),
                                              arguments)
                print(f"{name}: is_error={result.is_error} preview={result.preview[:200]!r}")
                return 1 if result.is_error else 0
            return 0
        finally:
            await host.manager.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))))
