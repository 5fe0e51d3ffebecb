"""One image turn three ways: native on deepseek-flash, bridged on v4-pro, local-only.

    .venv/bin/python bench/eyes.py [--rounds 5]

The runtime (the gateway's turn code, in process) against the loopback DeepSeek
(tests/runtime/upstream.py), which decodes every image it is sent, bills each image as
DeepSeek's price table does (about ``w*h/1568`` tokens within 187..1,024) and text at four
characters a token. Every round sends a new image (the receipt with a few pixels changed,
so no cache answers) with one question:

* **native** — ``deepseek-flash`` sees: the pixels go to the final model, no route;
* **bridged** — ``deepseek-v4-pro`` does not: DeepSeek's own eyes (the ``deepseek`` route,
  ``deepseek-flash`` on the same upstream) read the image into evidence, which the final
  model gets;
* **local** — ``deepseek-v4-pro`` with ``route_priority = ["local"]``: the embedded OCR
  reads it offline.

Each path's sight is learned once in a warm-up turn (the probe), not measured. Per turn:
wall time (median) and upstream tokens (every exact category: final, vision, probe), with
the native path as the baseline: ratio = path / native.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.settings import Settings
from runtime.upstream import LoopbackUpstream

RECEIPT = Image.open(ROOT / "examples" / "receipt.png").convert("RGB")
QUESTION = "What is the total on this receipt?\nANSWER: 64.03."


def variant(number: int) -> bytes:
    """The receipt with one corner pixel changed: a new image to every cache."""
    picture = RECEIPT.copy()
    picture.putpixel((0, 0), (number % 256, (number // 256) % 256, 7))
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


def tokens(runtime: Runtime) -> int:
    exact = runtime.home.usage.summary()["exact"]
    return sum(row["prompt_tokens"] + row["completion_tokens"] for row in exact.values())


async def measure(upstream: LoopbackUpstream, model: str, vision: dict[str, Any],
                  rounds: int, offset: int) -> tuple[float, float, str]:
    with tempfile.TemporaryDirectory() as home_dir:
        settings = Settings.model_validate({
            "llm": {"base_url": upstream.base_url, "api_key": False, "model": model},
            "vision": vision, "storage": {"home": home_dir}})
        home = DataHome.open(settings)
        runtime = Runtime(settings, home)
        try:
            walls: list[float] = []
            spent: list[int] = []
            path = ""
            for number in range(rounds + 1):  # the first turn learns the model's sight
                meta = await runtime.bridge.admit(variant(offset + number))
                before = tokens(runtime)
                started = time.perf_counter()
                result = await runtime.run(TurnRequest(messages=[{"role": "user", "content": [
                    {"type": "text", "text": QUESTION}, image_part(meta)]}]))
                wall = (time.perf_counter() - started) * 1000
                path = result.path
                if number:
                    walls.append(wall)
                    spent.append(tokens(runtime) - before)
            return statistics.median(walls), statistics.median(spent), path
        finally:
            await runtime.aclose()
            home.close()


async def main(rounds: int) -> None:
    with LoopbackUpstream() as upstream:
        native = await measure(upstream, "deepseek-flash", {}, rounds, 0)
        bridged = await measure(upstream, "deepseek-v4-pro", {}, rounds, 1000)
        local = await measure(upstream, "deepseek-v4-pro", {"route_priority": ["local"]},
                              rounds, 2000)
    print(f"rounds: {rounds} (medians per image turn; a new image each turn)")
    for name, (wall, spent, path) in (("native deepseek-flash", native),
                                      ("bridged v4-pro + deepseek route", bridged),
                                      ("local-only v4-pro", local)):
        print(f"{name}: path={path} wall_ms={wall:.1f} upstream_tokens={spent:.0f}")
    for name, (wall, spent, _) in (("bridged", bridged), ("local", local)):
        print(f"{name}_tokens: ours={spent:.0f} baseline={native[1]:.0f} "
              f"ratio={spent / native[1]:.2f}")
        print(f"{name}_wall_ms: ours={wall:.1f} baseline={native[0]:.1f} "
              f"ratio={wall / native[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
