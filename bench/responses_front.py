"""The OpenAI Responses front against the chat route and a direct upstream call.

    .venv/bin/python bench/responses_front.py [--requests N]

One loopback upstream (tests/runtime/upstream.py, thinking on as DeepSeek's V4 models
are) and one ``deepseek-eyes serve`` process; one keep-alive ``httpx`` client, one request
at a time, the same one-line text turn three ways:

* ``responses``: ``POST /v1/responses`` through the gateway (input items translated to the
  turn loop and back, the reasoning sealed into ``encrypted_content``);
* ``chat``: ``POST /v1/chat/completions`` through the gateway;
* ``direct``: ``POST /v1/chat/completions`` on the loopback upstream itself.

p50 of a whole turn and p50 time to the first text of a streamed one (the first
``response.output_text.delta`` or content delta). Ratios are against ``chat`` (the
front's own cost) and against ``direct`` (what the gateway costs in all).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import start_gateway
from runtime.upstream import LoopbackUpstream

Measure = Callable[[httpx.AsyncClient], Awaitable[float]]


def chat_body(stream: bool) -> dict[str, object]:
    return {"model": "deepseek-v4-pro", "stream": stream,
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


async def p50(measure: Measure, n: int) -> float:
    async with httpx.AsyncClient(timeout=30) as client:
        samples = []
        for i in range(n + 20):
            value = await measure(client)
            if i >= 20:  # warm-up excluded
                samples.append(value)
    return statistics.median(samples)


async def main(n: int) -> None:
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        process, gateway = start_gateway(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-pro"', Path(tmp))
        try:
            for stream in (False, True):
                if stream:
                    ways: dict[str, Measure] = {
                        "responses": lambda c: first_text(
                            c, f"{gateway}/responses", responses_body(True),
                            "event:response.output_text.delta"),
                        "chat": lambda c: first_text(
                            c, f"{gateway}/chat/completions", chat_body(True), '"content":"p'),
                        "direct": lambda c: first_text(
                            c, f"{upstream.base_url}/chat/completions", chat_body(True),
                            '"content":"p'),
                    }
                else:
                    ways = {
                        "responses": lambda c: whole(c, f"{gateway}/responses",
                                                     responses_body(False)),
                        "chat": lambda c: whole(c, f"{gateway}/chat/completions",
                                                chat_body(False)),
                        "direct": lambda c: whole(c, f"{upstream.base_url}/chat/completions",
                                                  chat_body(False)),
                    }
                times = {name: await p50(measure, n) for name, measure in ways.items()}
                name = "responses_stream_ttft" if stream else "responses_text_turn"
                m, c, d = times["responses"], times["chat"], times["direct"]
                print(f"{name}: ours={m * 1e3:.2f}ms baseline=chat {c * 1e3:.2f}ms "
                      f"ratio={m / c:.2f}; direct {d * 1e3:.2f}ms ratio={m / d:.2f} "
                      f"(p50 of {n})")
        finally:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    asyncio.run(main(parser.parse_args().requests))
