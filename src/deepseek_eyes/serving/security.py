"""The HTTP security layer: one ASGI middleware in front of everything a server serves.

In order, for every HTTP request: ``Host`` must be an allowed host (DNS rebinding), an
``Origin`` when present must be an allowed origin (``Origin: null`` is refused), a request a
browser marks as made by another site's page (``Sec-Fetch-Site``) is refused unless its
Origin is allowed or it is a plain navigation the server accepts, a body
must be JSON where the server asks for it (a cross-site page can send ``text/plain`` without
a CORS preflight, never ``application/json``), the bearer token must match (the scheme in
any case, the token compared in constant time), the caller must be within its rate limit,
and the body may not exceed its limit (checked on ``Content-Length`` and while streaming)
nor take longer than its deadline to arrive.
Every response gets security headers. The only unauthenticated paths are the console's
static files, which hold no data, and what a :class:`SessionCredential` opens.

A server may give some paths a credential of their own (:class:`SessionCredential`: the
terminal's approval console, whose person logs in with a one-time code and then holds a
cookie). Those paths never accept the bearer token, and the bearer paths never accept that
credential: holding one does not reach what the other guards. Their holders are
rate-limited per credential, like token holders.
A refusal is a JSON body ``{"error": {"message", "type", "param", "code"}}`` (OpenAI's shape,
which the gateway's clients parse) whose codes the server names
(:class:`RefusalCodes`: ``TERMINAL_UNAUTHORIZED`` from the terminal, ``BROWSER_…`` from the
browser).

Rate limits count in this process (:class:`RateLimiter`) or, for replicas behind a
balancer, in buckets they share (:mod:`deepseek_eyes.store.state`): a limiter either answers
at once or is awaited, and one that cannot count fails closed with 503 when its settings
say so.

Authentication comes before rate limiting, and the two kinds of caller have separate
buckets: authenticated requests are limited per token (the bucket is keyed by a hash of
the token, never the token), unauthenticated ones (failed authentications and the public
static files) per client address, in a limiter of their own. A flood of bad requests from
the token holder's own address therefore exhausts only the flood's bucket, never the token
holder's, and cannot evict the token's bucket from the limiter's table either.

Why a pure ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``: SSE responses
stream for minutes and must not be buffered or wrapped in extra tasks.

The token is never logged, never put in an error, and never passed to children.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepseek_eyes.errors import StoreError
from deepseek_eyes.serving.tokens import (
    MIN_TOKEN_BITS,
    check_token_strength,
    estimated_token_bits,
    is_strong_token,
    resolve_bearer_token,
)
from deepseek_eyes.stages import hand_to, stage
from deepseek_eyes.store.state import Limiter, TokenBuckets

__all__ = [
    "MIN_TOKEN_BITS",
    "SECURITY_HEADERS",
    "HttpOptions",
    "RateLimiter",
    "RefusalCodes",
    "SecurityMiddleware",
    "ServedSettings",
    "SessionCredential",
    "allowed_hosts_for",
    "allowed_origins_for",
    "bearer_credentials",
    "check_token_strength",
    "estimated_token_bits",
    "host_allowed",
    "is_strong_token",
    "loopback_hosts",
    "loopback_origins",
    "resolve_bearer_token",
]

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
    (b"cache-control", b"no-store"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
     b"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
)


def loopback_hosts() -> list[str]:
    return ["127.0.0.1:*", "localhost:*", "[::1]:*"]


def loopback_origins() -> list[str]:
    return ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ANY = ("0.0.0.0", "::")  # noqa: S104 - names of the wildcard addresses, compared only


def allowed_hosts_for(bind_host: str, extra: Iterable[str] = ()) -> list[str]:
    """The Host values a server bound to ``bind_host`` accepts: loopback names on loopback,
    the bind address itself elsewhere (nothing for a wildcard bind), then ``extra``."""
    base = loopback_hosts() if bind_host in _LOOPBACK else []
    if bind_host not in _LOOPBACK and bind_host not in _ANY:
        base.append(f"{bind_host}:*")
    return base + list(extra)


def allowed_origins_for(bind_host: str, extra: Iterable[str] = ()) -> list[str]:
    """The Origin values accepted: loopback origins on loopback, then ``extra``."""
    base = loopback_origins() if bind_host in _LOOPBACK else []
    return base + list(extra)


def host_allowed(value: str, allowed: Iterable[str]) -> bool:
    """Whether a Host (or Origin) matches one of ``allowed``; ``x:*`` means x with any port
    or none (the default port: a rebinding page controls the name, never the port)."""
    for pattern in allowed:
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base:
                return True
            port = value[len(base) + 1 :] if value.startswith(base + ":") else ""
            if port.isdigit():
                return True
    return False


class RateLimiter(TokenBuckets):
    """A token bucket per client, in this process: ``per_minute`` requests, bursts of a
    sixth of that (:class:`~deepseek_eyes.store.state.TokenBuckets`). A gateway on shared
    state passes a limiter whose buckets every replica shares instead (any
    :class:`~deepseek_eyes.store.state.Limiter`)."""


@dataclass(frozen=True)
class RefusalCodes:
    """The error codes (and the ``WWW-Authenticate`` realm) a server's refusals carry."""

    unauthorized: str
    forbidden: str
    rate_limited: str
    body_too_large: str
    realm: str
    unsupported_media_type: str = "HTTP_UNSUPPORTED_MEDIA_TYPE"
    body_timeout: str = "HTTP_BODY_TIMEOUT"

    @classmethod
    def prefixed(cls, prefix: str, realm: str) -> RefusalCodes:
        """``PREFIX_UNAUTHORIZED``, ``PREFIX_FORBIDDEN``, ``PREFIX_RATE_LIMITED``,
        ``PREFIX_BODY_TOO_LARGE``, ``PREFIX_UNSUPPORTED_MEDIA_TYPE``, ``PREFIX_BODY_TIMEOUT``."""
        return cls(f"{prefix}_UNAUTHORIZED", f"{prefix}_FORBIDDEN", f"{prefix}_RATE_LIMITED",
                   f"{prefix}_BODY_TOO_LARGE", realm, f"{prefix}_UNSUPPORTED_MEDIA_TYPE",
                   f"{prefix}_BODY_TIMEOUT")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def bearer_credentials(authorization: str) -> str | None:
    """The credentials of a ``Bearer`` ``Authorization`` value, or None for another scheme.
    The scheme is case-insensitive and may be followed by several spaces (RFC 7235)."""
    scheme, _, rest = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return rest.lstrip(" ")


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_OTHER_SITES = frozenset({"cross-site", "same-site"})


def _is_json(content_type: str | None) -> bool:
    """``application/json``, any case, parameters (``; charset=utf-8``) allowed."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


_Refusal = tuple[int, str, str, list[tuple[bytes, bytes]]]


class SessionCredential(Protocol):
    """A credential the paths under ``prefix`` take instead of the bearer token.

    ``holder`` answers the id of the credential a request's ``Cookie`` header carries
    (None: none, or not a live one); ``open_paths`` are the ``(method, path)`` pairs under
    the prefix that need no credential (the login itself); a request without one is refused
    with ``refusal`` (a code and a message)."""

    @property
    def prefix(self) -> str: ...
    @property
    def open_paths(self) -> frozenset[tuple[str, str]]: ...
    @property
    def refusal(self) -> tuple[str, str]: ...
    def holder(self, cookie: str | None) -> str | None: ...


class SecurityMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        limiter: Limiter,
        max_body_bytes: int,
        public_prefixes: tuple[str, ...] = ("/console",),
        anonymous_limiter: Limiter | None = None,
        codes: RefusalCodes,
        json_bodies: bool = False,
        body_timeout: float | None = None,
        cross_site_navigation: bool = True,
        session: SessionCredential | None = None,
        api_key_header: bool = False,
        public_paths: frozenset[str] = frozenset(),
        loopback_paths: frozenset[str] = frozenset(),
    ) -> None:
        """``limiter`` limits authenticated requests, per token; ``anonymous_limiter`` (by
        default one with the same rate) limits unauthenticated ones, per client address.
        Either may answer at once (this process's buckets) or be awaited (buckets shared
        by replicas); one that raises a :class:`~deepseek_eyes.errors.StoreError` (the
        shared state is down and its setting says fail closed) gets the request refused
        with 503, that error's code and ``Retry-After: 1``.
        ``token`` None authenticates nobody and refuses nobody for it (the open loopback
        gateway): every request is then limited per client address. ``json_bodies``
        refuses a POST, PUT or PATCH whose ``Content-Type`` is not ``application/json``
        (415), the one kind of body a cross-site page cannot send without a CORS preflight.
        ``body_timeout`` is the seconds a whole body may take to arrive (408 after).
        ``cross_site_navigation`` lets another site's page link here (a GET navigation,
        which cannot read the answer); a server with no pages of its own refuses even that.
        ``session`` guards its paths with its own credential instead of the token.
        ``api_key_header`` also takes the token from ``x-api-key`` (Anthropic's clients send
        it there), compared as the bearer one is; ``public_paths`` are exact paths a GET or
        HEAD reaches without it (a client's liveness probe); ``loopback_paths`` are exact
        paths a GET or HEAD from a loopback client address reaches without it (a metrics
        scraper on this machine)."""
        self.app = app
        self.codes = codes
        self._expected = token.encode("utf-8") if token is not None else None
        self._token_bucket = "token:" + hashlib.sha256(
            (token or "").encode("utf-8")).hexdigest()[:32]
        self.anonymous_limiter: Limiter = anonymous_limiter or (
            RateLimiter(round(limiter.rate * 60), clock=limiter.clock)
            if isinstance(limiter, TokenBuckets) else RateLimiter(round(limiter.rate * 60)))
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.public_prefixes = public_prefixes
        self.json_bodies = json_bodies
        self.body_timeout = body_timeout
        self.cross_site_navigation = cross_site_navigation
        self.session = session
        self.api_key_header = api_key_header
        self.public_paths = public_paths
        self.loopback_paths = loopback_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() not in _SECURITY_HEADER_NAMES]
                message = {**message, "headers": headers + list(SECURITY_HEADERS)}
            await send(message)

        with stage("http"):
            refusal = await self._refusal(scope)
            length = _header(scope, b"content-length")
        if refusal is not None:
            status, code, text, extra = refusal
            await _reply(send_with_headers, status, code, text, extra)
            return
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _reply(send_with_headers, 413, self.codes.body_too_large,
                         "the request body is too large", [])
            return
        # The body is read here, whole, bounded and under one deadline, then replayed: a
        # streamed body that grows past the limit is refused before the app sees a byte of
        # it, and a trickle of bytes cannot hold the connection past the deadline.
        try:
            # asyncio's own deadline: a tenth of anyio's cost, and every server here runs on
            # asyncio (uvicorn).
            with stage("http"):
                async with asyncio.timeout(self.body_timeout):
                    request = await self._read_body(receive)
        except TimeoutError:
            await _reply(send_with_headers, 408, self.codes.body_timeout,
                         f"the request body did not arrive within {self.body_timeout:g}s",
                         _CLOSE)
            return
        if request is None:
            await _reply(send_with_headers, 413, self.codes.body_too_large,
                         "the request body is too large", [])
            return
        if request["type"] != "http.request":  # the client went away: the app sees it
            await self.app(scope, _replay([], request, receive), send_with_headers)
            return
        hand_to("http")  # the framework's routing up to the handler's first stage
        await self.app(scope, _replay([request], None, receive), send_with_headers)

    async def _read_body(self, receive: Receive) -> Message | None:
        """The whole body as one message; None past ``max_body_bytes``; a disconnect as it
        came."""
        chunks: list[bytes] = []
        received = 0
        more = True
        while more:  # bounded: stops at max_body_bytes
            message = await receive()
            if message["type"] != "http.request":
                return message
            body = message.get("body", b"")
            received += len(body)
            if received > self.max_body_bytes:
                return None
            chunks.append(body)
            more = bool(message.get("more_body", False))
        return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

    async def _refusal(self, scope: Scope) -> _Refusal | None:
        host = _header(scope, b"host") or ""
        if not host_allowed(host, self.allowed_hosts):
            return 421, self.codes.forbidden, (
                "this Host is not allowed (a name other than loopback must be listed in the "
                "server's allowed_hosts setting)"), []
        origin = _header(scope, b"origin")
        origin_ok = origin is not None and origin != "null" and host_allowed(
            origin, self.allowed_origins)
        if origin is not None and not origin_ok:
            return 403, self.codes.forbidden, (
                "this Origin is not allowed (a web page may call this server only when the "
                "server's allowed_origins setting names its origin)"), []
        # Fetch metadata: a browser says which site made the request, Origin or not (an
        # <img>, a <link>, a GET without CORS carry none). Another site's page may make
        # nothing but a top-level navigation, and only where the server allows that.
        if not origin_ok and _header(scope, b"sec-fetch-site") in _OTHER_SITES and not (
                self.cross_site_navigation and scope.get("method") in ("GET", "HEAD")
                and _header(scope, b"sec-fetch-mode") == "navigate"):
            return 403, self.codes.forbidden, "a request made by another site's page", []
        if self.json_bodies and scope.get("method") in _BODY_METHODS and not _is_json(
                _header(scope, b"content-type")):
            return 415, self.codes.unsupported_media_type, \
                "the request body must be sent as Content-Type: application/json", []
        client = "ip:" + str((scope.get("client") or ("?", 0))[0])
        path = scope.get("path", "")
        if self.session is not None and path.startswith(self.session.prefix):
            return await self._session_refusal(scope, client, path)
        if self._expected is None:
            return await self._limited(self.anonymous_limiter, client)
        given = bearer_credentials(_header(scope, b"authorization") or "")
        if given is None and self.api_key_header:
            given = _header(scope, b"x-api-key")
        # Headers were decoded as latin-1: encoding back gives the bytes the client sent,
        # which are UTF-8 for a token with characters beyond ASCII.
        if given is not None and hmac.compare_digest(given.encode("latin-1"), self._expected):
            return await self._limited(self.limiter, self._token_bucket)
        limited = await self._limited(self.anonymous_limiter, client)
        if limited is not None:
            return limited
        if scope.get("method") in ("GET", "HEAD") and (
                path.startswith(self.public_prefixes) or path in self.public_paths
                or (path in self.loopback_paths and _loopback_client(scope))):
            return None
        challenge = f'Bearer realm="{self.codes.realm}"'.encode()
        return 401, self.codes.unauthorized, "a valid bearer token is required", [
            (b"www-authenticate", challenge)
        ]

    async def _session_refusal(self, scope: Scope, client: str,
                               path: str) -> _Refusal | None:
        """The session credential's paths: its holder limited per credential (the bucket is
        keyed by the credential's id, never its secret), anyone else per address; the
        bearer token counts for nothing here."""
        session = self.session
        assert session is not None
        # Cookies are not scoped by port, and every loopback port is the same site: a page
        # another local server serves could make the person's browser send this cookie.
        # So here an Origin must be this very server's, and a body must be JSON (which a
        # page of another origin cannot send without a CORS preflight that is never
        # granted).
        origin = _header(scope, b"origin")
        host = _header(scope, b"host") or ""
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return 403, self.codes.forbidden, (
                "this Origin is not this server's own: the console's API answers only its "
                "own pages"), []
        if scope.get("method") in _BODY_METHODS and not _is_json(
                _header(scope, b"content-type")):
            return 415, self.codes.unsupported_media_type, \
                "the request body must be sent as Content-Type: application/json", []
        holder = session.holder(_header(scope, b"cookie"))
        if holder is not None:
            return await self._limited(self.limiter, "session:" + holder)
        limited = await self._limited(self.anonymous_limiter, client)
        if limited is not None:
            return limited
        if (str(scope.get("method")), path) in session.open_paths:
            return None
        code, message = session.refusal
        return 401, code, message, []

    async def _limited(self, limiter: Limiter, bucket: str) -> _Refusal | None:
        """429 with ``Retry-After`` past the limit; 503 with the shared state's code when
        the limiter cannot count (fail closed)."""
        try:
            wait = limiter.allow(bucket)
            if not isinstance(wait, float | int):
                wait = await wait
        except StoreError as exc:
            return 503, exc.code, "the shared state that counts rate limits is unavailable", [
                (b"retry-after", b"1")]
        if wait <= 0:
            return None
        return 429, self.codes.rate_limited, "too many requests", [
            (b"retry-after", str(max(1, math.ceil(wait))).encode())
        ]


def _loopback_client(scope: Scope) -> bool:
    """Whether the request came from a loopback address (the peer of the connection)."""
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack bind
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


_CLOSE = [(b"connection", b"close")]  # the body was not read to its end
_SECURITY_HEADER_NAMES = frozenset(k for k, _ in SECURITY_HEADERS)


def _replay(first: list[Message], extra: Message | None, receive: Receive) -> Receive:
    queue = [*first, *([extra] if extra is not None else [])]

    async def replay() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()  # afterwards: the real channel, for disconnects

    return replay


async def _reply(
    send: Send, status: int, code: str, message: str, extra: list[tuple[bytes, bytes]]
) -> None:
    # OpenAI's error shape, which the gateway's clients parse; the other servers' clients
    # read ``code`` and ``message`` from it alike.
    kind = ("authentication_error" if status == 401 else "rate_limit_error" if status == 429
            else "server_error" if status >= 500 else "invalid_request_error")
    body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None,
                                      "code": code}}
    data = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()), *extra],
    })
    await send({"type": "http.response.body", "body": data})


class ServedSettings(Protocol):
    """The settings section of a server we serve over HTTP (``[terminal]``, ``[browser]``,
    ``[desktop]``, ``[vision.serve]``): each has these fields."""

    @property
    def host(self) -> str: ...
    @property
    def allowed_hosts(self) -> tuple[str, ...]: ...
    @property
    def allowed_origins(self) -> tuple[str, ...]: ...
    @property
    def rate_limit_per_minute(self) -> int: ...
    @property
    def max_body_bytes(self) -> int: ...


@dataclass(frozen=True)
class HttpOptions:
    """Where a server listens and the rules its middleware enforces, shared by every
    HTTP server."""

    token: str
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    rate_limit_per_minute: int = 600
    max_body_bytes: int = 1024 * 1024

    @classmethod
    def from_settings(cls, settings: ServedSettings, token: str,
                      host: str | None = None) -> HttpOptions:
        """The options a settings section names; ``host`` (a command line's) wins."""
        return cls(token=token, host=host or settings.host,
                   allowed_hosts=settings.allowed_hosts,
                   allowed_origins=settings.allowed_origins,
                   rate_limit_per_minute=settings.rate_limit_per_minute,
                   max_body_bytes=settings.max_body_bytes)

    def hosts(self) -> list[str]:
        return allowed_hosts_for(self.host, self.allowed_hosts)

    def origins(self) -> list[str]:
        return allowed_origins_for(self.host, self.allowed_origins)

    def guard(self, app: ASGIApp, *, codes: RefusalCodes,
              public_prefixes: tuple[str, ...] = (),
              session: SessionCredential | None = None) -> SecurityMiddleware:
        """``app`` behind the middleware: rate limits per token and per client address;
        ``session`` guards its own paths (see :class:`SessionCredential`)."""
        return SecurityMiddleware(
            app,
            token=self.token,
            allowed_hosts=self.hosts(),
            allowed_origins=self.origins(),
            limiter=RateLimiter(self.rate_limit_per_minute),  # per token
            anonymous_limiter=RateLimiter(self.rate_limit_per_minute),  # per client address
            max_body_bytes=self.max_body_bytes,
            public_prefixes=public_prefixes,
            codes=codes,
            session=session,
        )


def unknown_route_handlers(code: str) -> dict[Any, Any]:
    """Starlette exception handlers that answer an unknown path (404) or a method a route
    does not take (405) in the JSON shape of our refusals, ``{"error": {"code", "message",
    "details"}}``, under ``code``; Starlette's own answer is plain text, which a client of
    a JSON API cannot read."""
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}
        message = ("this endpoint does not take that method" if status == 405
                   else "no such endpoint")
        body = {"code": code, "message": message,
                "details": {"path": request.url.path[:200], "method": request.method}}
        return JSONResponse({"error": body}, status_code=status, headers=headers)

    return {HTTPException: handle}
