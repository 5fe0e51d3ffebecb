"""4K screenshots with small text, read tiled at full resolution or shrunk by the engine.

    .venv/bin/python bench/ocr_tiles.py [--rounds N]

The images are the tests' synthetic 3840x2160 screens (``tests/vision/screens.py``): a light
screen with sixty lines of 13-px text spread over it, each with a distinct amount, and a dark
terminal with forty long lines of 14-px monospace text at an 18-px pitch packed across both
seams, each ending in a distinct number. Ours: the local OCR engine as it reads
now, a 2x2 grid of unshrunk tiles (``plan_tiles``), seams merged. Baseline: the same engine
with ``full_resolution=False``, the behaviour before grids, where the engine shrinks the
whole screen to a 2,000-px long side. Both are turned into evidence by the layout module and
scored on the lines it emits: *exact* when the drawn line is one OCR line verbatim, and
*amounts* when the line's amount is one of the evidence's quantitative facts. The engine is
loaded once before timing; the two paths alternate in each round so machine load falls on
both alike. Ratio = ours / baseline (for lines, higher is better; for time, lower is).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.vision.routes.layout import build_evidence
from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine
from deepseek_eyes.vision.routes.tiling import plan_tiles
from vision.screens import ScreenLine, screen_4k, terminal_4k

MIN_CONFIDENCE = 0.6  # the local route's default cut


def read(
    engine: LocalOcrEngine, rgb: np.ndarray, lines: list[ScreenLine], full_resolution: bool
) -> tuple[float, int, int, int]:
    """(seconds, exact lines, amounts found, OCR lines emitted) for one read."""
    height, width = rgb.shape[:2]
    started = time.perf_counter()
    segments = engine.read(rgb, full_resolution=full_resolution)
    evidence = build_evidence(segments, width, height, min_confidence=MIN_CONFIDENCE)
    elapsed = time.perf_counter() - started
    texts = {str(entry["text"]) for entry in evidence["ocr"]}  # type: ignore[union-attr]
    facts = {str(fact["text"]) for fact in evidence["quantitative_facts"]}  # type: ignore[union-attr]
    exact = sum(line.text in texts for line in lines)
    amounts = sum(line.amount in facts for line in lines)
    return elapsed, exact, amounts, len(evidence["ocr"])  # type: ignore[arg-type]


def compare(name: str, image: Image.Image, lines: list[ScreenLine], rounds: int) -> None:
    rgb = np.asarray(image.convert("RGB"))
    width, height = image.size
    runs: dict[bool, list[tuple[float, int, int, int]]] = {True: [], False: []}
    for _ in range(rounds):
        for full_resolution in (True, False):
            runs[full_resolution].append(read(ENGINE, rgb, lines, full_resolution))
    tiles = len(plan_tiles(width, height))
    ours, base = runs[True], runs[False]
    n = len(lines)
    exact_o, exact_b = ours[-1][1], base[-1][1]
    amounts_o, amounts_b = ours[-1][2], base[-1][2]
    time_o = statistics.median(r[0] for r in ours)
    time_b = statistics.median(r[0] for r in base)
    print(f"# {name}: {width}x{height}, {n} lines; ours={tiles} tiles, baseline=1 shrunk")
    print(
        f"ocr_tiles[{name}.exact_lines]: ours={exact_o}/{n} baseline={exact_b}/{n} "
        f"ratio={exact_o / max(exact_b, 1):.2f}"
    )
    print(
        f"ocr_tiles[{name}.amounts]: ours={amounts_o}/{n} baseline={amounts_b}/{n} "
        f"ratio={amounts_o / max(amounts_b, 1):.2f}"
    )
    print(
        f"ocr_tiles[{name}.ocr_lines_emitted]: ours={ours[-1][3]} baseline={base[-1][3]} "
        f"ratio={ours[-1][3] / max(base[-1][3], 1):.2f}"
    )
    print(
        f"ocr_tiles[{name}.wall_s]: ours={time_o:.2f} baseline={time_b:.2f} "
        f"ratio={time_o / time_b:.2f} (median of {rounds})"
    )


ENGINE = LocalOcrEngine.shared()


def main(rounds: int) -> None:
    ENGINE.read(np.full((64, 64, 3), 255, np.uint8))  # load the models outside the timing
    compare("screen", *screen_4k(), rounds)
    compare("terminal", *terminal_4k(), rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    main(parser.parse_args().rounds)
