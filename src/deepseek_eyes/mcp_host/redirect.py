"""The loopback listener that catches a sign-in's authorization redirect.

127.0.0.1 only, an ephemeral port unless the settings pin one, one path (``/callback``), a
bounded request read under a timeout. It checks ``state`` itself, before the SDK does: a
redirect whose ``state`` is not the one in the URL shown is answered 400 and ignored, so
another local process cannot end a sign-in by knocking on the port (the SDK would fail the
whole flow on a mismatch). A redirect carrying ``error`` ends the sign-in with
``MCP_LOGIN_FAILED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from html import escape
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from deepseek_eyes.errors import McpError

__all__ = ["RedirectCatcher", "listening"]

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
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self._port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._server.wait_closed()

    def expect(self, authorization_url: str) -> None:
        """Remember the ``state`` of the URL shown to the person; wait for its redirect
        (a step-up shows another URL, with another ``state``)."""
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        self._expected = state or None
        self._result = asyncio.get_running_loop().create_future()

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
        if self._result is None or self._result.done():
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


@contextlib.asynccontextmanager
async def listening(port: int | None) -> AsyncIterator[RedirectCatcher]:
    """A started catcher, closed after.

    Raises:
        McpError: ``MCP_LOGIN_FAILED`` when the port cannot be bound.
    """
    try:
        catcher = RedirectCatcher(port)
        await catcher.__aenter__()
    except OSError as exc:
        raise McpError(f"cannot listen for the sign-in redirect on 127.0.0.1: {exc}",
                       code="MCP_LOGIN_FAILED") from None
    try:
        yield catcher
    finally:
        await catcher.__aexit__()
