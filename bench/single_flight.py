"""Concurrent identical acquisitions, and the local route's memory over many new images.

    .venv/bin/python bench/single_flight.py [--callers 10] [--images 50] [--skip-rss]

single_flight: ``--callers`` concurrent ``acquire`` calls for the same new image through
the local OCR route. Ours: ``VisionRouter.acquire``, where the callers share one
acquisition. Baseline: the same work without single flight, ``--callers`` independent
acquisitions (the router's own per-acquisition body, each with its cache lookup, decode,
route call and gate), which is what ten requests for one new image did before: ten OCR runs,
one after another behind the engine's lock. Ratio = ours / baseline (lower is better).

rss: VmRSS after the first new image and after ``--images`` new images of varied sizes
(generated text), each read by ``see`` through the local route in a fresh process. Ours: the
route as it is, which hands freed heap back after each read. Baseline: the same with that
release switched off. Ratio = after N / after 1 (the requirement: at most 2).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.store.blobs import sha256_hex
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.types import Variant


def text_image(seed: int) -> bytes:
    """A new PNG of lines of text, its size and font size drawn from ``seed``."""
    rng = random.Random(seed)
    width, height = rng.randrange(200, 1800), rng.randrange(60, 1400)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=rng.randrange(14, 30))
    y = 5
    while y < height - 30:
        amount = f"{rng.randrange(1000)}.{rng.randrange(100):02d}"
        draw.text((5, y), f"line {seed}-{y} total {amount} EUR", fill="black", font=font)
        y += rng.randrange(30, 60)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def concurrent(callers: int, seed: int, *, shared: bool) -> float:
    """Seconds for ``callers`` concurrent acquisitions of one image, new to a fresh data
    directory."""
    data = text_image(seed)
    settings = Settings()
    with tempfile.TemporaryDirectory() as tmp, DataHome(Path(tmp)) as home:
        bridge = VisionBridge(settings, home)
        router = bridge.router
        sha = sha256_hex(data)
        started = time.perf_counter()
        if shared:
            results = await asyncio.gather(*(router.acquire(data) for _ in range(callers)))
        else:
            results = await asyncio.gather(*(
                router._acquire_missing(router._job(
                    sha, data, Variant.EVIDENCE, question=None, route=None, base_route=None
                ))
                for _ in range(callers)
            ))
        elapsed = time.perf_counter() - started
        if {r.route for r in results} != {"local"}:
            raise SystemExit("expected the local route")
        fresh = sum(not r.cached for r in results)
        if fresh != (1 if shared else callers):
            raise SystemExit(f"expected {'one' if shared else 'every'} call to read: {fresh}")
        await bridge.aclose()
    return elapsed


async def rss_child(images: int, release: bool) -> None:
    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine

    if not release:
        LocalOcrEngine.shared()._release_heap = lambda: None
    settings = Settings()
    with tempfile.TemporaryDirectory() as tmp, DataHome(Path(tmp)) as home:
        bridge = VisionBridge(settings, home)
        first = 0.0
        started = time.perf_counter()
        for index in range(images):
            result = await bridge.see(text_image(1000 + index))
            if result.cached:
                raise SystemExit("expected a new image")
            if index == 0:
                first = rss_mb()
        elapsed = time.perf_counter() - started
        await bridge.aclose()
    print(json.dumps({"first": first, "last": rss_mb(), "seconds": elapsed}))


def measure_rss(images: int, *, release: bool) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--rss-child", "ours" if release else "baseline",
         "--images", str(images)],
        capture_output=True, text=True, check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


async def main(args: argparse.Namespace) -> None:
    if args.rss_child:
        await rss_child(args.images, args.rss_child == "ours")
        return
    await concurrent(1, 1, shared=True)  # load the OCR models once, outside the timing
    # The same image for both: each run has a data directory of its own, so it is new.
    ours = await concurrent(args.callers, 2, shared=True)
    baseline = await concurrent(args.callers, 2, shared=False)
    print(
        f"single_flight[{args.callers} callers, one new image, local route]: "
        f"ours={ours:.2f}s baseline=independent {baseline:.2f}s ratio={ours / baseline:.2f}"
    )
    if args.skip_rss:
        return
    runs = {"ours": measure_rss(args.images, release=True),
            "baseline": measure_rss(args.images, release=False)}
    growth = {name: run["last"] / run["first"] for name, run in runs.items()}
    ours_rss, base_rss = (
        f"{run['first']:.0f}MB->{run['last']:.0f}MB (x{growth[name]:.2f}, "
        f"{run['seconds'] / args.images:.2f}s/image)"
        for name, run in runs.items()
    )
    print(
        f"rss[after 1 -> after {args.images} new images, local route]: ours={ours_rss} "
        f"baseline=no heap release {base_rss} "
        f"ratio={runs['ours']['last'] / runs['baseline']['last']:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--callers", type=int, default=10)
    parser.add_argument("--images", type=int, default=50)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--rss-child", choices=("ours", "baseline"), help=argparse.SUPPRESS)
    asyncio.run(main(parser.parse_args()))
