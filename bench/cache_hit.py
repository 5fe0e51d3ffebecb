"""Evidence cache hit time against SHA-256 of the same bytes.

    .venv/bin/python bench/cache_hit.py

A repeat ``see`` of a known image must cost about what hashing its bytes costs: no decode,
no route call. Ours: ``VisionBridge.see`` on a warm cache, through the whole public path
(hash, image index, evidence lookup, attempts and audit rows). Baseline: ``hashlib.sha256``
over the same bytes, interleaved with ours in batches (medians of 20). Four sizes: a small
document scan, a full-HD screenshot (plain and noisy) and a large photo-like image.
Ratio = ours / baseline (targets: at most 3 at 45 KB, 1.5 at 230 KB, 1.2 from 4 MB).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import random
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image

from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge

CORPUS = Path(__file__).resolve().parent / "corpus"


def screenshot_png(width: int, height: int, seed: int, noise: float) -> bytes:
    """A screenshot-like image; ``noise`` (0..1) keeps PNG from shrinking it much."""
    rng = random.Random(seed)
    base = Image.open(CORPUS / "05_settings_light.png").convert("RGB").resize((width, height))
    grain = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    mixed = Image.blend(base, grain, noise)
    buffer = io.BytesIO()
    mixed.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()




async def main() -> None:
    images = {
        "receipt-45KB": (CORPUS / "01_receipt.png").read_bytes(),
        "ui-screenshot-1920x1080": screenshot_png(1920, 1080, 1, 0.0),
        "noisy-screenshot-1920x1080": screenshot_png(1920, 1080, 1, 0.08),
        "photo-like-3000x2000": screenshot_png(3000, 2000, 2, 0.08),
    }
    settings = Settings.model_validate({"vision": {"probe": False}})
    with tempfile.TemporaryDirectory() as tmp, DataHome(Path(tmp)) as home:
        bridge = VisionBridge(settings, home)
        for name, data in images.items():
            first = await bridge.see(data)  # a miss: fills the cache
            if first.cached:
                raise SystemExit("expected a cache miss on the first call")
            repeat = max(20, int(200_000_000 / max(len(data), 1) / 10))
            # Interleaved, in batches, medians: a drift in the machine's speed (another
            # process, a clock change) falls on both sides alike.
            batch = max(1, repeat // 20)
            ours_times: list[float] = []
            base_times: list[float] = []
            for _ in range(20):
                started = time.perf_counter()
                for _ in range(batch):
                    hit = await bridge.see(data)
                ours_times.append((time.perf_counter() - started) / batch)
                if not hit.cached:
                    raise SystemExit("expected cache hits")
                started = time.perf_counter()
                for _ in range(batch):
                    hashlib.sha256(data).digest()
                base_times.append((time.perf_counter() - started) / batch)
            ours, baseline = statistics.median(ours_times), statistics.median(base_times)
            print(
                f"cache_hit[{name} {len(data) / 1e6:.2f}MB]: ours={ours * 1e3:.3f}ms "
                f"baseline=sha256 {baseline * 1e3:.3f}ms ratio={ours / baseline:.2f}"
            )
        await bridge.aclose()


if __name__ == "__main__":
    asyncio.run(main())
