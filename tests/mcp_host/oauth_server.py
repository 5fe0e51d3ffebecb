"""A loopback OAuth 2.1 authorization server and a protected MCP resource, in one app.

* ``/.well-known/oauth-protected-resource[/mcp]``: RFC 9728 metadata naming this origin as
  the authorization server; a 401 from ``/mcp`` points at it in ``WWW-Authenticate``.
* ``/.well-known/oauth-authorization-server``: RFC 8414 metadata.
* ``/token``: the client_credentials grant with client_secret_basic; each token's lifetime
  comes from ``expires`` in turn (``0`` = expired at once), so expiry needs no waiting.
  Also the authorization_code grant (PKCE S256 checked; a pre-registered confidential
  client authenticates with client_secret_basic, a registered public one with none) and
  refresh_token, which issues a new access token for a live refresh token. With
  ``verify_key`` set, client_credentials also takes ``private_key_jwt`` (RFC 7523 2.2): the
  assertion's signature, ``aud`` (this issuer), ``iss`` = ``sub`` = the client, ``exp``, a
  ``jti`` never seen before and, with ``expected_kid``, its ``kid`` header are checked.
* ``/authorize``: approves at once and redirects to ``redirect_uri`` with ``code`` and
  ``state`` (what a person's browser would bring back); ``/register``: RFC 7591, public
  clients.
* ``/mcp``: an SDK ``MCPServer`` that only answers requests bearing a live token.

The server runs on the test's own event loop (uvicorn with its lifespan, which runs the
SDK's session manager); start and stop wait on events, bounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import secrets
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import jwt
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route

CLIENT_ID = "eyes-client"
CLIENT_SECRET = "s3cret-value-" + "q" * 12


@dataclass
class OAuthFixture:
    expires: list[int] = field(default_factory=lambda: [3600])
    port: int = 0
    issued: list[str] = field(default_factory=list)
    live: set[str] = field(default_factory=set)
    hits: dict[str, int] = field(default_factory=dict)
    token_auth: list[str] = field(default_factory=list)
    grants: list[str] = field(default_factory=list)
    registered: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    refresh_tokens: set[str] = field(default_factory=set)
    authorize_params: list[dict[str, str]] = field(default_factory=list)
    #: When set, /mcp answers a token without this scope 403 insufficient_scope (a step-up).
    required_scope: str | None = None
    granted: dict[str, set[str]] = field(default_factory=dict)
    #: private_key_jwt: the client's public key (and the kid its assertions must name).
    verify_key: Any = None
    expected_kid: str | None = None
    #: Each verified assertion's header and claims; the refusals' reasons.
    assertions: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    assertion_refusals: list[str] = field(default_factory=list)
    #: A malicious authorization server: fields merged into (or dropped from) its metadata,
    #: the resource metadata URL its 401 names, and a metadata document of ``asm_bytes``
    #: streamed instead of the real one (``asm_sent``: how much of it went out).
    asm_extra: dict[str, Any] = field(default_factory=dict)
    asm_drop: tuple[str, ...] = ()
    prm_extra: dict[str, Any] = field(default_factory=dict)
    resource_metadata: str | None = None
    asm_bytes: int = 0
    asm_status: int = 200
    asm_sent: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def revoke_all(self) -> None:
        self.live.clear()


def _count(fx: OAuthFixture, name: str) -> None:
    fx.hits[name] = fx.hits.get(name, 0) + 1


def build_app(fx: OAuthFixture) -> Starlette:
    mcp = MCPServer("protected")

    @mcp.tool(annotations={"readOnlyHint": True})  # type: ignore[misc]
    def whoami() -> str:
        """Say who is calling."""
        return "a client_credentials client"

    @mcp.resource("note://one")  # type: ignore[misc]
    def note() -> str:
        return "note body"

    inner = mcp.streamable_http_app(streamable_http_path="/mcp")
    lifetimes = itertools.chain(fx.expires, itertools.repeat(fx.expires[-1]))

    async def prm(_: Request) -> Response:
        _count(fx, "prm")
        return JSONResponse({"resource": fx.url, "authorization_servers": [fx.base],
                             **fx.prm_extra})

    async def huge_document(request: Request) -> AsyncIterator[bytes]:
        # Stops when the client hangs up (uvicorn would otherwise accept and drop the rest
        # silently), so asm_sent counts what went out, not what could have.
        chunk = b" " * 65536
        yield b'{"issuer": "' + fx.base.encode() + b'", "padding": "'
        while fx.asm_sent < fx.asm_bytes and not await request.is_disconnected():
            fx.asm_sent += len(chunk)
            yield chunk
        yield b'"}'

    async def asm(request: Request) -> Response:
        _count(fx, "asm")
        if fx.asm_status != 200:
            return JSONResponse({"error": "not here"}, status_code=fx.asm_status)
        if fx.asm_bytes:
            return StreamingResponse(huge_document(request), media_type="application/json")
        document = {
            "issuer": fx.base, "authorization_endpoint": f"{fx.base}/authorize",
            "token_endpoint": f"{fx.base}/token", "registration_endpoint": f"{fx.base}/register",
            "grant_types_supported": ["client_credentials", "authorization_code",
                                      "refresh_token"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic", "none",
                *(["private_key_jwt"] if fx.verify_key is not None else [])],
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            **fx.asm_extra,
        }
        for key in fx.asm_drop:
            document.pop(key, None)
        return JSONResponse(document)

    async def register(request: Request) -> Response:
        _count(fx, "register")
        body = await request.json()
        client_id = "dyn-" + secrets.token_hex(6)
        fx.registered[client_id] = body
        return JSONResponse({**body, "client_id": client_id,
                             "token_endpoint_auth_method": "none"}, status_code=201)

    async def authorize(request: Request) -> Response:
        _count(fx, "authorize")
        params = dict(request.query_params)
        fx.authorize_params.append(params)
        code = "code-" + secrets.token_hex(8)
        fx.codes[code] = params
        query = urlencode({"code": code, "state": params.get("state", "")})
        return RedirectResponse(f"{params['redirect_uri']}?{query}", status_code=302)

    def issue(*, refresh: bool, scopes: set[str] | None = None) -> Response:
        value = "tok-" + secrets.token_hex(12)
        fx.issued.append(value)
        fx.live.add(value)
        fx.granted[value] = scopes or set()
        body: dict[str, Any] = {"access_token": value, "token_type": "Bearer",
                                "expires_in": next(lifetimes)}
        if refresh:
            body["refresh_token"] = "ref-" + secrets.token_hex(12)
            fx.refresh_tokens.add(body["refresh_token"])
            fx.granted[body["refresh_token"]] = scopes or set()
            fx.issued.append(body["refresh_token"])
        return JSONResponse(body)

    def client_ok(form: dict[str, list[str]], user: str, password: str) -> bool:
        client_id = user or form.get("client_id", [""])[0]
        if client_id == CLIENT_ID:
            return (user, password) == (CLIENT_ID, CLIENT_SECRET)
        return client_id in fx.registered and not password

    def assertion_refusal(form: dict[str, list[str]]) -> str | None:
        kind = form.get("client_assertion_type", [""])[0]
        if kind != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return f"client_assertion_type {kind!r}"
        if fx.verify_key is None:
            return "private_key_jwt is not enabled"
        assertion = form["client_assertion"][0]
        try:
            header = jwt.get_unverified_header(assertion)
            claims = jwt.decode(
                assertion, fx.verify_key, algorithms=[header.get("alg", "none")],
                audience=fx.base, options={"require": ["iss", "sub", "aud", "exp", "jti"]})
        except jwt.PyJWTError as exc:
            return f"assertion: {exc}"
        if claims["iss"] != CLIENT_ID or claims["sub"] != CLIENT_ID:
            return "iss and sub must be the client id"
        if fx.expected_kid is not None and header.get("kid") != fx.expected_kid:
            return f"kid {header.get('kid')!r}"
        if any(seen["jti"] == claims["jti"] for _, seen in fx.assertions):
            return "jti replayed"
        fx.assertions.append((header, claims))
        return None

    async def token(request: Request) -> Response:
        _count(fx, "token")
        form = parse_qs((await request.body()).decode())
        header = request.headers.get("authorization", "")
        fx.token_auth.append(header.split(" ", 1)[0])
        try:
            pair = base64.b64decode(header.removeprefix("Basic ")).decode()
            user, _, password = pair.partition(":")
        except ValueError:
            user = password = ""
        grant = form.get("grant_type", [""])[0]
        fx.grants.append(grant)
        if grant == "authorization_code":
            params = fx.codes.pop(form.get("code", [""])[0], None)
            verifier = form.get("code_verifier", [""])[0].encode()
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest())
            if (params is None or not client_ok(form, user, password)
                    or challenge.decode().rstrip("=") != params.get("code_challenge")
                    or form.get("redirect_uri", [""])[0] != params.get("redirect_uri")):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return issue(refresh=True, scopes=set(params.get("scope", "").split()))
        if grant == "refresh_token":
            refresh_token = form.get("refresh_token", [""])[0]
            if refresh_token not in fx.refresh_tokens or not client_ok(form, user, password):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return issue(refresh=False, scopes=fx.granted.get(refresh_token))
        if grant != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if "client_assertion" in form:
            refusal = assertion_refusal(form)
            if refusal is not None:
                fx.assertion_refusals.append(refusal)
                return JSONResponse({"error": "invalid_client",
                                     "error_description": refusal}, status_code=401)
        elif (user, password) != (CLIENT_ID, CLIENT_SECRET):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        value = "tok-" + secrets.token_hex(12)
        fx.issued.append(value)
        fx.live.add(value)
        return JSONResponse({"access_token": value, "token_type": "Bearer",
                             "expires_in": next(lifetimes)})

    async def guard(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            _count(fx, "mcp")
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            if auth.removeprefix("Bearer ") not in fx.live:
                _count(fx, "401")
                meta = (fx.resource_metadata
                        or f"{fx.base}/.well-known/oauth-protected-resource/mcp")
                response = JSONResponse(
                    {"error": "invalid_token"}, status_code=401,
                    headers={"WWW-Authenticate": f'Bearer resource_metadata="{meta}"'})
                await response(scope, receive, send)
                return
            if fx.required_scope and fx.required_scope not in fx.granted.get(
                    auth.removeprefix("Bearer "), set()):
                _count(fx, "403")
                meta = f"{fx.base}/.well-known/oauth-protected-resource/mcp"
                response = JSONResponse(
                    {"error": "insufficient_scope"}, status_code=403,
                    headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", '
                             f'scope="{fx.required_scope}", resource_metadata="{meta}"'})
                await response(scope, receive, send)
                return
        await inner(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    return Starlette(routes=[
        Route("/.well-known/oauth-protected-resource/mcp", prm),
        Route("/.well-known/oauth-protected-resource", prm),
        Route("/.well-known/oauth-authorization-server", asm),
        Route("/token", token, methods=["POST"]),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Mount("/", app=guard),
    ], lifespan=lifespan)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: asyncio.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self._ready.set()


@contextlib.asynccontextmanager
async def serve_oauth(expires: list[int] | None = None, *, verify_key: Any = None,
                      expected_kid: str | None = None) -> AsyncIterator[OAuthFixture]:
    fx = OAuthFixture(expires=expires or [3600], verify_key=verify_key,
                      expected_kid=expected_kid)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    fx.port = sock.getsockname()[1]
    ready = asyncio.Event()
    server = _Server(uvicorn.Config(build_app(fx), log_config=None, access_log=False,
                                    lifespan="on", http="h11", ws="none"), ready)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            await ready.wait()
        if not server.started:
            raise RuntimeError("the OAuth test server did not start")
        yield fx
    finally:
        server.should_exit = True
        async with asyncio.timeout(10):
            await task
        sock.close()


__all__ = ["CLIENT_ID", "CLIENT_SECRET", "OAuthFixture", "serve_oauth"]
