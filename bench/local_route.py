"""Local route throughput and accuracy, side by side with Debian's tesseract.

    .venv/bin/python bench/local_route.py [--rounds N]

Ours: the whole ``see`` path on a cache miss (intake, the local OCR route, layout,
canonicalization, the strict gate, storage), one fresh data directory per image.
Baseline: ``tesseract IMAGE - --psm 6`` on the same file (the process start is part of
what a user of tesseract pays, so it is counted), run twice: as installed, and with
``OMP_THREAD_LIMIT=1``, which on a two-core machine is several times faster than its
default OpenMP threading. Both read every corpus image in the same run; the ratio is
ours / baseline per image (lower is better).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import Sample, Score, samples
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge


async def ours(sample: Sample, settings: Settings) -> tuple[float, str]:
    data = sample.path.read_bytes()
    with tempfile.TemporaryDirectory() as tmp, DataHome(Path(tmp)) as home:
        bridge = VisionBridge(settings, home)
        started = time.perf_counter()
        result = await bridge.see(data)
        elapsed = time.perf_counter() - started
        await bridge.aclose()
    text = " ".join(line["text"] for line in result.record.evidence["ocr"])
    return elapsed, text


BASELINES = {
    "tesseract-psm6": {},
    "tesseract-psm6-1thread": {"OMP_THREAD_LIMIT": "1"},
}


def tesseract(sample: Sample, env: dict[str, str]) -> tuple[float, str] | None:
    exe = shutil.which("tesseract")
    if exe is None:
        return None
    started = time.perf_counter()
    done = subprocess.run(
        [exe, str(sample.path), "-", "--psm", "6"],
        capture_output=True, text=True, check=True, env={**os.environ, **env},
    )
    return time.perf_counter() - started, done.stdout


async def main(rounds: int) -> None:
    settings = Settings()
    corpus = samples()
    await ours(corpus[0], settings)  # load the OCR models once, outside the timing
    for kind in ("document", "screen"):
        group = [s for s in corpus if s.kind == kind]
        ours_time = 0.0
        base_time = dict.fromkeys(BASELINES, 0.0)
        ours_score = Score()
        base_score = {name: Score() for name in BASELINES}
        have_baseline = shutil.which("tesseract") is not None
        for _ in range(rounds):
            ours_score = Score()
            base_score = {name: Score() for name in BASELINES}
            for sample in group:
                elapsed, text = await ours(sample, settings)
                ours_time += elapsed
                ours_score.add(sample, text)
                for name, env in BASELINES.items():
                    baseline = tesseract(sample, env)
                    if baseline is not None:
                        base_time[name] += baseline[0]
                        base_score[name].add(sample, baseline[1])
        n = rounds * len(group)
        per_ours = ours_time / n
        head = f"local_route[{kind}]: ours={per_ours:.3f}s/image ({1 / per_ours:.2f} images/s)"
        if not have_baseline:
            print(head + " baseline=tesseract not installed")
        for name in BASELINES if have_baseline else ():
            per_base = base_time[name] / n
            print(f"{head} baseline={name} {per_base:.3f}s/image ratio={per_ours / per_base:.2f}")
        print(f"  accuracy ours: {ours_score.text()}")
        for name in BASELINES if have_baseline else ():
            print(f"  accuracy {name}: {base_score[name].text()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args().rounds))
