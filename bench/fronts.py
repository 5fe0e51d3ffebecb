"""The Anthropic Messages and OpenAI Responses fronts against the chat route and a direct
upstream call, in one run.

    .venv/bin/python bench/fronts.py [--requests N]

One ``deepseek-eyes serve`` (a real process) in front of the loopback DeepSeek
(tests/runtime/upstream.py), which answers at once, so what is measured is the gateway's.
The same one-line text turn four ways, each the median of N after 20 warm-up requests:

* ``messages``: ``POST /v1/messages`` (translated to the turn loop and back, a signed
  thinking block minted);
* ``responses``: ``POST /v1/responses`` (input items translated to the turn loop and back,
  the reasoning sealed into ``encrypted_content``);
* ``chat``: ``POST /v1/chat/completions`` through the gateway, the OpenAI route;
* ``direct``: the same chat body straight to the loopback upstream.

Whole answers (wall time) and streams (time to the first text delta: Anthropic's
``text_delta``, ``response.output_text.delta`` or a content delta). Ratios are against
``chat`` (each front's own cost) and against ``direct`` (what the gateway costs in all).
``--before REV`` serves ``REV``'s sources beside this tree's; every way is measured in
round-robin blocks (one run, the same load for all).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import export, start_gateway
from runtime.upstream import LoopbackUpstream

Measure = Callable[[httpx.AsyncClient], Awaitable[float]]
ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "bench"}


def chat_body(stream: bool) -> dict[str, object]:
    return {"model": "deepseek-v4-pro", "stream": stream,
            "messages": [{"role": "user", "content": "ANSWER: pong"}]}


def messages_body(stream: bool) -> dict[str, object]:
    return {"model": "claude-opus-4-8", "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": "ANSWER: pong"}]}


def responses_body(stream: bool) -> dict[str, object]:
    return {"model": "deepseek-v4-pro", "stream": stream, "store": False,
            "include": ["reasoning.encrypted_content"],
            "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "ANSWER: pong"}]}]}


async def whole(client: httpx.AsyncClient, url: str, body: dict[str, object],
                headers: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    response = await client.post(url, json=body, headers=headers)
    response.raise_for_status()
    return time.perf_counter() - started


async def first_text(client: httpx.AsyncClient, url: str, body: dict[str, object],
                     marker: str, headers: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    elapsed = math.nan
    async with client.stream("POST", url, json=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if math.isnan(elapsed) and marker in line.replace(" ", ""):
                elapsed = time.perf_counter() - started
    return elapsed


async def samples(measure: Measure, n: int, warm: int = 5) -> list[float]:
    async with httpx.AsyncClient(timeout=30) as client:
        out = []
        for i in range(n + warm):
            value = await measure(client)
            if i >= warm:  # warm-up excluded
                out.append(value)
    return out


def ways_of(gateway: str, direct: str, stream: bool, suffix: str = "") -> dict[str, Measure]:
    """The three routes of one gateway (and, without a suffix, the direct call)."""
    root = gateway.removesuffix("/v1")
    if stream:
        ways: dict[str, Measure] = {
            "messages": lambda c: first_text(
                c, f"{root}/v1/messages", messages_body(True), '"text_delta"',
                ANTHROPIC_HEADERS),
            "responses": lambda c: first_text(
                c, f"{gateway}/responses", responses_body(True),
                "event:response.output_text.delta"),
            "chat": lambda c: first_text(
                c, f"{gateway}/chat/completions", chat_body(True), '"content":"p'),
            "direct": lambda c: first_text(
                c, f"{direct}/chat/completions", chat_body(True), '"content":"p'),
        }
    else:
        ways = {
            "messages": lambda c: whole(c, f"{root}/v1/messages", messages_body(False),
                                        ANTHROPIC_HEADERS),
            "responses": lambda c: whole(c, f"{gateway}/responses", responses_body(False)),
            "chat": lambda c: whole(c, f"{gateway}/chat/completions", chat_body(False)),
            "direct": lambda c: whole(c, f"{direct}/chat/completions", chat_body(False)),
        }
    if suffix:
        del ways["direct"]
    return {name + suffix: way for name, way in ways.items()}


_TIMING = re.compile(r"([a-z]+);dur=([0-9.]+)")


async def unaccounted(gateway: str, n: int = 50) -> dict[str, float]:
    """Per route, whole and streamed (``_stream``: its stages up to its first event, as
    gateway/timing.py reports a stream), the median share of the gateway's Server-Timing
    total no stage claims."""
    root = gateway.removesuffix("/v1")
    routes = {}
    for stream in (False, True):
        suffix = "_stream" if stream else ""
        routes |= {
            f"chat{suffix}": (f"{gateway}/chat/completions", chat_body(stream), None),
            f"messages{suffix}": (f"{root}/v1/messages", messages_body(stream),
                                  ANTHROPIC_HEADERS),
            f"responses{suffix}": (f"{gateway}/responses", responses_body(stream), None)}
    out: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=30) as client:
        for name, (url, body, headers) in routes.items():
            shares = []
            for _ in range(n):
                async with client.stream("POST", url, json=body, headers=headers) as response:
                    response.raise_for_status()
                    await response.aread()
                stages = {k: float(v) for k, v in _TIMING.findall(
                    response.headers.get("server-timing", ""))}
                total = stages.pop("total", 0.0)
                if total:
                    shares.append((total - sum(stages.values())) / total)
            out[name] = statistics.median(shares) if shares else math.nan
    return out


async def main(n: int, before: str | None) -> None:
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        settings = (f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
                    'model = "deepseek-v4-pro"')
        # Server-Timing on (a clock per request costs microseconds): its unaccounted share
        # is printed per route at the end.
        served = [start_gateway(settings, Path(tmp), gateway="server_timing = true")]
        if before:
            served.append(start_gateway(settings, Path(tempfile.mkdtemp(dir=tmp)),
                                        src=export(before, Path(tmp) / "before")))
        try:
            for stream in (False, True):
                ways = ways_of(served[0][1], upstream.base_url, stream)
                if before:
                    ways |= ways_of(served[1][1], upstream.base_url, stream, "_before")
                # Round-robin blocks: a change of load falls on every way alike.
                got: dict[str, list[float]] = {name: [] for name in ways}
                for _ in range(4):
                    for name, measure in ways.items():
                        got[name] += await samples(measure, n // 4)
                times = {name: statistics.median(v) for name, v in got.items()}
                c, d = times["chat"], times["direct"]
                for front, prefix in (("messages", "anthropic"), ("responses", "responses")):
                    name = f"{prefix}_stream_ttft" if stream else f"{prefix}_text_turn"
                    m = times[front]
                    line = (f"{name}: ours={m * 1e3:.2f}ms baseline=chat {c * 1e3:.2f}ms "
                            f"ratio={m / c:.2f}; direct {d * 1e3:.2f}ms ratio={m / d:.2f}")
                    if before:
                        b = times[f"{front}_before"]
                        line += f"; before={b * 1e3:.2f}ms ratio={b / d:.2f}"
                    print(f"{line} (p50 of {len(got[front])})")
            shares = await unaccounted(served[0][1])
            print("server_timing_unaccounted: " + " ".join(
                f"{name}={share * 100:.1f}%" for name, share in shares.items())
                + " target<=10%")
        finally:
            for process, _ in served:
                process.terminate()
                process.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--before", help="a git revision to measure side by side")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.before))
