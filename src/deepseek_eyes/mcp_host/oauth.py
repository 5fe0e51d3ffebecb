"""OAuth 2.1 for Streamable HTTP servers, through the SDK's providers.

Two grants. **client_credentials**: the SDK's ``ClientCredentialsOAuthProvider`` discovers
the protected-resource and authorization-server metadata from the first 401, fetches a
token, and refreshes on 401 or expiry (``PrivateKeyJWTOAuthProvider`` instead when the
client authenticates with a JWT it signs, :mod:`deepseek_eyes.mcp_host.client_assertion`).
We only give it storage that lives in this process's memory (tokens never touch disk, logs
or the audit) and read back a health view: whether a token is held and when it expires,
never the token.

**authorization_code** (PKCE, with the SDK's ``OAuthClientProvider``: RFC 9728 and RFC 8414 /
OIDC discovery, dynamic registration or a client ID metadata document, RFC 8707 resource
indicators, scope step-up on ``403 insufficient_scope``, refresh): a person signs in once
with ``deepseek-eyes mcp login`` (:mod:`deepseek_eyes.mcp_host.signin`), and the tokens live in
the data directory's token store (:mod:`deepseek_eyes.mcp_host.tokens`). A connection made by
the gateway or a command never opens a browser: with no token held it fails before sending
anything, and when the server wants a new authorization (a refused refresh, a scope step-up)
it fails with ``MCP_LOGIN_REQUIRED``, which names the command to run.

Every provider is wrapped in :class:`~deepseek_eyes.mcp_host.oauth_rules.RuledAuth` (in
:class:`OAuthHandle`, so no grant goes without it): endpoints learned from metadata are
https only (loopback excepted), the authorization code grant needs advertised S256 PKCE, and
every discovery document is read with a bound.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
)
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.client_assertion import assertion_provider
from deepseek_eyes.mcp_host.oauth_rules import RuledAuth, refuse_insecure, refuse_without_pkce
from deepseek_eyes.mcp_host.redirect import listening
from deepseek_eyes.mcp_host.tokens import (
    FileTokenStorage,
    set_token_root,
    token_path,
    token_store_root,
)
from deepseek_eyes.settings import McpAuthorizationCodeSettings, McpOAuthSettings

__all__ = ["Browser", "MemoryTokenStorage", "OAuthHandle", "authorization_code_provider",
           "file_storage", "follow_authorizations_in_connections", "login_required",
           "oauth_handle", "set_token_root"]

_HARNESS_BROWSER: list[Callable[[str], Awaitable[None]]] = []


def follow_authorizations_in_connections(browser: Callable[[str], Awaitable[None]]) -> None:
    """For the conformance harness only: let connections follow an authorization (a scope
    step-up) through ``browser`` instead of failing with ``MCP_LOGIN_REQUIRED``. Nothing in
    the product calls this; a connection there never signs in by itself."""
    _HARNESS_BROWSER[:] = [browser]


def login_required(url: str, why: str = "no sign-in is held",
                   scope: str | None = None) -> McpError:
    details: dict[str, Any] = {"url": url}
    hint = ""
    if scope:
        details["scope"] = scope[:1024]
        hint = (f"; it asks for scope {scope[:200]!r} (for a step-up asked only by a call, add "
                "it to the server's oauth scope first)")
    return McpError(
        f"the server needs a person to sign in ({why}){hint}: run `deepseek-eyes mcp login` "
        "with the server's id", code="MCP_LOGIN_REQUIRED", details=details)


class _Health(Protocol):
    def health(self) -> dict[str, Any]: ...


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
    """One provider per server, shared by every connection to it, held to the rules of
    :mod:`~deepseek_eyes.mcp_host.oauth_rules` (``pkce``: an authorization code grant)."""

    def __init__(self, provider: httpx2.Auth, storage: _Health, *, pkce: bool):
        self.provider: httpx2.Auth = RuledAuth(provider, pkce=pkce)
        self.storage = storage


def oauth_handle(url: str, oauth: McpOAuthSettings | McpAuthorizationCodeSettings
                 ) -> OAuthHandle:
    """Build the provider; the secrets are resolved from the environment here, at connect.

    Raises:
        ConfigError: ``CONFIG_ENV_MISSING`` when a reference names an unset variable.
        McpError: ``MCP_CLIENT_KEY_INVALID`` when a ``private_key_jwt`` key is unusable.
    """
    if isinstance(oauth, McpAuthorizationCodeSettings):
        store_root = token_store_root()
        if store_root is None:
            raise login_required(url, "this process keeps no token store")
        storage_ac = file_storage(store_root, url, oauth)
        return OAuthHandle(_SignedInOnly(url, oauth, storage_ac), storage_ac, pkce=True)
    storage = MemoryTokenStorage()
    issuer = oauth.issuer
    with warnings.catch_warnings():
        # Without a configured issuer the SDK warns that omitting it is deprecated; the
        # discovered one is used then (the protected resource's metadata names it).
        if issuer is None:
            warnings.simplefilter("ignore", MCPDeprecationWarning)
        provider: OAuthClientProvider
        if oauth.token_endpoint_auth_method == "private_key_jwt":  # noqa: S105 -- a method
            provider = PrivateKeyJWTOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=oauth.client_id.resolve(),
                assertion_provider=assertion_provider(oauth),
                scope=oauth.scope,
                issuer=issuer,
            )
        else:
            secret = oauth.client_secret
            if secret is None:  # pragma: no cover - the settings refuse it
                raise ValueError("client_secret is required for a client secret method")
            provider = ClientCredentialsOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=oauth.client_id.resolve(),
                client_secret=secret.resolve(),
                token_endpoint_auth_method=oauth.token_endpoint_auth_method,
                scope=oauth.scope,
                issuer=issuer,
            )
    return OAuthHandle(provider, storage, pkce=False)


def file_storage(root: Path, url: str, oauth: McpAuthorizationCodeSettings) -> FileTokenStorage:
    """The server's token file, with the pre-registered client (if any) that is never written.

    Raises:
        ConfigError: ``CONFIG_ENV_MISSING`` when a reference names an unset variable.
    """
    configured = None
    if oauth.client_id is not None:
        secret = oauth.client_secret.resolve() if oauth.client_secret is not None else None
        method = oauth.token_endpoint_auth_method or (
            "client_secret_basic" if secret is not None else "none")
        configured = OAuthClientInformationFull(
            client_id=oauth.client_id.resolve(), client_secret=secret,
            token_endpoint_auth_method=method, redirect_uris=None)
    return FileTokenStorage(token_path(root, url), url, configured)


#: How a sign-in's authorization URL reaches a person (or, in the conformance harness only,
#: an HTTP client that follows it).
Browser = Callable[[str], Awaitable[None]]


def authorization_code_provider(
    url: str, oauth: McpAuthorizationCodeSettings, storage: FileTokenStorage, *,
    browser: Browser | None = None,
) -> OAuthClientProvider:
    """The SDK's authorization-code provider for one server (PKCE S256 always).

    With ``browser``, each authorization the flow needs (the first, a step-up) is shown
    through it and its redirect caught on a loopback listener open only meanwhile; without,
    an authorization is ``MCP_LOGIN_REQUIRED``.
    """
    # Dynamic registration asks for a public client: a native app keeps no secret.
    method: Literal["none"] | None = "none" if oauth.client_id is None else None
    port = oauth.redirect_port or 0
    metadata = OAuthClientMetadata(
        client_name=oauth.client_name,
        redirect_uris=[AnyUrl(f"http://127.0.0.1:{port}/callback" if port else
                              "http://127.0.0.1/callback")],
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method=method, scope=oauth.scope,
    )

    async def no_person(authorization_url: str) -> None:
        scope = parse_qs(urlsplit(authorization_url).query).get("scope", [None])[0]
        raise login_required(url, "the server asked for a new authorization", scope)

    async def no_callback() -> AuthorizationCodeResult:  # pragma: no cover - never reached
        raise login_required(url)

    return _Provider(
        server_url=url, client_metadata=metadata, storage=storage,
        redirect_handler=no_person, callback_handler=no_callback,
        client_metadata_url=oauth.client_metadata_url, extra_scope=oauth.scope,
        browser=browser, redirect_port=oauth.redirect_port,
    )


class _Provider(OAuthClientProvider):
    """The SDK's provider, with three things of ours.

    * The scopes the settings name are asked for too: the SDK replaces the requested scope
      with the one the server's challenge or metadata names (the MCP spec's selection
      order), which would drop a configured one.
    * A stored token's expiry is read back from the store (the SDK loads tokens without
      it, so one that expired while nothing ran would be sent, refused, and cost a person).
    * Each authorization opens its own loopback listener and points the redirect URI at it
      (the SDK builds the URL and the token request from ``redirect_uris[0]``).
    """

    def __init__(self, *args: Any, extra_scope: str | None, browser: Browser | None,
                 redirect_port: int | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._extra_scope = extra_scope
        self._browser = browser
        self._redirect_port = redirect_port

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if isinstance(storage, FileTokenStorage):
            self.context.token_expiry_time = storage.expires_at()

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        # Before a person sees anything: no metadata at all (the legacy fallback) advertises
        # no PKCE either, and the endpoints the code and verifier go to must be https.
        metadata = self.context.oauth_metadata
        refuse_without_pkce(
            metadata.code_challenge_methods_supported if metadata is not None else None,
            str(metadata.issuer) if metadata is not None else None)
        if metadata is not None:
            refuse_insecure(str(metadata.authorization_endpoint), "authorization endpoint")
            refuse_insecure(str(metadata.token_endpoint), "token endpoint")
        if self._extra_scope:
            self.context.client_metadata.scope = union_scopes(
                self.context.client_metadata.scope, self._extra_scope)
        browser = self._browser
        if browser is None:
            return await super()._perform_authorization_code_grant()
        async with listening(self._redirect_port) as catcher:
            async def show(authorization_url: str) -> None:
                catcher.expect(authorization_url)
                await browser(authorization_url)

            self.context.client_metadata.redirect_uris = [AnyUrl(catcher.redirect_uri)]
            self.context.redirect_handler = show
            self.context.callback_handler = catcher.wait
            return await super()._perform_authorization_code_grant()


class _SignedInOnly(httpx2.Auth):
    """The provider of a connection no person watches: never a browser, never a
    registration; a new authorization is ``MCP_LOGIN_REQUIRED``.

    A 401 while a refresh token is held is answered by a refresh before anything else.
    A sign-in made meanwhile by ``mcp login`` (another process) is picked up: with no token,
    or after a flow that needed a person, the file is read again and, when it changed, the
    SDK's provider is rebuilt on it (it holds the tokens it loaded, and would not reload).
    """

    requires_response_body = True

    def __init__(self, url: str, oauth: McpAuthorizationCodeSettings,
                 storage: FileTokenStorage) -> None:
        self._url = url
        self._oauth = oauth
        self._storage = storage
        self._stale = False
        self._inner = self._provider()

    def _provider(self) -> OAuthClientProvider:
        # _HARNESS_BROWSER is empty in the product: only the conformance harness sets it.
        browser = _HARNESS_BROWSER[0] if _HARNESS_BROWSER else None
        return authorization_code_provider(self._url, self._oauth, self._storage,
                                           browser=browser)

    async def async_auth_flow(
        self, request: httpx2.Request,
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self._stale or await self._storage.get_tokens() is None:
            await self._storage.reload()
            self._inner = self._provider()
            self._stale = False
        tokens = await self._storage.get_tokens()
        if tokens is None:
            raise login_required(self._url)
        # A 401 sends the SDK's flow to a new authorization even when a refresh token is
        # held (a server that revoked the access token early): that is tried first, once,
        # by a provider that takes the stored token as expired.
        refreshable = tokens.refresh_token is not None
        for attempt in (1, 2):
            flow = self._inner.async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except McpError as exc:
                if exc.code != "MCP_LOGIN_REQUIRED":
                    raise
                if attempt == 1 and refreshable:
                    self._storage.take_as_expired()
                    self._inner = self._provider()
                    continue
                self._stale = True
                raise
            finally:
                await flow.aclose()
