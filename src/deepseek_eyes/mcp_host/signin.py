"""``deepseek-eyes mcp login``: a person signs in to a server (authorization code + PKCE).

The SDK's ``OAuthClientProvider`` does the protocol (discovery, registration, PKCE, the
token exchange, RFC 8707 resource); what only a host has is a way to show the authorization
URL to a person (``open_url``: the CLI prints it and opens a browser when a desktop is
present) and a listener that catches the redirect back
(:class:`~deepseek_eyes.mcp_host.redirect.RedirectCatcher`, which checks ``state``).

The sign-in is driven by a connection like the manager's (the handshake, then the tool
list: some servers let ``initialize`` through and want a token only for the catalog); the
first 401 starts the flow, and the retried request proves the token works. Tokens held
before are dropped first (a login means a new grant); a client registered earlier is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.connection import build_client, learn_capabilities, map_error
from deepseek_eyes.mcp_host.oauth import OAuthHandle, authorization_code_provider, file_storage
from deepseek_eyes.settings import McpAuthorizationCodeSettings, McpServerSettings

__all__ = ["sign_in", "sign_out"]

#: Failures that already say what went wrong: reported as they are, not as a failed login.
_OWN_CODES = frozenset({"MCP_LOGIN_FAILED", "MCP_TIMEOUT", "CONFIG_ENV_MISSING",
                        "MCP_OAUTH_INSECURE_ENDPOINT", "MCP_OAUTH_NO_PKCE",
                        "MCP_OAUTH_DOCUMENT_TOO_LARGE"})


async def _connect_and_list(server: McpServerSettings, handle: OAuthHandle) -> None:
    """Connect as the manager would and list the tools: a server may let ``initialize``
    through and ask for a token only for its catalog."""
    mode = "legacy" if server.protocol == "legacy" else server.protocol
    client = build_client(server, mode=mode, oauth=handle, message_handler=None)
    async with client:
        await learn_capabilities(client, mode)
        caps = client.server_capabilities
        if caps is not None and caps.tools is not None:
            await client.list_tools()


def _auth_settings(server: McpServerSettings) -> tuple[str, McpAuthorizationCodeSettings]:
    if server.url is None or not isinstance(server.oauth, McpAuthorizationCodeSettings):
        raise McpError(f"{server.id} does not sign in: its settings have no oauth of type "
                       "authorization_code", code="MCP_LOGIN_UNSUPPORTED",
                       details={"server": server.id})
    return server.url, server.oauth


async def sign_in(server: McpServerSettings, root: Path, *,
                  open_url: Callable[[str], Awaitable[None]],
                  timeout: float = 300.0) -> dict[str, Any]:
    """Sign in to ``server``, store the tokens under ``root``; the token health (no token).

    ``open_url`` is given the authorization URL and must bring it to the person (or, in the
    conformance harness only, follow it itself).

    Raises:
        McpError: ``MCP_LOGIN_UNSUPPORTED`` (not an authorization-code server),
            ``MCP_LOGIN_FAILED`` (refused, or the flow failed), ``MCP_TIMEOUT``.
        McpError: ``MCP_OAUTH_INSECURE_ENDPOINT``, ``MCP_OAUTH_NO_PKCE``,
            ``MCP_OAUTH_DOCUMENT_TOO_LARGE``: the authorization server broke a rule of
            :mod:`~deepseek_eyes.mcp_host.oauth_rules` (nothing more was sent).
        ConfigError: ``CONFIG_ENV_MISSING`` for an unset client reference.
    """
    url, oauth = _auth_settings(server)
    storage = file_storage(root, url, oauth)
    provider = authorization_code_provider(url, oauth, storage, browser=open_url)
    await storage.forget_tokens()
    try:
        async with asyncio.timeout(timeout):
            await _connect_and_list(server, OAuthHandle(provider, storage, pkce=True))
    except TimeoutError:
        raise McpError(f"the sign-in did not finish within {timeout:g} s",
                       code="MCP_TIMEOUT") from None
    except Exception as exc:  # the SDK's OAuth errors and transport failures alike
        mapped = map_error(exc, connecting=True)
        if mapped.code in _OWN_CODES:
            raise mapped from None
        raise McpError(f"the sign-in failed: {mapped.message}", code="MCP_LOGIN_FAILED",
                       details={"cause": mapped.code}) from None
    if await storage.get_tokens() is None:
        raise McpError("the server did not ask for a sign-in (it answered its catalog "
                       "without a token); nothing was stored", code="MCP_LOGIN_FAILED")
    return storage.health()


def sign_out(server: McpServerSettings, root: Path) -> bool:
    """Remove the server's stored tokens and registration; whether there were any.

    Raises:
        McpError: ``MCP_LOGIN_UNSUPPORTED``.
    """
    url, oauth = _auth_settings(server)
    if oauth.client_id is not None:
        # Only the file matters: the pre-registered client's secret is never resolved here.
        oauth = oauth.model_copy(update={"client_id": None, "client_secret": None,
                                         "token_endpoint_auth_method": None})
    return file_storage(root, url, oauth).remove()
