"""The rules every OAuth flow keeps, whatever an authorization server's metadata says.

The SDK's providers learn where to send things from documents the servers publish (RFC 9728
protected-resource metadata, RFC 8414 / OIDC authorization-server metadata): the metadata
URLs themselves, the authorization, token and registration endpoints. A malicious or
careless server can name a plain-http endpoint on another host (the authorization code, the
PKCE verifier or a client secret then cross the network in clear), advertise no PKCE, or
answer discovery with a document of any size. The SDK reads every such document whole and
sends every request its metadata names. :class:`RuledAuth` wraps a provider (every grant:
client_credentials, private_key_jwt, authorization_code) and holds it to three rules:

* **https only** (plain http to a loopback host excepted: ``127.0.0.0/8``, ``::1``,
  ``localhost``): every request the flow makes, judged on the request itself before it is
  sent, and every ``*_endpoint`` and ``authorization_servers`` entry of a document as it
  arrives (so a sign-in is refused before a person is shown anything);
* **S256 PKCE advertised** in ``code_challenge_methods_supported`` for the authorization
  code grant (the MCP specification: a client must refuse to proceed without it);
* **bounded reads**: each response to the flow's own requests is read chunk by chunk and
  abandoned past :data:`DOCUMENT_LIMIT` (1 MiB), counting decoded bytes, so a compressed
  document cannot unpack past the bound either.

It is a wrapper rather than edits to the SDK's flow because the flow is one long generator
whose steps cannot be overridden one by one; what goes out and comes in can be. Each refusal
is an :class:`McpError` with its own code, raised inside the flow, so nothing more is sent.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit

import httpx2

from deepseek_eyes.errors import McpError
from deepseek_eyes.settings.base import is_loopback_url_host

__all__ = ["DOCUMENT_LIMIT", "RuledAuth", "quiet_sdk_flow_log", "refuse_insecure",
           "refuse_without_pkce"]

#: The most a discovery document (or any other response to the flow's own requests) may be.
DOCUMENT_LIMIT = 1024 * 1024


class _DropFlowTraceback(logging.Filter):
    """The SDK logs every failure of its OAuth flow with ``logger.exception`` before it
    re-raises; the failure reaches the user as one coded line from us, so the record (and
    its traceback on a terminal) is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.getMessage().startswith("OAuth flow error"))


_FILTER = _DropFlowTraceback()


def quiet_sdk_flow_log() -> None:
    """Install the filter on the SDK's OAuth logger (idempotent)."""
    logger = logging.getLogger("mcp.client.auth.oauth2")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


quiet_sdk_flow_log()


def _shown(url: str) -> str:
    """The URL as a message may show it: scheme, host, port and path, nothing after."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"[:300]


def refuse_insecure(url: str, what: str) -> None:
    """Raises McpError ``MCP_OAUTH_INSECURE_ENDPOINT`` unless ``url`` is https, or plain
    http to a loopback host."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        parts, host = None, ""
    if parts is not None and host and (
            parts.scheme == "https" or (parts.scheme == "http" and is_loopback_url_host(host))):
        return
    raise McpError(
        f"the authorization server's {what} is not https ({_shown(url)}); OAuth sends codes, "
        "verifiers and secrets there, so only https (or plain http to this machine) is used",
        code="MCP_OAUTH_INSECURE_ENDPOINT", details={"endpoint": what, "url": _shown(url)})


def refuse_without_pkce(methods: Any, issuer: str | None) -> None:
    """Raises McpError ``MCP_OAUTH_NO_PKCE`` unless ``methods`` lists ``S256``."""
    if isinstance(methods, list) and "S256" in methods:
        return
    raise McpError(
        "the authorization server does not advertise S256 PKCE (code_challenge_methods_"
        "supported); signing in without it would let an intercepted code be redeemed",
        code="MCP_OAUTH_NO_PKCE", details={"issuer": (issuer or "")[:300]})


async def read_bounded(response: httpx2.Response, limit: int = DOCUMENT_LIMIT) -> bytes:
    """The response's decoded body, read chunk by chunk and abandoned past ``limit``.

    Raises:
        McpError: ``MCP_OAUTH_DOCUMENT_TOO_LARGE``.
    """
    url = _shown(str(response.request.url))

    def too_large() -> McpError:
        return McpError(f"the authorization server's answer from {url} is over "
                        f"{limit // 1024} KiB; it was not read further",
                        code="MCP_OAUTH_DOCUMENT_TOO_LARGE",
                        details={"url": url, "limit": limit})

    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        await response.aclose()
        raise too_large()
    chunks: list[bytes] = []
    total = 0
    async with contextlib.aclosing(response.aiter_bytes()) as parts:
        async for chunk in parts:
            total += len(chunk)
            if total > limit:
                await response.aclose()
                raise too_large()
            chunks.append(chunk)
    body = b"".join(chunks)
    # What ``aread`` itself stores: the SDK's flow and httpx2 then read these bytes (the
    # stream is spent) instead of the network.
    response._content = body
    return body


class RuledAuth(httpx2.Auth):
    """A provider's flow, held to the rules above; ``pkce``: the grant is authorization
    code, so an authorization server's metadata must advertise S256."""

    def __init__(self, inner: httpx2.Auth, *, pkce: bool,
                 limit: int = DOCUMENT_LIMIT) -> None:
        self.inner = inner
        self._pkce = pkce
        self._limit = limit

    async def async_auth_flow(
        self, request: httpx2.Request,
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self.inner.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                own = outgoing is not request
                if own:
                    # The MCP request itself goes to the configured URL, which the settings
                    # already hold to this rule; everything else the flow learned.
                    refuse_insecure(str(outgoing.url), _role(outgoing))
                response = yield outgoing
                if own:
                    body = await read_bounded(response, self._limit)
                    if outgoing.method == "GET" and response.status_code == 200:
                        self._check_document(body)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _check_document(self, body: bytes) -> None:
        try:
            document = json.loads(body)
        except ValueError:
            return  # not a document: the SDK's own parsing says so, or tries the next URL
        if not isinstance(document, dict):
            return
        servers = document.get("authorization_servers")
        if isinstance(servers, list):
            for server in servers[:64]:
                if isinstance(server, str):
                    refuse_insecure(server, "authorization server (from the resource metadata)")
        for key, value in document.items():
            if key.endswith("_endpoint") and isinstance(value, str):
                refuse_insecure(value, key.replace("_", " "))
        is_server_metadata = "issuer" in document and (
            "authorization_endpoint" in document or "token_endpoint" in document)
        if self._pkce and is_server_metadata:
            issuer = document.get("issuer")
            refuse_without_pkce(document.get("code_challenge_methods_supported"),
                                issuer if isinstance(issuer, str) else None)


def _role(request: httpx2.Request) -> str:
    """What a request of the flow is, for a message."""
    path = request.url.path
    if "/.well-known/" in path or request.method == "GET":
        return "metadata URL"
    try:
        body = request.content[:4096] if request.method == "POST" else b""
    except httpx2.RequestNotRead:
        body = b""
    if b"grant_type=" in body:
        return "token endpoint"
    if b"redirect_uris" in body or b"client_name" in body:
        return "registration endpoint"
    return "endpoint"
