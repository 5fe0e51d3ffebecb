"""Serving an MCP server over stdin and stdout without a thread hop per message.

The SDK's ``stdio_server`` reads standard input with ``anyio.wrap_file``: every line read,
every write and every flush is a call in a worker thread, three thread hops for one tool
call (the wake-up of a worker and of the event loop after it, each way), a tenth of a
``terminal_run`` of ``true`` over stdio. When both descriptors are pipes or sockets (how
an MCP client starts a server) they are read and written here on the event loop itself
(``connect_read_pipe``/``connect_write_pipe``), and the SDK's ``stdio_server`` is handed
those streams: its parsing, its error for a line that is not JSON-RPC and its framing stay
the SDK's. Anything else (a terminal, a file) goes the SDK's way, unchanged.

What the SDK does with the descriptors when it owns them is done here too: while serving,
descriptor 0 reads the null device and descriptor 1 writes to standard error, so a handler
or a child that reads standard input gets end of file and one that prints cannot corrupt
the channel; the channel is kept on private duplicates, and both are put back (with their
blocking mode) when the server ends.

A line longer than :data:`MAX_LINE` (the SDK had no bound) is skipped up to its end and
handed on empty, so the SDK answers it as an unparsable message and reads on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

__all__ = ["MAX_LINE", "run_stdio"]

#: The longest JSON-RPC line read (a ``see`` of a 20 MB image as a data: URL is 27 MB).
MAX_LINE = 64 * 1024 * 1024


async def run_stdio(mcp: MCPServer) -> None:
    """``mcp.run_stdio_async()``, on the event loop's own pipes where it can."""
    lowlevel = mcp._lowlevel_server  # what run_stdio_async runs, with our streams
    async with _channel() as streams:
        stdin, stdout = streams if streams is not None else (None, None)
        async with stdio_server(stdin=cast("Any", stdin), stdout=cast("Any", stdout)) \
                as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream,
                               lowlevel.create_initialization_options())


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _channel() -> AsyncIterator[tuple[_LineReader, _LineWriter] | None]:
    """The channel as a reader and a writer on the loop, or None (the SDK's own way)."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    sys.stdout.flush()
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    blocking = (os.get_blocking(wire_in), os.get_blocking(wire_out))
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    in_file = os.fdopen(wire_in, "rb", buffering=0)
    out_file = os.fdopen(wire_out, "wb", buffering=0)
    read_transport: asyncio.BaseTransport | None = None
    write_transport: asyncio.BaseTransport | None = None
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), in_file)
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, out_file)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _LineReader(reader), _LineWriter(writer)
    finally:
        for transport in (read_transport, write_transport):
            if transport is not None:
                transport.close()
        await asyncio.sleep(0)  # the transports' close callbacks (they close the files)
        for file in (in_file, out_file):
            with contextlib.suppress(OSError):
                file.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        # The pipes' open file descriptions are shared with whoever holds their other
        # copies: leave them in the mode they had.
        for fd, was in zip((0, 1), blocking, strict=True):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was)


class _LineReader:
    """What the SDK's reader iterates: the channel's lines as text (UTF-8, bad bytes
    replaced, as the SDK decodes them)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise StopAsyncIteration from None
            line = exc.partial  # the last line, without its newline
        except asyncio.LimitOverrunError:
            await self._skip_line()
            return "\n"
        return line.decode("utf-8", errors="replace")

    async def _skip_line(self) -> None:
        """Drop the rest of an overlong line, a buffer's worth at a time."""
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


class _LineWriter:
    """What the SDK's writer calls: ``write`` a line, then ``flush`` (waits while the
    client reads slower than the server writes)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()
