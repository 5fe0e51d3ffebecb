"""What tables and interface elements cost on the local route, next to OCR alone.

    .venv/bin/python bench/structure_tables.py [--rounds N]

Images: the OCR corpus (``bench/corpus``: receipts, a letter, an invoice, screens, a
dashboard) and the structure pages of ``tests/vision/structure_pages.py`` drawn by Chromium
(skipped when it is not installed). Baseline: the local OCR engine's read of the image.
Ours: that read plus what the route now adds, ``find_tables`` and ``find_controls`` (with
their evidence writers), on the same pixels and segments. Each is the best of ``--rounds``
runs, so a busy machine's stalls do not count; the ratio is ours / baseline per image
(1.00 is free), and the last line totals them. It also prints what was found, so a
regression in speed and one in finding show together.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import numpy as np
from PIL import Image

from deepseek_eyes.vision.routes.controls import add_controls, find_controls
from deepseek_eyes.vision.routes.layout import build_evidence
from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine
from deepseek_eyes.vision.routes.tables import add_tables, find_tables


def images() -> list[tuple[str, np.ndarray[Any, Any]]]:
    out = [
        (path.name, np.asarray(Image.open(path).convert("RGB")))
        for path in sorted((HERE / "corpus").glob("*.png"))
    ]
    from vision.structure_pages import chromium_path, render_pages

    executable = chromium_path()
    if executable is None:
        print("chromium not installed: structure pages skipped")
        return out
    for name, rendered in render_pages(executable).items():
        out.append((name, np.asarray(Image.open(io.BytesIO(rendered.png)).convert("RGB"))))
    return out


def best(rounds: int, run: Callable[[], Any]) -> tuple[float, Any]:
    times = []
    value: Any = None
    for _ in range(rounds):
        started = time.perf_counter()
        value = run()
        times.append(time.perf_counter() - started)
    return min(times), value


def structure(rgb: np.ndarray[Any, Any], segments: Any) -> tuple[int, int]:
    """What the local route adds after OCR: tables, then interface elements, written into
    the evidence. The evidence itself (``build_evidence``) is built by both sides of the
    comparison in the route, so it is timed here too, which only makes ours look slower."""
    height, width = rgb.shape[:2]
    evidence = build_evidence(segments, width, height, min_confidence=0.5)
    tables = find_tables(rgb, segments)
    add_tables(evidence, tables, width, height)
    controls = find_controls(rgb, segments, [t.box for t in tables])
    add_controls(evidence, controls, width, height)
    return len(tables), len(controls)


def main(rounds: int) -> None:
    engine = LocalOcrEngine.shared()
    engine.read(np.full((32, 32, 3), 255, dtype=np.uint8))  # the models load outside timing
    total_ocr = total_structure = 0.0
    for name, rgb in images():
        height, width = rgb.shape[:2]
        ocr_s, segments = best(rounds, lambda rgb=rgb: engine.read(rgb))

        structure_s, (tables, controls) = best(
            rounds * 3, lambda rgb=rgb, segments=segments: structure(rgb, segments))
        total_ocr += ocr_s
        total_structure += structure_s
        print(f"structure[{name} {width}x{height}]: ours={(ocr_s + structure_s) * 1000:.0f}ms "
              f"baseline={ocr_s * 1000:.0f}ms ratio={(ocr_s + structure_s) / ocr_s:.3f} "
              f"(tables+controls {structure_s * 1000:.1f}ms: {tables} table(s), "
              f"{controls} element(s))")
    print(f"structure[all]: ours={(total_ocr + total_structure) * 1000:.0f}ms "
          f"baseline={total_ocr * 1000:.0f}ms "
          f"ratio={(total_ocr + total_structure) / total_ocr:.3f} "
          f"(tables+controls {total_structure * 1000:.0f}ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    main(parser.parse_args().rounds)
