"""``deepseek-eyes mcp login``: a person signs in to a server (authorization code + PKCE).

The SDK's ``OAuthClientProvider`` does the protocol (discovery, registration, PKCE, the
token exchange, RFC 8707 resource); this module gives it the two things only a host has:
a way to show the authorization URL to a person (``open_url``: the CLI prints it and opens a
browser when a desktop is present) and a listener that catches the redirect back
(:class:`RedirectCatcher`: 127.0.0.1 only, an ephemeral port unless the settings pin one, one
path, a bounded request).

The catcher checks ``state`` itself, before the SDK does: a redirect whose ``state`` is not the
one in the URL we showed is answered 400 and ignored, so another local process cannot end a
sign-in by knocking on the port (the SDK would fail the whole flow on a mismatch). A redirect
carrying ``error`` ends the sign-in with ``MCP_LOGIN_FAILED``.

The sign-in is driven by one ``initialize`` POST through the provider: its 401 starts the
flow, and the retried request proves the token works. Tokens held before are dropped first
(a login means a new grant); a client registered earlier is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.oauth import authorization_code_provider, file_storage
from deepseek_eyes.settings import McpAuthorizationCodeSettings, McpServerSettings

__all__ = ["RedirectCatcher", "sign_in", "sign_out"]

#: A redirect request bigger than this (request line and headers) is refused.
_MAX_REQUEST = 16 * 1024
_CALLBACK = "/callback"


def _page(title: str) -> bytes:
    return (f"<!doctype html><title>{escape(title)}</title><p>{escape(title)}</p>"
            "<p>You can close this window.</p>").encode()


class RedirectCatcher:
    """A loopback listener that takes the one authorization redirect of a sign-in."""

    def __init__(self, port: int | None = None) -> None:
        self._port = port or 0
        self._server: asyncio.Server | None = None
        self._expected: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def redirect_uri(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}{_CALLBACK}"

    async def __aenter__(self) -> RedirectCatcher:
        self._result = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self._port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._server.wait_closed()

    def expect(self, authorization_url: str) -> None:
        """Remember the ``state`` of the URL shown to the person."""
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        self._expected = state or None

    async def wait(self) -> AuthorizationCodeResult:
        assert self._result is not None
        return await self._result

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body = self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ValueError):
            status, body = 400, _page("Bad request")
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    def _answer(self, head: bytes) -> tuple[int, bytes]:
        if len(head) > _MAX_REQUEST:
            return 400, _page("Bad request")
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target = rest.rpartition(" ")[0]
        parts = urlsplit(target)
        if method != "GET" or parts.path != _CALLBACK:
            return 404, _page("Not found")
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        state = query.get("state", "")
        if self._expected is None or not secrets.compare_digest(state, self._expected):
            return 400, _page("This sign-in link does not belong to the sign-in in progress")
        assert self._result is not None
        if self._result.done():
            return 400, _page("This sign-in is already finished")
        if "error" in query:
            self._result.set_exception(McpError(
                f"the authorization server refused the sign-in: {query['error'][:100]}",
                code="MCP_LOGIN_FAILED", details={"error": query["error"][:100]}))
            return 200, _page("Sign-in refused")
        if not query.get("code"):
            return 400, _page("The redirect carries no authorization code")
        self._result.set_result(AuthorizationCodeResult(
            code=query["code"], state=state, iss=query.get("iss")))
        return 200, _page("Signed in")


_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "deepseek-eyes-login", "version": "1"}}}


@contextlib.asynccontextmanager
async def _catcher(oauth: McpAuthorizationCodeSettings) -> AsyncIterator[RedirectCatcher]:
    try:
        catcher = RedirectCatcher(oauth.redirect_port)
        await catcher.__aenter__()
    except OSError as exc:
        raise McpError(f"cannot listen for the sign-in redirect on 127.0.0.1: {exc}",
                       code="MCP_LOGIN_FAILED") from None
    try:
        yield catcher
    finally:
        await catcher.__aexit__()


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
        ConfigError: ``CONFIG_ENV_MISSING`` for an unset client reference.
    """
    url, oauth = _auth_settings(server)
    storage = file_storage(root, url, oauth)
    async with _catcher(oauth) as catcher:
        async def redirect(authorization_url: str) -> None:
            catcher.expect(authorization_url)
            await open_url(authorization_url)

        provider = authorization_code_provider(
            url, oauth, storage, redirect_uri=catcher.redirect_uri,
            redirect_handler=redirect, callback_handler=catcher.wait)
        await storage.forget_tokens()
        try:
            async with asyncio.timeout(timeout):
                async with httpx2.AsyncClient(auth=provider, follow_redirects=False,
                                              timeout=httpx2.Timeout(30.0)) as http:
                    response = await http.post(url, json=_INITIALIZE, headers={
                        "Accept": "application/json, text/event-stream"})
        except TimeoutError:
            raise McpError(f"the sign-in did not finish within {timeout:g} s",
                           code="MCP_TIMEOUT") from None
        except McpError:
            raise
        except Exception as exc:  # the SDK's OAuth errors and transport failures alike
            raise McpError(f"the sign-in failed: {type(exc).__name__}: {str(exc)[:300]}",
                           code="MCP_LOGIN_FAILED") from None
    if response.status_code >= 400:
        raise McpError(f"the server still refused the request after the sign-in "
                       f"(HTTP {response.status_code})", code="MCP_LOGIN_FAILED",
                       details={"status": response.status_code})
    if await storage.get_tokens() is None:
        raise McpError("the server did not ask for a sign-in (its initialize needs no "
                       "token); nothing was stored", code="MCP_LOGIN_FAILED",
                       details={"status": response.status_code})
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
