"""Gateway overhead, idle memory and tokens sent for an image conversation.

    .venv/bin/python bench/gateway.py [--requests N]

1. Overhead: the same loopback upstream (tests/runtime/upstream.py) called directly and
   through ``deepseek-eyes serve`` (a real process), one request at a time, by two clients:
   a keep-alive ``httpx`` client and the official ``openai`` client (what users run; it
   parses and validates every response, so its own cost is in both columns). p50 latency of
   a text turn, and p50 time to the first content of a streamed turn. Ratio = through
   gateway / direct (target: at most 1.5 with the ``openai`` client). Beside them, in the
   same blocks, the floor: bench/_bare_proxy.py, a proxy on the gateway's own stack
   (uvicorn on uvloop, httptools, the chat client's transport) that forwards the bytes and
   does nothing else, so what the hop alone adds on this machine is printed with ours.
2. Memory: the gateway process's resident set idle, and after 1,000 text turns; and the
   gateway process's own CPU time per turn over those turns (user and system, from
   ``/proc``: what a busy machine distorts least).

``--before REV`` serves ``REV``'s sources beside this tree's, and every latency is measured
in round-robin blocks over the direct upstream, ours and before (one run, the same load).
3. Tokens: a 5-turn conversation about one image, as a client sends it (the whole history
   every turn). Ours: prompt tokens the upstream counted. Naive replay: the same
   conversation with the image sent as its base64 data URL text every turn, counted the
   same way (the upstream's characters / 4).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import export, start_gateway
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.settings import Settings
from runtime.upstream import LoopbackUpstream

RECEIPT = ROOT / "examples" / "receipt.png"


def start(upstream: LoopbackUpstream, home: Path,
          src: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    return start_gateway(f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
                         'model = "deepseek-v4-pro"', home, src=src)


def start_floor(upstream: LoopbackUpstream) -> tuple[subprocess.Popen[str], str]:
    """bench/_bare_proxy.py in front of ``upstream``: the hop alone, on our serving stack."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_bare_proxy.py"), upstream.base_url, str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("listening"):
            return process, f"http://127.0.0.1:{port}/v1"
    raise SystemExit("the bare proxy did not start")


def cpu_s(pid: int) -> float:
    """CPU time (user and system) the process has used so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


async def latencies(base: str, n: int, *, stream: bool, warm: int = 20) -> list[float]:
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "ping"}]}
    if stream:
        body["stream"] = True
    out: list[float] = []
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(n + warm):
            started = time.perf_counter()
            if stream:
                elapsed = math.nan
                async with client.stream("POST", f"{base}/chat/completions", json=body) as r:
                    async for line in r.aiter_lines():
                        if elapsed != elapsed and line.startswith("data: ") and (
                            '"content":"' in line.replace(" ", "")
                        ):
                            elapsed = time.perf_counter() - started
            else:
                r = await client.post(f"{base}/chat/completions", json=body)
                r.raise_for_status()
                elapsed = time.perf_counter() - started
            if i >= warm:  # warm-up excluded
                out.append(elapsed)
    return out


async def openai_latencies(base: str, n: int, *, stream: bool, warm: int = 20) -> list[float]:
    import openai

    out: list[float] = []
    async with openai.AsyncOpenAI(base_url=base, api_key="bench", max_retries=0) as client:
        for i in range(n + warm):
            started = time.perf_counter()
            if stream:
                elapsed = math.nan
                chunks = await client.chat.completions.create(
                    model="deepseek-v4-pro", stream=True,
                    messages=[{"role": "user", "content": "ping"}])
                async for chunk in chunks:
                    if elapsed != elapsed and chunk.choices and chunk.choices[0].delta.content:
                        elapsed = time.perf_counter() - started
            else:
                await client.chat.completions.create(
                    model="deepseek-v4-pro", messages=[{"role": "user", "content": "ping"}])
                elapsed = time.perf_counter() - started
            if i >= warm:
                out.append(elapsed)
    return out


async def tokens(upstream: LoopbackUpstream, home: Path, history: str) -> tuple[int, int]:
    settings = Settings.model_validate({
        "llm": {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro"},
        "runtime": {"history_evidence": history},
    })
    data_url = "data:image/png;base64," + base64.b64encode(RECEIPT.read_bytes()).decode()
    # The loopback upstream answers with a message's "ANSWER:" line, so each turn gets a
    # realistic one-line answer instead of an echo of the whole prompt.
    questions = [
        "What shop is this?\nANSWER: Green Leaf Market in Portland.",
        "What is the total?\nANSWER: The total is 64.03.",
        "How much tax?\nANSWER: Tax at 8.5% is 5.02.",
        "Which item costs most?\nANSWER: Coffee beans at 18.90.",
        "How was it paid?\nANSWER: By VISA card ending 4821.",
    ]
    ours = naive = 0
    with DataHome(home / f"tokens-{history}") as data:
        runtime = Runtime(settings, data)
        from deepseek_eyes.runtime.messages import parse_messages
        from deepseek_eyes.runtime.turn import TurnRequest

        history: list[dict[str, Any]] = []
        naive_history: list[dict[str, Any]] = []
        for turn, question in enumerate(questions):
            content: list[dict[str, Any]] = [{"type": "text", "text": question}]
            if turn == 0:
                content.append({"type": "image_url", "image_url": {"url": data_url}})
            history.append({"role": "user", "content": content})
            naive_history.append({"role": "user", "content": question + (
                "\n" + data_url if turn == 0 else "")})
            messages = await parse_messages(history, admit=runtime.bridge.admit_all)
            result = await runtime.run(TurnRequest(messages=messages))
            ours += result.usage.prompt_tokens
            naive += math.ceil(len(json.dumps(naive_history)) / 4)
            history.append({"role": "assistant", "content": result.content})
            naive_history.append({"role": "assistant", "content": result.content})
        await runtime.aclose()
    return ours, naive


async def main(n: int, before: str | None) -> None:
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        served: list[subprocess.Popen[str]] = []  # stopped at the end, whatever started
        old: tuple[subprocess.Popen[str], str] | None = None
        try:
            process, gateway = start(upstream, Path(tmp))
            served.append(process)
            floor, floor_url = start_floor(upstream)
            served.append(floor)
            if before:
                old = start(upstream, Path(tempfile.mkdtemp(dir=tmp)),
                            export(before, Path(tmp) / "before"))
                served.append(old[0])
            print(f"gateway_idle_rss: ours={rss_mib(process.pid):.0f}MiB target<150MiB"
                  + (f" before={rss_mib(old[0].pid):.0f}MiB" if old else ""))
            targets = {"direct": upstream.base_url, "ours": gateway, "floor": floor_url}
            if old is not None:
                targets["before"] = old[1]
            for client, measure in (("httpx", latencies), ("openai", openai_latencies)):
                for stream in (False, True):
                    # Round-robin blocks, so a change of load falls on every target alike.
                    samples: dict[str, list[float]] = {name: [] for name in targets}
                    blocks = 4
                    for _ in range(blocks):
                        for name, base in targets.items():
                            samples[name] += await measure(base, n // blocks, stream=stream,
                                                           warm=5)
                    name = "gateway_stream_ttft" if stream else "gateway_text_turn"
                    d = statistics.median(samples["direct"])
                    t = statistics.median(samples["ours"])
                    line = (f"{name}[{client}]: ours={t * 1e3:.2f}ms baseline=direct "
                            f"{d * 1e3:.2f}ms ratio={t / d:.2f} added={(t - d) * 1e3:.2f}ms")
                    if "before" in samples:
                        b = statistics.median(samples["before"])
                        line += f"; before={b * 1e3:.2f}ms ratio={b / d:.2f}"
                    f = statistics.median(samples["floor"])
                    line += (f"; floor (a bare pass-through proxy on our stack)={f * 1e3:.2f}ms "
                             f"ratio={f / d:.2f} added={(f - d) * 1e3:.2f}ms")
                    print(f"{line} (p50 of {len(samples['ours'])})")
            turned, cpu = await rss_after(gateway, process.pid, 1000)
            was = await rss_after(old[1], old[0].pid, 1000) if old else None
            print(f"gateway_rss_after_1000_turns: ours={turned:.0f}MiB target<=80MiB"
                  + (f" before={was[0]:.0f}MiB" if was else ""))
            # The gateway's own CPU per text turn (its process only: the upstream runs in
            # this one), which a loaded machine changes far less than wall time.
            print(f"gateway_cpu_per_turn: ours={cpu * 1e3:.2f}ms"
                  + (f" before={was[1] * 1e3:.2f}ms ratio={cpu / was[1]:.2f}" if was else ""))
        finally:
            for child in served:
                child.terminate()
                child.wait(timeout=10)
        for history in ("pointer", "full"):
            ours, naive = await tokens(upstream, Path(tmp), history)
            print(
                f"image_conversation_tokens[history_evidence={history}]: ours={ours} "
                f"baseline=naive-replay {naive} ratio={ours / naive:.3f}"
            )


async def rss_after(base: str, pid: int, turns: int) -> tuple[float, float]:
    """The gateway's resident set once it has answered ``turns`` more text turns (MiB),
    and the CPU seconds it spent per turn on them."""
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "ping"}]}
    started = cpu_s(pid)
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(turns):
            (await client.post(f"{base}/chat/completions", json=body)).raise_for_status()
    return rss_mib(pid), (cpu_s(pid) - started) / turns


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--before", help="a git revision to measure side by side")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.before))
