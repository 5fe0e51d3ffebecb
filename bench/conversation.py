"""A 5-turn image conversation through the gateway, our time per turn split by stage.

    .venv/bin/python bench/conversation.py [--rounds 20]

``deepseek-eyes serve`` (a real process, ``gateway.server_timing`` on) in front of the
loopback DeepSeek (tests/runtime/upstream.py) and a loopback vision route
(tests/vision/loopback.py, which really decodes the image it is sent); both answer at once,
so what is measured is ours. The official ``openai`` client holds the conversation as a
client does: turn 1 sends a receipt image with its question, turns 2–5 resend the whole
history with a new question, all under one ``X-DeepSeekEyes-Session``, a new one per round. The
warm-up conversation acquires the image's evidence from the route; every measured turn
finds it in the evidence cache (a repeated image is the common case; a miss costs what the
route takes, which is not ours to measure here).

Per turn (median over ``--rounds``): the client's wall time, the gateway's own total from
its ``Server-Timing`` header and that total split by stage (parse, admission, vision, store,
prepare, upstream, answer, seal; ``other`` is what no stage claims: routing, the loop's own
bookkeeping), and ``unacct%``, the share of the gateway's total no stage claims (goal: at
most 10%).
Baseline: the same turn's text sent straight to the loopback DeepSeek by the same client
(what the model sees, without an image). Ratio = through the gateway / direct.
"""

from __future__ import annotations

import argparse
import base64
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import start_gateway
from deepseek_eyes.stages import STAGES
from runtime.upstream import LoopbackUpstream
from vision.loopback import LoopbackVisionServer

RECEIPT = ROOT / "examples" / "receipt.png"
QUESTIONS = [
    "What shop is this receipt from?\nANSWER: Green Leaf Market.",
    "What is the total?\nANSWER: 64.03.",
    "How much was the tax?\nANSWER: 5.02.",
    "Which item cost most?\nANSWER: Coffee beans.",
    "How was it paid?\nANSWER: By card.",
]
_TIMING = re.compile(r"([a-z]+);dur=([0-9.]+)")


def start(upstream: str, vision: str, home: Path) -> tuple[subprocess.Popen[str], str]:
    return start_gateway(
        f'[llm]\nbase_url = "{upstream}"\napi_key = false\nmodel = "deepseek-v4-pro"\n'
        '[[llm.models]]\nid = "deepseek-v4-pro"\ninput = ["text"]\n'
        '[vision]\nroute_priority = ["loop"]\nprobe = false\n'
        f'[[vision.routes]]\nname = "loop"\nbase_url = "{vision}"\nmodel = "vision-1"\n',
        home, gateway="server_timing = true")


def stages_of(header: str | None) -> dict[str, float]:
    """Milliseconds by stage from a ``Server-Timing`` value (``total`` included)."""
    return {name: float(ms) for name, ms in _TIMING.findall(header or "")}


def conversation(client: openai.OpenAI, session: str) -> list[tuple[float, dict[str, float]]]:
    """One 5-turn conversation through the gateway: per turn, wall ms and the stages."""
    image = "data:image/png;base64," + base64.b64encode(RECEIPT.read_bytes()).decode()
    history: list[Any] = []
    out = []
    for turn, question in enumerate(QUESTIONS):
        content: list[dict[str, Any]] = [{"type": "text", "text": question}]
        if turn == 0:
            content.append({"type": "image_url", "image_url": {"url": image}})
        history.append({"role": "user", "content": content})
        started = time.perf_counter()
        raw = client.chat.completions.with_raw_response.create(
            model="deepseek-v4-pro", messages=history,
            extra_headers={"X-DeepSeekEyes-Session": session})
        answer = raw.parse()
        wall = (time.perf_counter() - started) * 1000
        out.append((wall, stages_of(raw.headers.get("server-timing"))))
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    return out


def direct(client: openai.OpenAI) -> list[float]:
    """The same turns' text straight to the upstream: per turn, wall ms."""
    history: list[Any] = []
    out = []
    for question in QUESTIONS:
        history.append({"role": "user", "content": question})
        started = time.perf_counter()
        answer = client.chat.completions.create(model="deepseek-v4-pro", messages=history)
        out.append((time.perf_counter() - started) * 1000)
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    return out


def main(rounds: int) -> None:
    with LoopbackUpstream() as upstream, LoopbackVisionServer() as vision, \
            tempfile.TemporaryDirectory() as tmp:
        process, gateway = start(upstream.base_url, vision.url("healthy"), Path(tmp))
        try:
            ours = openai.OpenAI(base_url=gateway, api_key="bench", max_retries=0)
            plain = openai.OpenAI(base_url=upstream.base_url, api_key="bench", max_retries=0)
            conversation(ours, "warm-up")
            direct(plain)
            through = [conversation(ours, f"bench-{i}") for i in range(rounds)]
            baseline = [direct(plain) for _ in range(rounds)]
        finally:
            process.terminate()
            process.wait(timeout=10)
    columns = [*STAGES, "other"]
    print(f"conversation: 5 turns x {rounds} rounds, median ms per turn "
          "(stages from Server-Timing)")
    print(f"{'turn':>4} {'ours':>7} {'direct':>7} {'ratio':>6} {'gateway':>8} "
          + " ".join(f"{c:>9}" for c in columns) + f" {'unacct%':>8}")
    for turn in range(len(QUESTIONS)):
        wall = statistics.median(r[turn][0] for r in through)
        base = statistics.median(r[turn] for r in baseline)
        timing = [r[turn][1] for r in through]
        total = statistics.median(t.get("total", 0.0) for t in timing)
        split = {c: statistics.median(t.get(c, 0.0) for t in timing) for c in STAGES}
        split["other"] = statistics.median(
            t.get("total", 0.0) - sum(t.get(c, 0.0) for c in STAGES) for t in timing)
        share = statistics.median(
            (t.get("total", 0.0) - sum(t.get(c, 0.0) for c in STAGES)) / t["total"]
            for t in timing if t.get("total"))
        print(f"{turn + 1:>4} {wall:7.2f} {base:7.2f} {wall / base:6.2f} {total:8.2f} "
              + " ".join(f"{split[c]:9.3f}" for c in columns) + f" {share * 100:7.1f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    main(parser.parse_args().rounds)
