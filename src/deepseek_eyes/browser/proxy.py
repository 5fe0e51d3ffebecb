"""The request proxy: where the browser's network policy is enforced.

Every browser session runs one of these, in-process, on a random loopback port, and its
Chromium is launched with that proxy and with nothing else to connect to (see
:data:`PROXY_ARGS`): loopback is not bypassed (``<-loopback>``), QUIC and DNS prefetching
are off, WebRTC may not send UDP outside the proxy, and Chromium's own host resolver maps
every name but the proxy's address to nothing.

Why a proxy and not Playwright's ``route``: a route handler sees the first URL of a request
only. Chromium follows 301/302/307 hops of iframes, fetches, images, stylesheets, scripts
and form posts without asking it again, and WebSockets and EventSource are not routed at
all — so a page reached a denied host by a redirect or a socket. Through a proxy, each
redirect hop is a new request, checked before anything is sent; a WebSocket or an
``https://`` request is a ``CONNECT`` checked the same way; a worker's, a prefetch's and a
popup's requests come here too, because Chromium has no other way out.

The proxy resolves the host itself, asks the one decision
(:meth:`~deepseek_eyes.browser.policy.NavigationPolicy.host_refusal`) with the canonical
host *and every address it resolved to*, and connects to one of exactly those addresses: a
name that resolves to a public address when checked and to ``127.0.0.1`` a moment later
(DNS rebinding) never gets a second lookup. Tests point the resolver elsewhere
(``resolver=``) to play such names offline.

A refused request is answered ``403`` with an empty body (a refused ``CONNECT`` fails the
tunnel), so nothing from the refused host is ever a document; the refusal is reported to the
session, which shows it as an event of the next observation.

Bounded: connections at once, request and response head sizes, the time to send a head, to
resolve, to connect, and to stay idle; a download's bytes (:meth:`RequestProxy.cap_origin`).
Plain HTTP is forwarded one request per connection (``Connection: close``), which keeps the
proxy a byte pump and never a parser of bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from deepseek_eyes.browser.hosts import Host, HostError, IPAddress, canonical_host
from deepseek_eyes.browser.policy import NavigationPolicy

__all__ = ["PROXY_ARGS", "Refusal", "RequestProxy", "Resolver", "system_resolver"]

#: Resolves (host, port) to addresses (strings); tests replace it.
Resolver = Callable[[str, int], Awaitable[list[str]]]

PROXY_ARGS = (
    "--disable-quic",
    "--dns-prefetch-disable",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)
MAX_HEAD_BYTES = 64 * 1024
MAX_CONNECTIONS = 256
MAX_ADDRESSES = 16
HEAD_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 300.0
CHUNK = 64 * 1024
#: A tunnel (TLS) carries a download's bytes plus records and headers: this much slack.
TUNNEL_SLACK = 64 * 1024
_HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection",
                          "keep-alive", "te", "trailer", "upgrade"})
_REFUSED = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Refusal:
    """One refused request: ``target`` is the URL (plain HTTP) or ``host:port`` (a tunnel);
    ``origin`` is the canonical ``host:port``."""

    method: str
    target: str
    origin: str
    reason: str

    def describe(self) -> str:
        return f"blocked: {self.method} {json.dumps(self.target[:200])} ({self.reason})"


@dataclass(eq=False)
class _Upstream:
    origin: str
    received: int = 0
    cap_from: int | None = None  # bytes received when a download cap began
    exact_cap: int | None = None  # a plain-HTTP attachment: body bytes allowed
    cut: bool = False


@dataclass
class _Caps:
    limit: int
    origins: dict[str, int] = field(default_factory=dict)  # origin → downloads running


def _authority(target: str) -> tuple[str, int] | None:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    number = int(port)
    return (host, number) if 0 < number < 65536 else None


class RequestProxy:
    """``proxy = RequestProxy(policy, on_refusal=...); await proxy.start(); proxy.url``."""

    def __init__(self, policy: NavigationPolicy, *, on_refusal: Callable[[Refusal], None],
                 on_event: Callable[[str], None] | None = None,
                 resolver: Resolver | None = None, connect_timeout: float = 30.0,
                 max_download_bytes: int = 100 * 1024 * 1024) -> None:
        self.policy = policy
        self.resolver = resolver or system_resolver
        self.connect_timeout = connect_timeout
        self.refused: deque[Refusal] = deque(maxlen=512)
        self.changed = asyncio.Event()  # set on every refusal (tests wait on it)
        self._on_refusal = on_refusal
        self._on_event = on_event or (lambda _text: None)
        self._caps = _Caps(max_download_bytes)
        self._upstreams: set[_Upstream] = set()
        self._clients: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0,
                                                  limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._clients):
            task.cancel()
        for task in list(self._clients):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        self._server = None

    # -- downloads -----------------------------------------------------------------------
    def cap_origin(self, host: str, port: int) -> None:
        """A download from ``host:port`` began: from now on a connection to it is cut once
        it has carried ``max_download_bytes`` (plus TLS slack) more."""
        origin = self._origin_of(host, port)
        self._caps.origins[origin] = self._caps.origins.get(origin, 0) + 1
        for upstream in self._upstreams:
            if upstream.origin == origin and upstream.cap_from is None:
                upstream.cap_from = upstream.received

    def uncap_origin(self, host: str, port: int) -> None:
        origin = self._origin_of(host, port)
        left = self._caps.origins.get(origin, 0) - 1
        if left > 0:
            self._caps.origins[origin] = left
            return
        self._caps.origins.pop(origin, None)
        for upstream in self._upstreams:
            if upstream.origin == origin:
                upstream.cap_from = None

    @staticmethod
    def _origin_of(host: str, port: int) -> str:
        try:
            return f"{canonical_host(host).url_form()}:{port}"
        except HostError:
            return f"{host}:{port}"

    # -- a connection from Chromium ------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._clients) >= MAX_CONNECTIONS:
            await self._answer(writer, _BUSY)
            return
        self._clients.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, ValueError, OSError):
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, data: bytes) -> None:
        with contextlib.suppress(Exception):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._answer(writer, _BAD_REQUEST)
            return
        method, target, _ = parts
        if method.upper() == "CONNECT":
            authority = _authority(target)
            if authority is None:
                await self._answer(writer, _BAD_REQUEST)
                return
            await self._tunnel(reader, writer, target, *authority)
            return
        try:
            url = urlsplit(target)
            port = url.port
        except ValueError:
            url, port = None, None
        if url is None or url.scheme.lower() != "http" or not url.hostname:
            await self._answer(writer, _BAD_REQUEST)
            return
        await self._forward(reader, writer, method, target, url.hostname, port or 80,
                            url.path or "/", url.query, header_lines)

    async def _admit(self, method: str, target: str, host_text: str, port: int
                     ) -> tuple[Host, list[IPAddress]] | None:
        """The decision: None (and a recorded refusal) when the request may not go out;
        otherwise the host and the addresses that were checked, to connect to."""
        try:
            host = canonical_host(host_text)
        except HostError as exc:
            self._refuse(method, target, f"{host_text}:{port}", f"the host cannot be parsed "
                                                                f"({exc})")
            return None
        origin = f"{host.url_form()}:{port}"
        reason = self.policy.host_refusal(host, port)  # by name first: no lookup for a no
        if reason is not None:
            self._refuse(method, target, origin, reason)
            return None
        if host.address is not None:
            addresses: list[IPAddress] = [host.address]
        else:
            addresses = await self._resolve(host.name, port)
            if not addresses:
                return host, []
        reason = self.policy.host_refusal(host, port, addresses)
        if reason is None and port == self.port and any(a.is_loopback or a.is_unspecified
                                                        for a in addresses):
            reason = "that is the browser's own proxy"
        if reason is not None:
            self._refuse(method, target, origin, reason)
            return None
        return host, addresses

    async def _resolve(self, name: str, port: int) -> list[IPAddress]:
        try:
            async with asyncio.timeout(self.connect_timeout):
                found = await self.resolver(name, port)
        except (OSError, TimeoutError, UnicodeError):
            return []
        out: list[IPAddress] = []
        for text in found[:MAX_ADDRESSES]:
            with contextlib.suppress(ValueError):
                out.append(ipaddress.ip_address(text.split("%", 1)[0]))
        return out

    def _refuse(self, method: str, target: str, origin: str, reason: str) -> None:
        refusal = Refusal(method[:16], target[:2048], origin, reason)
        self.refused.append(refusal)
        self.changed.set()
        self.changed = asyncio.Event()
        self._on_refusal(refusal)

    async def _connect(self, addresses: list[IPAddress], port: int
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:  # only the addresses the decision saw
            try:
                async with asyncio.timeout(self.connect_timeout):
                    return await asyncio.open_connection(str(address), port, limit=MAX_HEAD_BYTES)
            except (OSError, TimeoutError):
                continue
        return None

    def _upstream(self, origin: str) -> _Upstream:
        upstream = _Upstream(origin)
        if origin in self._caps.origins:
            upstream.cap_from = 0
        self._upstreams.add(upstream)
        return upstream

    async def _open(self, writer: asyncio.StreamWriter, method: str, target: str,
                    host_text: str, port: int
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, _Upstream] | None:
        """The decision, then a connection to an address it checked; None once Chromium
        has been answered (403 refused, 502 unreachable)."""
        admitted = await self._admit(method, target, host_text, port)
        if admitted is None:
            await self._answer(writer, _REFUSED)
            return None
        host, addresses = admitted
        connection = await self._connect(addresses, port)
        if connection is None:
            await self._answer(writer, _BAD_GATEWAY)
            return None
        up_reader, up_writer = connection
        return up_reader, up_writer, self._upstream(f"{host.url_form()}:{port}")

    # -- CONNECT: https, wss, ws ---------------------------------------------------------
    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      target: str, host_text: str, port: int) -> None:
        opened = await self._open(writer, "CONNECT", target, host_text, port)
        if opened is None:
            return
        up_reader, up_writer, upstream = opened
        try:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await self._both(reader, writer, up_reader, up_writer, upstream)
        finally:
            self._upstreams.discard(upstream)
            up_writer.close()

    # -- absolute-form plain HTTP --------------------------------------------------------
    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       method: str, target: str, host_text: str, port: int, path: str,
                       query: str, header_lines: list[str]) -> None:
        opened = await self._open(writer, method, target, host_text, port)
        if opened is None:
            return
        up_reader, up_writer, upstream = opened
        kept = [line for line in header_lines
                if line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
        request = "\r\n".join([f"{method} {path}{'?' + query if query else ''} HTTP/1.1",
                               *kept, "Connection: close", "", ""])
        try:
            up_writer.write(request.encode("latin-1"))
            await up_writer.drain()
            async with asyncio.timeout(self.connect_timeout):
                head = await up_reader.readuntil(b"\r\n\r\n")
            writer.write(self._response_head(head, upstream))
            await writer.drain()
            await self._both(reader, writer, up_reader, up_writer, upstream)
        finally:
            self._upstreams.discard(upstream)
            up_writer.close()

    def _response_head(self, head: bytes, upstream: _Upstream) -> bytes:
        status, *lines = head[:-4].decode("latin-1").split("\r\n")
        kept = []
        for line in lines:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            if key in _HOP_HEADERS:
                continue
            if key == "content-disposition" and value.strip().lower().startswith("attachment"):
                upstream.exact_cap = self._caps.limit
            kept.append(line)
        return "\r\n".join([status, *kept, "Connection: close", "", ""]).encode("latin-1")

    # -- pumping ---------------------------------------------------------------------------
    async def _both(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter,
                    upstream: _Upstream) -> None:
        """Bytes both ways until either side ends or is idle too long, or a cap cuts."""
        pumps = [asyncio.ensure_future(self._pump(reader, up_writer, None)),
                 asyncio.ensure_future(self._pump(up_reader, writer, upstream))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for pump in pumps:
                with contextlib.suppress(BaseException):
                    await pump

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    upstream: _Upstream | None) -> None:
        while True:
            async with asyncio.timeout(IDLE_TIMEOUT_S):
                data = await source.read(CHUNK)
            if not data:
                return
            if upstream is not None:
                passed = self._count(upstream, data)
                if passed is None:
                    return
                data = passed
            sink.write(data)
            await sink.drain()

    def _count(self, upstream: _Upstream, data: bytes) -> bytes | None:
        """The part of ``data`` that may pass; None when the cap is reached (and the
        connection is cut, the download with it)."""
        if upstream.cut:
            return None
        before = upstream.received
        upstream.received += len(data)
        limit = self._caps.limit
        if upstream.exact_cap is not None and upstream.received > upstream.exact_cap:
            allowed = max(0, upstream.exact_cap - before)
            self._on_event(f"a download from {json.dumps(upstream.origin)} was cut at "
                           f"{upstream.exact_cap} bytes (browser.max_download_bytes)")
            upstream.cut = True  # nothing more after this part
            return data[:allowed] if allowed else None
        if upstream.cap_from is not None and (
                upstream.received - upstream.cap_from > limit + TUNNEL_SLACK):
            self._on_event(f"a download from {json.dumps(upstream.origin)} was cut after "
                           f"{limit} bytes (browser.max_download_bytes)")
            return None
        return data
