"""The stdio channel on the event loop's own pipes (serving/stdio.py), spoken to raw over a
real process's pipes: calls are answered in order; a line that is not JSON-RPC, or longer
than the bound, is answered as unparsable and the next one is read; a tool that prints or
reads standard input cannot touch the channel; when the client closes, descriptors 0 and 1
are the channel again, in the blocking mode they had."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

SERVER = '''
import os, sys
import deepseek_eyes.serving.stdio as channel
from deepseek_eyes.serving import loop
from mcp.server.mcpserver import MCPServer

channel.MAX_LINE = 4096
server = MCPServer("probe")

@server.tool()
def noisy(text: str) -> str:
    """Print to standard output, read standard input, and echo."""
    print("stray output", flush=True)
    return text + "|" + repr(sys.stdin.readline())

loop.run(channel.run_stdio(server))
os.write(1, b"after:" + str(os.get_blocking(0)).encode() + b"\\n")
'''


def _rpc(method: str, params: dict[str, Any], ident: int | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if ident is not None:
        message["id"] = ident
    return json.dumps(message).encode() + b"\n"


def _reply(process: subprocess.Popen[bytes], ident: int, seen: list[dict[str, Any]]) -> Any:
    """Lines from the server until the reply to ``ident`` (others are kept in ``seen``)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 30)
    while ready:
        reply = json.loads(process.stdout.readline())
        seen.append(reply)
        if reply.get("id") == ident:
            return reply
        ready, _, _ = select.select([process.stdout], [], [], 30)
    raise AssertionError(f"no reply to {ident} within 30 s")


def test_the_channel_answers_skips_bad_lines_and_is_given_back(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER, encoding="utf-8")
    call = {"name": "noisy", "arguments": {"text": "hi"}}
    process = subprocess.Popen(  # noqa: S603 - our interpreter, our script
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, bufsize=0)
    assert process.stdin is not None
    seen: list[dict[str, Any]] = []
    try:
        process.stdin.write(_rpc("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}, 1))
        assert "result" in _reply(process, 1, seen)
        process.stdin.write(_rpc("notifications/initialized", {}) + b"this is not json-rpc\n"
                            + _rpc("tools/call", call, 2))
        first = _reply(process, 2, seen)
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": '
                            b'{"pad": "' + b"x" * 10_000 + b'"}}\n' + _rpc("tools/call", call, 4))
        second = _reply(process, 4, seen)
        rest, errors = process.communicate(timeout=30)  # closes stdin: end of the session
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    for reply in (first, second):  # stdin read end of file; the print went elsewhere
        assert reply["result"]["structuredContent"] == {"result": "hi|''"}
    assert 3 not in [reply.get("id") for reply in seen]  # the overlong line was not parsed
    assert rest.decode() == "after:True\n"  # fd 1 is the channel again, fd 0 blocking again
    assert "stray output" in errors.decode()
