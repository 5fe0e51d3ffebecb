"""OAuth 2.1 client_credentials for Streamable HTTP servers, through the SDK's provider.

The SDK's ``ClientCredentialsOAuthProvider`` discovers the protected-resource and
authorization-server metadata from the first 401, fetches a token, and refreshes on 401 or
expiry. We only give it storage that lives in this process's memory (tokens never touch
disk, logs or the audit) and read back a health view: whether a token is held and when it
expires, never the token.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPDeprecationWarning

from deepseek_eyes.settings import McpOAuthSettings

__all__ = ["MemoryTokenStorage", "OAuthHandle", "oauth_handle"]


class MemoryTokenStorage:
    """The SDK's 4-method ``TokenStorage``, in memory only."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None
        self.obtained_at: float | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens
        self.obtained_at = time.time()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info

    def health(self) -> dict[str, Any]:
        tokens = self._tokens
        if tokens is None:
            return {"status": "no-token", "expires_at": None}
        expires_at = (
            self.obtained_at + tokens.expires_in
            if tokens.expires_in is not None and self.obtained_at is not None else None
        )
        expired = expires_at is not None and expires_at <= time.time()
        return {"status": "expired" if expired else "token", "expires_at": expires_at}


class OAuthHandle:
    """One provider per server, shared by every connection to it."""

    def __init__(self, provider: ClientCredentialsOAuthProvider, storage: MemoryTokenStorage):
        self.provider = provider
        self.storage = storage


def oauth_handle(url: str, oauth: McpOAuthSettings) -> OAuthHandle:
    """Build the provider; the secrets are resolved from the environment here, at connect.

    Raises:
        ConfigError: ``CONFIG_ENV_MISSING`` when a reference names an unset variable.
    """
    storage = MemoryTokenStorage()
    issuer = oauth.issuer
    with warnings.catch_warnings():
        # Without a configured issuer the SDK warns that omitting it is deprecated; the
        # discovered one is used then (the protected resource's metadata names it).
        if issuer is None:
            warnings.simplefilter("ignore", MCPDeprecationWarning)
        provider = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=oauth.client_id.resolve(),
            client_secret=oauth.client_secret.resolve(),
            token_endpoint_auth_method=oauth.token_endpoint_auth_method,
            scope=oauth.scope,
            issuer=issuer,
        )
    return OAuthHandle(provider, storage)
