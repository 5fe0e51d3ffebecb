"""What operations cost a gateway text turn: traces off against the code before them, and on.

    .venv/bin/python bench/tracing_off.py [--requests N] [--before REV]

Three ``deepseek-eyes serve`` processes on one loopback upstream (tests/runtime/upstream.py),
each asked the same whole (not streamed) text turn in turn, ``N`` rounds after a warm-up,
by one keep-alive ``httpx`` client:

* ``before``: ``REV``'s sources (default ``f89cf58``, the commit this work started from:
  no /metrics, no /readyz, no traces), exported with ``git archive``;
* ``off``: this tree with traces off (the default), ``/metrics`` on (its middleware counts
  every request);
* ``on``: this tree exporting traces over OTLP/HTTP to a sink on loopback that answers 200.

Rounds are interleaved (one request to each, then the next round), so a busy machine slows
all three alike. Printed per pair: p50 wall time of a turn, and the gateway's own ``total``
from its ``Server-Timing`` header (``gateway.server_timing``), as ``name: ours=… baseline=…
ratio=…``. "~zero when off" means ``off`` within the noise of ``before``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from _serve import start_gateway
from conversation import stages_of
from history import export
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "ping"}]}


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export and keeps nothing."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 - the base's signature
        return


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def main(requests: int, before: str) -> None:
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    settings = "[llm]\nbase_url = \"{url}\"\napi_key = false\nmodel = \"" + MODEL + "\"\n"
    with tempfile.TemporaryDirectory() as tmp_name, LoopbackUpstream() as upstream:
        tmp = Path(tmp_name)
        src = export(before, tmp / "before")
        text = settings.format(url=upstream.base_url)
        traced = text + (f'[telemetry]\nenabled = true\nendpoint = '
                         f'"http://127.0.0.1:{sink.server_address[1]}/v1/traces"\n')
        servers = {}
        for name, config, revision in (("before", text, src), ("off", text, None),
                                       ("on", traced, None)):
            home = tmp / f"home-{name}"
            home.mkdir()
            servers[name] = start_gateway(config, home, gateway="server_timing = true",
                                          src=revision)
        wall: dict[str, list[float]] = {name: [] for name in servers}
        own: dict[str, list[float]] = {name: [] for name in servers}
        try:
            with httpx.Client(timeout=30) as client:
                for index in range(requests + 30):
                    for name, (_process, base) in servers.items():
                        started = time.perf_counter()
                        answer = client.post(f"{base}/chat/completions", json=BODY)
                        elapsed = time.perf_counter() - started
                        answer.raise_for_status()
                        if index >= 30:  # warm-up excluded
                            wall[name].append(elapsed)
                            own[name].append(
                                stages_of(answer.headers.get("server-timing")).get(
                                    "total", float("nan")) / 1000)
        finally:
            for process, _base in servers.values():
                process.terminate()
                process.wait(timeout=30)
            sink.shutdown()
    for label, ours, base in (("tracing_off_vs_before", "off", "before"),
                              ("tracing_on_vs_off", "on", "off")):
        for what, series in (("wall_p50_ms", wall), ("own_p50_ms", own)):
            a, b = p50(series[ours]), p50(series[base])
            print(f"{label}.{what}: ours={a:.2f} baseline={b:.2f} ratio={a / b:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--before", default="f89cf58")
    args = parser.parse_args()
    main(args.requests, args.before)
