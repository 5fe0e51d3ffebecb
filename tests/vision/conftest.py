"""Fixtures of the vision tests: the Chromium-drawn structure corpus, rendered and read by
the real OCR engine once per session (both the table and the interface-element tests score
against it)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any

import pytest

from vision.structure_pages import Rendered, chromium_path, render_pages


@dataclass
class StructurePage:
    rendered: Rendered
    rgb: Any  # numpy H×W×3 uint8
    segments: list[Any]  # deepseek_eyes.vision.routes.layout.Segment

    @property
    def size(self) -> tuple[int, int]:
        return int(self.rgb.shape[1]), int(self.rgb.shape[0])

    def recorded_engine(self) -> Any:
        """An engine for ``LocalRoute`` that answers with what the real engine read on this
        page: the route's own code runs whole, without a second OCR pass of several
        seconds on a busy CI machine (the CI budget). It checks it is given this page."""
        import numpy as np

        from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine

        page = self

        class Recorded(LocalOcrEngine):
            def read(self, rgb: Any, *, full_resolution: bool = True) -> list[Any]:
                assert np.array_equal(rgb, page.rgb)
                return list(page.segments)

        return Recorded()


@pytest.fixture(scope="session")
def structure_corpus() -> dict[str, StructurePage]:
    """Every structure page: its screenshot's pixels and what the local OCR read on it."""
    executable = chromium_path()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        executable = None
    if executable is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and Chromium or playwright is missing")
        pytest.skip("Chromium or playwright is not installed")
    import numpy as np
    from PIL import Image

    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine

    engine = LocalOcrEngine.shared()
    pages: dict[str, StructurePage] = {}
    for name, rendered in render_pages(executable).items():
        rgb = np.asarray(Image.open(io.BytesIO(rendered.png)).convert("RGB"))
        pages[name] = StructurePage(rendered, rgb, engine.read(rgb))
    return pages
