"""Prefix-stable requests: what the upstream's prompt cache serves over a 5-turn conversation.

    .venv/bin/python bench/prefix_cache.py

DeepSeek bills prompt tokens served from its prefix cache at a fraction of the price of the
others. Ours: ``history_evidence = "full"`` (the default), where every image keeps its
evidence in the message that brought it, so each request starts with the bytes of the one
before. Baseline: ``history_evidence = "pointer"``, which sends fewer tokens but rewrites
the earlier image's message into a pointer, so the prefix breaks there.

Both run the same conversation (a receipt, then four follow-ups, one of which rereads the
image with ``look``) through the runtime against the loopback upstream, which reports
``prompt_cache_hit_tokens`` as DeepSeek does (the longest run of leading messages equal to
an earlier request's). Printed per mode: prompt tokens, cache-hit share, and the billed
equivalent ``miss + HIT_PRICE * hit`` with ``HIT_PRICE`` the hit/miss price ratio (0.1 here,
an assumption; DeepSeek's list prices put it between 0.1 and 0.25). Ratio = ours / baseline
of the billed equivalent (below 1: the stable prefix costs less).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.settings import Settings
from runtime.upstream import LoopbackUpstream

HIT_PRICE = 0.1
RECEIPT = (ROOT / "examples" / "receipt.png").read_bytes()
# ANSWER: lines make the loopback answer briefly, as a real model would (its default is to
# echo the whole prompt, evidence included, which no real answer does).
QUESTIONS = ["What is on this receipt?\nANSWER: A grocery receipt from a supermarket.",
             "And the tax?\nANSWER: The tax line reads 4.12.",
             "LOOK[img-1]: What is the TOTAL?",
             "Thanks. Anything else?\nANSWER: Paid by card; no discounts.",
             "Summarize.\nANSWER: Groceries, 64.03 in total, paid by card."]


def user(text: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [*parts, {"type": "text", "text": text}]}


async def conversation(upstream: LoopbackUpstream, mode: str) -> tuple[int, int]:
    upstream.reset(cache=True)
    with tempfile.TemporaryDirectory() as home_dir:
        settings = Settings.model_validate({
            "llm": {"base_url": upstream.base_url, "api_key": False,
                    "model": "deepseek-v4-pro",
                    "models": [{"id": "deepseek-v4-pro", "input": ["text"]}]},
            "vision": {"deepseek": {"enabled": False}},  # the local route, as before
            "runtime": {"history_evidence": mode},
            "storage": {"home": home_dir},
        })
        home = DataHome.open(settings)
        runtime = Runtime(settings, home)
        try:
            meta = await runtime.bridge.admit(RECEIPT)
            history: list[dict[str, Any]] = []
            prompt = hit = 0
            for number, question in enumerate(QUESTIONS):
                parts = [image_part(meta)] if number == 0 else []
                history.append(user(question, *parts))
                result = await runtime.run(TurnRequest(messages=list(history),
                                                       session_id=f"bench-{mode}"))
                history.append({"role": "assistant", "content": result.content})
                prompt += result.usage.prompt_tokens
                hit += result.usage.cache_hit_tokens
            return prompt, hit
        finally:
            await runtime.aclose()
            home.close()


def main() -> None:
    with LoopbackUpstream() as upstream:
        results = {mode: asyncio.run(conversation(upstream, mode))
                   for mode in ("full", "pointer")}
    billed = {}
    for mode, (prompt, hit) in results.items():
        billed[mode] = (prompt - hit) + HIT_PRICE * hit
        print(f"{mode:>7}: prompt_tokens={prompt} cache_hit={hit} "
              f"share={hit / max(1, prompt):.2f} billed_equivalent={billed[mode]:.0f}")
    print(f"prefix_cache: ours(full)={billed['full']:.0f} baseline(pointer)="
          f"{billed['pointer']:.0f} ratio={billed['full'] / billed['pointer']:.2f}")


if __name__ == "__main__":
    main()
