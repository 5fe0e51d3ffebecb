"""The HTTP security layer: one ASGI middleware in front of everything a server serves.

In order, for every HTTP request: ``Host`` must be an allowed host (DNS rebinding), an
``Origin`` when present must be an allowed origin (``Origin: null`` is refused), the bearer
token must match (compared in constant time), the caller must be within its rate limit, and
the body may not exceed its limit (checked on ``Content-Length`` and while streaming).
Every response gets security headers. The only unauthenticated paths are the console's
static files, which hold no data (the console asks for the token and sends it as a header).
A refusal is a JSON body ``{"error": {"code", "message"}}`` whose codes the server names
(:class:`RefusalCodes`: ``TERMINAL_UNAUTHORIZED`` from the terminal, ``BROWSER_…`` from the
browser).

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

import hashlib
import hmac
import json
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = [
    "MIN_TOKEN_BITS",
    "SECURITY_HEADERS",
    "HttpOptions",
    "RateLimiter",
    "RefusalCodes",
    "SecurityMiddleware",
    "ServedSettings",
    "allowed_hosts_for",
    "allowed_origins_for",
    "check_token_strength",
    "estimated_token_bits",
    "host_allowed",
    "is_strong_token",
    "loopback_hosts",
    "loopback_origins",
    "resolve_bearer_token",
]

MIN_TOKEN_BITS = 256
_MAX_CLIENTS = 4096
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


def estimated_token_bits(token: str) -> int:
    """The randomness a token can hold: length × log2(alphabet), where the alphabet is the
    union of the character classes present (other characters count 4 each)."""
    classes = [
        ("abcdefghijklmnopqrstuvwxyz", 26), ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26),
        ("0123456789", 10), ("-_", 2), ("+/=", 3),
    ]
    alphabet = sum(size for chars, size in classes if any(c in chars for c in token))
    other = {c for c in token if not any(c in chars for chars, _ in classes)}
    alphabet += len(other) * 4
    return int(len(token) * math.log2(alphabet)) if alphabet > 1 else 0


def is_strong_token(token: str) -> bool:
    """At least :data:`MIN_TOKEN_BITS` bits, 10 distinct characters (so ``aaaa…`` fails)
    and no white space. Each server raises its own ``…_TOKEN_WEAK`` when this is false."""
    return (estimated_token_bits(token) >= MIN_TOKEN_BITS and len(set(token)) >= 10
            and not any(c.isspace() for c in token))


class _Secret(Protocol):
    def resolve(self) -> str: ...


def check_token_strength(token: str, *, error: type[DeepSeekEyesError], prefix: str) -> None:
    """Refuse a token that cannot hold :data:`MIN_TOKEN_BITS` of randomness
    (``{prefix}_TOKEN_WEAK``, raised as ``error``)."""
    if not is_strong_token(token):
        bits = estimated_token_bits(token)
        raise error(
            f"the bearer token holds about {bits} bits; {MIN_TOKEN_BITS} are needed "
            "(e.g. `deepseek-eyes terminal token` makes one)",
            code=f"{prefix}_TOKEN_WEAK",
            details={"estimated_bits": bits},
        )


def resolve_bearer_token(
    ref: _Secret | None, *, env: str, setting: str, error: type[DeepSeekEyesError],
    prefix: str,
) -> str:
    """An HTTP server's bearer token: the setting's ``{ env = … }`` reference, else the
    variable ``env``, checked for strength.

    Raises:
        DeepSeekEyesError: as ``error``, ``{prefix}_TOKEN_MISSING`` or ``{prefix}_TOKEN_WEAK``.
        ConfigError: ``CONFIG_ENV_MISSING`` when the setting names an unset variable.
    """
    token = ref.resolve() if ref is not None else os.environ.get(env, "")
    if not token:
        raise error(f"serving over HTTP needs a bearer token: set {env} or {setting}",
                    code=f"{prefix}_TOKEN_MISSING")
    check_token_strength(token, error=error, prefix=prefix)
    return token


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
    """Whether a Host (or Origin) matches one of ``allowed``; ``x:*`` means any port of x."""
    for pattern in allowed:
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            port = value[len(base) + 1 :] if value.startswith(base + ":") else ""
            if port.isdigit():
                return True
    return False


class RateLimiter:
    """A token bucket per client: ``per_minute`` requests, bursts of a sixth of that."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(10.0, per_minute / 6.0)
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, client: str) -> float:
        """0 when the request may proceed, else the seconds to wait."""
        now = self.clock()
        tokens, last = self._buckets.pop(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > _MAX_CLIENTS:
            self._buckets.popitem(last=False)
        return wait


@dataclass(frozen=True)
class RefusalCodes:
    """The error codes (and the ``WWW-Authenticate`` realm) a server's refusals carry."""

    unauthorized: str
    forbidden: str
    rate_limited: str
    body_too_large: str
    realm: str

    @classmethod
    def prefixed(cls, prefix: str, realm: str) -> RefusalCodes:
        """``PREFIX_UNAUTHORIZED``, ``PREFIX_FORBIDDEN``, ``PREFIX_RATE_LIMITED``,
        ``PREFIX_BODY_TOO_LARGE``."""
        return cls(f"{prefix}_UNAUTHORIZED", f"{prefix}_FORBIDDEN", f"{prefix}_RATE_LIMITED",
                   f"{prefix}_BODY_TOO_LARGE", realm)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class SecurityMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        limiter: RateLimiter,
        max_body_bytes: int,
        public_prefixes: tuple[str, ...] = ("/console",),
        anonymous_limiter: RateLimiter | None = None,
        codes: RefusalCodes,
    ) -> None:
        """``limiter`` limits authenticated requests, per token; ``anonymous_limiter`` (by
        default one with the same rate) limits unauthenticated ones, per client address."""
        self.app = app
        self.codes = codes
        self._expected = ("Bearer " + token).encode("utf-8")
        self._token_bucket = "token:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:32]
        self.anonymous_limiter = anonymous_limiter or RateLimiter(
            round(limiter.rate * 60), clock=limiter.clock)
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.public_prefixes = public_prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() not in {k for k, _ in SECURITY_HEADERS}]
                message = {**message, "headers": headers + list(SECURITY_HEADERS)}
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            status, code, text, extra = refusal
            await _reply(send_with_headers, status, code, text, extra)
            return
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _reply(send_with_headers, 413, self.codes.body_too_large,
                         "the request body is too large", [])
            return
        # The body is read here, whole and bounded, then replayed: a streamed body that
        # grows past the limit is refused before the app sees a byte of it.
        chunks: list[bytes] = []
        received = 0
        more = True
        while more:  # bounded: stops at max_body_bytes
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([], message, receive), send_with_headers)
                return
            body = message.get("body", b"")
            received += len(body)
            if received > self.max_body_bytes:
                await _reply(send_with_headers, 413, self.codes.body_too_large,
                             "the request body is too large", [])
                return
            chunks.append(body)
            more = bool(message.get("more_body", False))
        request: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([request], None, receive), send_with_headers)

    def _refusal(self, scope: Scope) -> tuple[int, str, str, list[tuple[bytes, bytes]]] | None:
        host = _header(scope, b"host") or ""
        if not host_allowed(host, self.allowed_hosts):
            return 421, self.codes.forbidden, "this Host is not allowed", []
        origin = _header(scope, b"origin")
        if origin is not None and (origin == "null" or not host_allowed(origin,
                                                                       self.allowed_origins)):
            return 403, self.codes.forbidden, "this Origin is not allowed", []
        given = (_header(scope, b"authorization") or "").encode("utf-8", "replace")
        if hmac.compare_digest(given, self._expected):
            return self._limited(self.limiter.allow(self._token_bucket))
        client = "ip:" + str((scope.get("client") or ("?", 0))[0])
        limited = self._limited(self.anonymous_limiter.allow(client))
        if limited is not None:
            return limited
        path = scope.get("path", "")
        if scope.get("method") in ("GET", "HEAD") and path.startswith(self.public_prefixes):
            return None
        challenge = f'Bearer realm="{self.codes.realm}"'.encode()
        return 401, self.codes.unauthorized, "a valid bearer token is required", [
            (b"www-authenticate", challenge)
        ]

    def _limited(self, wait: float) -> tuple[int, str, str, list[tuple[bytes, bytes]]] | None:
        if wait <= 0:
            return None
        return 429, self.codes.rate_limited, "too many requests", [
            (b"retry-after", str(max(1, math.ceil(wait))).encode())
        ]


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
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
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
              public_prefixes: tuple[str, ...] = ()) -> SecurityMiddleware:
        """``app`` behind the middleware: rate limits per token and per client address."""
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
        )
