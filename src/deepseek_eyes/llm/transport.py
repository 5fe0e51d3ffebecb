"""The chat client's HTTP/1.1 transport: kept-alive connections, responses parsed by httptools.

:class:`~deepseek_eyes.llm.client.ChatClient` speaks through ``httpx``; this is the layer
under it (an ``httpx.AsyncBaseTransport``) that httpx's default (httpcore and h11) would
otherwise be. The gateway's own cost of a turn is mostly its upstream call's, and on this
machine httpcore and h11, pure Python, took about 1.7 ms of a loopback round trip that
uvicorn (parsing with the same httptools) answers in under 0.3 ms (``bench/gateway.py``).
Everything above the transport stays httpx's: the request built, its headers, redirects
refused, content decoding, the exceptions callers catch. httpx honours ``*_PROXY`` and
``NO_PROXY`` only with its own transport, so where the environment names a proxy the
client keeps httpx's (:func:`deepseek_eyes.llm.client._default_transport`): a proxied
setup works exactly as before.

Decisions a newcomer would otherwise undo:

* One request at a time per connection (HTTP/1.1, no pipelining); an idle connection is
  reused for the same scheme, host and port, at most :data:`KEEPALIVE` of them kept, each
  for :data:`KEEPALIVE_EXPIRY_S`, and at most :data:`MAX_CONNECTIONS` open (httpx's own
  defaults). A connection the server closed while idle is dropped before reuse, never
  written to; a request is never re-sent by this layer (a POST here is a billed call, and
  the client's retry policy is what decides, and audits, a second attempt).
* TLS uses the context httpx itself builds (``httpx.create_ssl_context``: the same
  certificates, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` honoured), with the host's name
  checked.
* Failures are httpx's exceptions (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``,
  ``ReadError``, ``RemoteProtocolError``), so the client maps them as it always did. A body
  cut before its declared end is a ``RemoteProtocolError``, never a short answer.
* A body is handed up as it arrives; reading stops while more than :data:`HIGH_WATER`
  bytes wait unread, so a slow reader does not buffer a whole stream in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, cast

import httptools
import httpx

__all__ = ["HIGH_WATER", "KEEPALIVE", "KEEPALIVE_EXPIRY_S", "MAX_CONNECTIONS",
           "KeepAliveTransport"]

KEEPALIVE = 20
KEEPALIVE_EXPIRY_S = 5.0
MAX_CONNECTIONS = 100
HIGH_WATER = 256 * 1024

_Origin = tuple[str, str, int]


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: its socket's events, and the parse of the response it is
    reading (one at a time)."""

    def __init__(self, origin: _Origin) -> None:
        self.origin = origin
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser: Any = None  # an httptools.HttpResponseParser while a response is read
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._error: Exception | None = None
        self._eof = False
        self._close_delimited = False
        self.headers: list[tuple[bytes, bytes]] = []
        self.reason = b""
        self.headers_done = False
        self.complete = False
        self._keep_alive = False

    # asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._parser is None:  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._error = httpx.RemoteProtocolError("the server switched protocols")
        except httptools.HttpParserError as exc:
            self._error = httpx.RemoteProtocolError(f"malformed HTTP response: {exc}")
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        if self._close_delimited and self.headers_done:
            self.complete = True  # a body without a length ends with the connection
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._eof = True
        if exc is not None and self._error is None:
            self._error = httpx.ReadError(str(exc) or type(exc).__name__)
        self._wake()

    # httptools callbacks ----------------------------------------------------------------
    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        names = {name.lower() for name, _ in self.headers}
        status = self._parser.get_status_code()
        self._close_delimited = (b"content-length" not in names
                                 and b"transfer-encoding" not in names
                                 and status not in (204, 304) and status >= 200)

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        self.complete = True
        # Asked now: once the callback returns, the parser has reset for the next message.
        self._keep_alive = bool(self._parser.should_keep_alive())

    # use ---------------------------------------------------------------------------------
    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self, timeout: float | None) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        async with asyncio.timeout(timeout):
            await self._waiter

    @property
    def reusable(self) -> bool:
        return (not self.closed and not self._eof and self.transport is not None
                and not self.transport.is_closing())

    def send(self, head: bytes, body: bytes) -> None:
        """Write one request and get ready to parse its response."""
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self._chunks.clear()
        self._buffered = 0
        self._error = None
        self._close_delimited = False
        self.headers, self.reason = [], b""
        self.headers_done = self.complete = self._keep_alive = False
        self.transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.transport.write(body)

    async def response_head(self, timeout: float | None) -> int:
        """Wait for the response's status line and headers; returns the status."""
        while not self.headers_done:
            self._raise_if_failed(before_headers=True)
            await self._wait(timeout)
        return int(self._parser.get_status_code())

    async def body(self, timeout: float | None) -> AsyncIterator[bytes]:
        """The response's body, chunk by chunk, as it arrives."""
        while True:
            while self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered <= HIGH_WATER // 4 and self.transport:
                    self._paused = False
                    self.transport.resume_reading()
                yield chunk
            if self.complete:
                return
            self._raise_if_failed(before_headers=False)
            await self._wait(timeout)

    def _raise_if_failed(self, *, before_headers: bool) -> None:
        if self._error is not None:
            raise self._error
        if self._eof:
            raise httpx.RemoteProtocolError(
                "the server closed the connection without sending a response"
                if before_headers else
                "the server closed the connection before the end of the response body")

    def finished(self) -> bool:
        """Whether the response was read whole and the connection may carry another."""
        return (self.complete and not self._chunks and self._error is None
                and not self._close_delimited and self._keep_alive and self.reusable)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            # A connection of a loop that has ended (a client used again under a new
            # asyncio.run) cannot schedule its close there: its socket goes with the loop.
            with contextlib.suppress(RuntimeError):
                self.transport.close()


class _Body(httpx.AsyncByteStream):
    """A response's body: the connection goes back to the pool once it was read whole, and
    is closed when the reader stops early."""

    def __init__(self, pool: KeepAliveTransport, conn: _Connection, timeout: float | None,
                 ) -> None:
        self._pool = pool
        self._conn = conn
        self._timeout = timeout
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._conn.body(self._timeout):
                yield chunk
        except TimeoutError:
            raise httpx.ReadTimeout("the response body did not arrive in time") from None

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._pool.release(self._conn)


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over kept-alive connections (see the module docstring)."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._closed = False

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the transport is closed")
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        origin: _Origin = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
        timeouts = request.extensions.get("timeout", {})
        body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
        head = self._head(request, body)
        await self._slots.acquire()
        conn: _Connection | None = None
        try:
            conn = self._reuse(origin) or await self._connect(origin, timeouts.get("connect"))
            conn.send(head, body)
            try:
                status = await conn.response_head(timeouts.get("read"))
            except TimeoutError:
                raise httpx.ReadTimeout("the response did not arrive in time") from None
        except BaseException:
            if conn is not None:
                conn.close()
            self._slots.release()
            raise
        return httpx.Response(
            status, headers=conn.headers, stream=_Body(self, conn, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": conn.reason},
            request=request)

    @staticmethod
    def _head(request: httpx.Request, body: bytes) -> bytes:
        lines = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
        has_length = False
        for name, value in request.headers.raw:
            lower = name.lower()
            if lower == b"transfer-encoding":
                continue  # the body is sent whole, with its length
            if lower == b"content-length":
                has_length = True
                value = str(len(body)).encode("ascii")
            lines += [name, b": ", value, b"\r\n"]
        if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
            lines.append(b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def _reuse(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if (conn.reusable and now - conn.idle_since < KEEPALIVE_EXPIRY_S
                    and conn.loop is asyncio.get_running_loop()):
                return conn
            conn.close()
        return None

    async def _connect(self, origin: _Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._tls() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(origin), host, port, ssl=tls,
                    server_hostname=host if tls is not None else None)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:  # refused, unreachable, a name that does not resolve, TLS
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return conn

    def release(self, conn: _Connection) -> None:
        """A response is done with its connection: kept for the next request when it was
        read whole and both sides keep it alive, closed otherwise."""
        self._slots.release()
        if self._closed or not conn.finished():
            conn.close()
            return
        idle = self._idle.setdefault(conn.origin, [])
        if len(idle) >= KEEPALIVE:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
