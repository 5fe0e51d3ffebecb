"""Command output delivered to one SSE subscriber, and what a stalled subscriber costs.

    .venv/bin/python bench/terminal_sse.py

Ours: ``cat`` of a 64 MiB text file planned and executed through the console API of a real
server (uvicorn on loopback), its output streamed as ``output`` events to one subscriber
reading ``/api/sessions/{id}/events`` with an HTTP client; throughput = output bytes the
subscriber received / time from the execute request to the ``finished`` event. Baseline:
the same ``cat`` through ``subprocess.run`` into memory. A second run adds a subscriber that
connects and never reads: the command's duration and the reading subscriber's throughput
must not suffer (its queue fills, its events are dropped and counted).
The server runs in its own process, as it does for a real console: a reader in the same
process would share the interpreter lock with the server and measure both at once.
Target: at least 100 MB/s to one subscriber.
"""

from __future__ import annotations

import json
import multiprocessing
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import httpx
import uvicorn

from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService
from deepseek_eyes.terminal.transport.console_login import COOKIE, ConsoleLogins
from deepseek_eyes.terminal.transport.http import HttpOptions, build_http_app

SIZE = 64 * 1024 * 1024


def _serve_child(sock: socket.socket, root: Path, receipts: Path, token: str,
                 cookie_to: Connection) -> None:
    service = TerminalService(ServiceConfig(Workspace.of([root]), mode="read-only"),
                              Keyring([b"s" * 32]), receipts)
    # The console API takes the console's login, never the token: log in here, in the
    # server's own process, and hand the cookie to the benchmark.
    codes: list[str] = []
    logins = ConsoleLogins(codes.append)
    secret, _ = logins.login(logins.issue())
    cookie_to.send(f"{COOKIE}={secret}")
    app = build_http_app(service, HttpOptions(token=token, rate_limit_per_minute=100_000),
                         logins=logins)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def serve(root: Path, receipts: Path, token: str) -> tuple[str, str, multiprocessing.Process]:
    """The terminal's HTTP server in a child process, listening before it starts; its URL
    and a console login's cookie."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    cookie_from, cookie_to = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(
        target=_serve_child, args=(sock, root, receipts, token, cookie_to), daemon=True)
    child.start()
    cookie = str(cookie_from.recv())
    return f"http://127.0.0.1:{sock.getsockname()[1]}", cookie, child


def stall(url: str, cookie: str, session_id: str) -> socket.socket:
    """A subscriber that sends its request and never reads a byte."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(f"GET /api/sessions/{session_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
                 f"Cookie: {cookie}\r\n\r\n".encode())
    return sock


def sse_frames(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Whole SSE frames (separated by a blank line) from raw body chunks."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        *frames, buffer = buffer.split(b"\n\n")
        yield from frames


def run_once(url: str, cookie: str, with_stalled: bool) -> tuple[float, int, int, float]:
    headers = {"cookie": cookie, "content-type": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        sid = client.post("/api/sessions").json()["session_id"]
        stalled = stall(url, cookie, sid) if with_stalled else None
        received = dropped = 0
        with client.stream("GET", f"/api/sessions/{sid}/events") as events:
            frames = sse_frames(events.iter_raw())
            next(frames)  # "retry:" — the subscription is live
            plan = client.post(f"/api/sessions/{sid}/plans", json={"argv": ["cat", "big.txt"]})
            t0 = time.perf_counter()
            client.post(f"/api/sessions/{sid}/plans/{plan.json()['plan_id']}/execute")
            for frame in frames:
                data = next((ln[6:] for ln in frame.split(b"\n") if ln.startswith(b"data: ")),
                            None)
                if data is None:
                    continue
                event = json.loads(data)
                if event["type"] == "output":
                    received += len(event["data"])
                elif event["type"] == "dropped":
                    dropped += event["count"]
                elif event["type"] == "finished":
                    break
            elapsed = time.perf_counter() - t0
            receipt = client.get(f"/api/receipts/{event['receipt_id']}").json()
        if stalled is not None:
            stalled.close()
        client.delete(f"/api/sessions/{sid}")
    return elapsed, received, dropped, receipt["duration_ms"] / 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        line = b"".join(bytes([33 + (i % 90)]) for i in range(99)) + b"\n"
        (root / "big.txt").write_bytes(line * (SIZE // len(line)))
        size = (root / "big.txt").stat().st_size
        t0 = time.perf_counter()
        subprocess.run(["cat", "big.txt"], cwd=root, capture_output=True, check=True)
        base = time.perf_counter() - t0
        token = secrets.token_urlsafe(32)
        url, cookie, child = serve(root, Path(tmp) / "receipts", token)
        try:
            run_once(url, cookie, False)  # warm up
            elapsed, received, dropped, proc = run_once(url, cookie, False)
            mbps, base_mbps = received / elapsed / 1e6, size / base / 1e6
            print(f"terminal output to one SSE subscriber: ours={mbps:.1f}MB/s "
                  f"baseline={base_mbps:.1f}MB/s ratio={mbps / base_mbps:.2f} "
                  f"(delivered {received}/{size} bytes, dropped events {dropped})")
            slow_elapsed, slow_received, slow_dropped, slow_proc = run_once(url, cookie, True)
            slow_mbps = slow_received / slow_elapsed / 1e6
            print(f"terminal with a stalled second subscriber: ours={slow_mbps:.1f}MB/s "
                  f"baseline={mbps:.1f}MB/s ratio={slow_mbps / mbps:.2f} "
                  f"(process {slow_proc * 1000:.0f}ms vs {proc * 1000:.0f}ms alone; "
                  f"reader dropped {slow_dropped})")
        finally:
            child.terminate()
            child.join(30)


if __name__ == "__main__":
    main()
