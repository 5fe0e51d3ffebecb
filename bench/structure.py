"""What structure costs on the local route: OCR alone against OCR + structure, same images.

    .venv/bin/python bench/structure.py [--rounds N]

Baseline: the OCR engine's read of an image and the evidence built from its lines alone
(what the route did before issue 42). Ours: the same read plus the layout model, region
assignment, columns, reading order, refusals and charts (the route's call as it is now).
Both run in one process on every image of ``bench/corpus`` and of the generated structure
corpus (``tests/vision/structure_corpus.py``: documents, a chart, photos), interleaved per
image so a busy machine slows both alike; the models are loaded once, before any timing.
Wall time and process CPU time are both printed: on a shared two-core machine the wall
time swings with other load, the CPU time much less. Budget (issue 42): ratio <= 1.6.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import samples
from deepseek_eyes.vision.routes.layout import build_evidence
from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine
from deepseek_eyes.vision.routes.regions import LayoutModel
from vision.structure_corpus import corpus

BUDGET = 1.6


def images() -> list[tuple[str, str, Image.Image]]:
    out = [
        (s.kind, s.name, Image.open(s.path).convert("RGB")) for s in samples()
    ]
    for sample in corpus():
        kind = "chart" if "chart" in sample.name else (
            "photo" if not sample.has_text else "page"
        )
        out.append((kind, sample.name, sample.image.convert("RGB")))
    return out


def timed(work: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(rounds: int) -> None:
    ocr = LocalOcrEngine.shared()
    layout = LayoutModel.shared()
    warm = np.full((256, 256, 3), 255, dtype=np.uint8)
    ocr.read(warm)
    layout.detect(warm)  # both models loaded once, outside the timing
    totals: dict[str, list[float]] = {}
    for _ in range(rounds):
        for kind, _name, image in images():
            rgb = np.asarray(image)
            width, height = image.size

            def baseline(rgb: np.ndarray = rgb, width: int = width, height: int = height) -> None:
                build_evidence(ocr.read(rgb), width, height, min_confidence=0.6)

            def ours(rgb: np.ndarray = rgb, width: int = width, height: int = height) -> None:
                build_evidence(
                    ocr.read(rgb), width, height, min_confidence=0.6, layout=layout.detect(rgb)
                )

            base_wall, base_cpu = timed(baseline)
            ours_wall, ours_cpu = timed(ours)
            for key in (kind, "all"):
                row = totals.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
                row[0] += ours_wall
                row[1] += base_wall
                row[2] += ours_cpu
                row[3] += base_cpu
                row[4] += 1
    for key, (ours_wall, base_wall, ours_cpu, base_cpu, n) in totals.items():
        print(
            f"structure[{key}]: ours={ours_wall / n:.3f}s/image baseline(ocr)="
            f"{base_wall / n:.3f}s/image ratio={ours_wall / base_wall:.2f} "
            f"cpu ours={ours_cpu / n:.3f}s baseline={base_cpu / n:.3f}s "
            f"ratio={ours_cpu / base_cpu:.2f} (n={int(n)}, budget {BUDGET})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1)
    main(parser.parse_args().rounds)
