"""What the gateway's doors cost a text turn: the same app with and without the security layer.

    .venv/bin/python bench/gateway_security.py [--requests N]

One process, one runtime, one loopback upstream (tests/runtime/upstream.py), two uvicorn
servers on one event loop: ``create_app`` (Host, Origin and fetch-metadata checks, JSON-only
POST, the key compared in constant time, a per-key rate limit, the body read whole under a
deadline) and the same routes bare. One keep-alive client sends text turns to each in turn,
so load and cache state hit both alike. Ratio = p50 with the checks / p50 without.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.gateway.app import _routes, create_app
from deepseek_eyes.gateway.drain import Drain
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.settings import Settings
from runtime.upstream import LoopbackUpstream

KEY = "gDMzbBFV7o47YdZSkAi0gB5-fw-CBGo5wZXcP_-vJCI"  # a bench key, not a secret
BODY = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "ping"}]}


def _socket() -> socket.socket:
    sock = socket.socket()
    # Accepted connections inherit it: without it a response's second write waits for the
    # client's delayed ACK (40 ms), on either server, which would drown what is measured.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def serve_both(runtime: Runtime, settings: Settings) -> tuple[int, int, Any]:
    """Both apps served on one loop in a thread; their ports and a stop function."""
    guarded = create_app(runtime, settings.gateway, key=KEY)
    # The same routes, no security layer (and no drain counting requests: a counter).
    bare = _routes(runtime, settings.gateway, None, Drain(settings.gateway.drain_timeout))
    servers = [
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                      lifespan="off"))
        for app in (guarded, bare)
    ]
    sockets = [_socket(), _socket()]
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def run() -> None:
        tasks = [asyncio.create_task(s.serve(sockets=[sock])) for s, sock in zip(
            servers, sockets, strict=True)]
        while not all(s.started for s in servers):
            await asyncio.sleep(0.01)
        started.set()
        await asyncio.gather(*tasks)
        await runtime.aclose()

    thread = threading.Thread(target=lambda: loop.run_until_complete(run()), daemon=True)
    thread.start()
    if not started.wait(30):
        raise SystemExit("the gateways did not start")

    def stop() -> None:
        for server in servers:
            server.should_exit = True
        thread.join(30)

    return sockets[0].getsockname()[1], sockets[1].getsockname()[1], stop


def main(n: int) -> None:
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        settings = Settings.model_validate({
            "llm": {"base_url": upstream.base_url, "api_key": False,
                    "model": "deepseek-v4-pro"},
            "gateway": {"rate_limit_per_minute": 1_000_000},
        })
        with DataHome(Path(tmp) / "data") as data:
            runtime = Runtime(settings, data)
            guarded_port, bare_port, stop = serve_both(runtime, settings)
            times: dict[str, list[float]] = {"guarded": [], "bare": []}
            auth = {"Authorization": f"Bearer {KEY}"}
            try:
                with httpx.Client(timeout=30) as client:
                    for i in range(n + 20):
                        pair = [("guarded", guarded_port), ("bare", bare_port)]
                        for name, port in pair if i % 2 else pair[::-1]:  # neither always first
                            started = time.perf_counter()
                            reply = client.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                                json=BODY, headers=auth)
                            elapsed = time.perf_counter() - started
                            reply.raise_for_status()
                            if i >= 20:  # warm-up excluded
                                times[name].append(elapsed)
            finally:
                stop()
    ours, base = (statistics.median(times[k]) * 1000 for k in ("guarded", "bare"))
    print(f"gateway text turn p50 (ms): ours={ours:.2f} baseline={base:.2f} "
          f"ratio={ours / base:.3f}")
    ours_mean, base_mean = (statistics.fmean(times[k]) * 1000 for k in ("guarded", "bare"))
    print(f"gateway text turn mean (ms): ours={ours_mean:.2f} baseline={base_mean:.2f} "
          f"ratio={ours_mean / base_mean:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    main(parser.parse_args().requests)
