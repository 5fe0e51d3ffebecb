"""Compare offline OCR engines on the same corpus images: accuracy and time per image.

    .venv/bin/python bench/ocr_engines.py

Engines: ``rapidocr`` 3.x (what the local route uses), ``rapidocr_onnxruntime`` 1.4 and
Debian's ``tesseract --psm 6``; an engine that is not installed is reported as such.
Each engine gets one warm-up call, then every image is timed once per round.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import Score, samples

ROUNDS = 2


def rapidocr3() -> Callable[[Path], str] | None:
    try:
        from rapidocr import RapidOCR
    except ImportError:
        return None
    engine = RapidOCR(params={"Global.log_level": "critical", "Global.use_cls": False})
    return lambda path: "\n".join(engine(str(path)).txts or ())


def rapidocr_onnxruntime() -> Callable[[Path], str] | None:
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return None
    engine = RapidOCR()

    def run(path: Path) -> str:
        result, _ = engine(str(path))
        return "\n".join(item[1] for item in result or [])

    return run


def tesseract() -> Callable[[Path], str] | None:
    exe = shutil.which("tesseract")
    if exe is None:
        return None

    def run(path: Path) -> str:
        done = subprocess.run(
            [exe, str(path), "-", "--psm", "6"], capture_output=True, text=True, check=True
        )
        return done.stdout

    return run


def main() -> None:
    corpus = samples()
    for name, factory in (
        ("rapidocr-3", rapidocr3),
        ("rapidocr-onnxruntime-1.4", rapidocr_onnxruntime),
        ("tesseract-psm6", tesseract),
    ):
        engine = factory()
        if engine is None:
            print(f"{name}: not installed")
            continue
        engine(corpus[0].path)
        score = Score()
        elapsed = 0.0
        misses: list[str] = []
        for _ in range(ROUNDS):
            score = Score()
            misses = []
            for sample in corpus:
                started = time.perf_counter()
                text = engine(sample.path)
                elapsed += time.perf_counter() - started
                misses += [f"{sample.name}: {m}" for m in score.add(sample, text)]
        per_image = elapsed / (ROUNDS * len(corpus))
        print(f"{name}: {score.text()} time={per_image:.3f}s/image")
        for miss in misses:
            print(f"  missed {miss}")


if __name__ == "__main__":
    main()
