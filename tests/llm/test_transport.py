"""The chat client's own HTTP/1.1 transport against real sockets: a tiny asyncio server per
test that answers with exactly the bytes a case needs (lengths, chunks, a close-delimited
body, a cut, a server that closes idle connections)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from deepseek_eyes.llm.transport import KeepAliveTransport

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request (head and a Content-Length body), or None at the connection's end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server; yields its URL and the number of each connection accepted."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted) + 1)
        try:
            await handler(reader, writer, accepted[-1])
        except asyncio.CancelledError:  # the server stopped while the client held it open
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", accepted


def _answer(body: bytes, *, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


async def _keep_answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          connection: int) -> None:
    while (request := await _read_request(reader)) is not None:
        writer.write(_answer(b'{"connection": %d, "got": %d}' % (connection, len(request))))
        await writer.drain()


async def test_connections_are_kept_alive_and_bodies_sent_whole() -> None:
    async with serving(_keep_answering) as (url, accepted), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        answers = [(await client.post(f"{url}/v1/chat", json={"n": i})).json()
                   for i in range(3)]
        big = await client.post(f"{url}/v1/chat", content=b"x" * 200_000,
                                headers={"Content-Type": "application/json"})
    assert [a["connection"] for a in answers] == [1, 1, 1]
    assert accepted == [1]
    assert big.json()["got"] > 200_000  # the head and every byte of the body arrived


async def test_a_chunked_body_is_decoded() -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      _n: int) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        await writer.drain()
        await _read_request(reader)  # kept alive: wait for the client to go

    async with serving(chunked) as (url, _), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        response = await client.get(f"{url}/v1/models")
    assert response.text == "hello world"


async def test_a_body_without_a_length_ends_with_the_connection() -> None:
    async def close_delimited(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                              _n: int) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        await writer.drain()

    async with serving(close_delimited) as (url, accepted), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        first = await client.get(f"{url}/v1/models")
        second = await client.get(f"{url}/v1/models")
    assert (first.text, second.text) == ("all of it", "all of it")
    assert accepted == [1, 2]  # a closed connection is not reused


async def test_a_body_cut_before_its_length_is_a_protocol_error() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()

    async with serving(cut) as (url, _), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="before the end"):
            await client.get(f"{url}/v1/models")


async def test_no_answer_at_all_is_a_protocol_error() -> None:
    async def silent(reader: asyncio.StreamReader, _w: asyncio.StreamWriter, _n: int) -> None:
        await _read_request(reader)

    async with serving(silent) as (url, _), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.post(f"{url}/v1/chat", json={})


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def one_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       connection: int) -> None:
        await _read_request(reader)
        writer.write(_answer(b'{"connection": %d}' % connection))
        await writer.drain()  # then closed, though the answer said nothing of it

    async with serving(one_each) as (url, accepted), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        first = (await client.get(f"{url}/v1/models")).json()
        for _ in range(100):  # the close reaches the client's idle connection
            await asyncio.sleep(0)
        second = (await client.get(f"{url}/v1/models")).json()
    assert (first["connection"], second["connection"]) == (1, 2)
    assert accepted == [1, 2]


async def test_refused_and_slow_servers_raise_httpx_errors() -> None:
    async with serving(_keep_answering) as (url, _):
        pass  # closed: nothing listens there now
    async with httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"{url}/v1/models")

    never = asyncio.Event()

    async def stalls(reader: asyncio.StreamReader, _w: asyncio.StreamWriter, _n: int) -> None:
        await _read_request(reader)
        await never.wait()

    async with serving(stalls) as (url, _), httpx.AsyncClient(
            transport=KeepAliveTransport(), timeout=httpx.Timeout(0.05)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"{url}/v1/models")
        never.set()


async def test_a_body_left_unread_closes_its_connection() -> None:
    async with serving(_keep_answering) as (url, accepted), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        async with client.stream("POST", f"{url}/v1/chat", json={}) as response:
            assert response.status_code == 200  # closed before its body was read
        again = await client.post(f"{url}/v1/chat", json={})
    assert again.json()["connection"] == 2
    assert accepted == [1, 2]


async def test_a_proxy_the_environment_names_is_still_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from deepseek_eyes.llm.client import ChatClient

    lines: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    _n: int) -> None:
        request = await _read_request(reader)
        assert request is not None
        lines.append(request.split(b"\r\n", 1)[0])
        writer.write(_answer(b'{"data": [{"id": "via-proxy"}]}'))
        await writer.drain()
        await _read_request(reader)

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with serving(proxy) as (url, _):
        monkeypatch.setenv("HTTP_PROXY", url)
        client = ChatClient("http://model.test/v1")
        try:
            assert await client.list_models() == [{"id": "via-proxy"}]
        finally:
            await client.aclose()
    # httpx's own transport, as before this module: the request in the proxy's form
    assert lines == [b"GET http://model.test/v1/models HTTP/1.1"]

