"""Screenshots of a page: lossless PNG, identified by the SHA-256 of its bytes and of its
pixels (:mod:`deepseek_eyes.toolkit.screenshots`; alpha is flattened on white first, as the
vision intake does), and by the state and ref they show.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image

from deepseek_eyes.toolkit.screenshots import PngShot, pixel_sha256_rgb

__all__ = ["MAX_SCREENSHOT_PIXELS", "Screenshot", "identify_png", "pixel_sha256"]

#: Pixels of one capture (a full-page screenshot of a long document is cut at this height).
MAX_SCREENSHOT_PIXELS = 40_000_000
_STRIP_PIXELS = 1 << 20


def pixel_sha256(image: Image.Image) -> str:
    """SHA-256 of ``b"RGB:%dx%d:"`` and the image's RGB bytes (alpha flattened on white)."""
    if image.mode != "RGB" or "transparency" in image.info:
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    width, height = image.size
    rows = max(1, _STRIP_PIXELS // max(1, width))
    return pixel_sha256_rgb(width, height, (
        image.crop((0, top, width, min(height, top + rows))).tobytes()
        for top in range(0, height, rows)))


def identify_png(png: bytes) -> tuple[str, str, int, int]:
    """(sha256, pixel_sha256, width, height) of PNG bytes (blocking: run it in a thread)."""
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        width, height = image.size
        return hashlib.sha256(png).hexdigest(), pixel_sha256(image), int(width), int(height)


@dataclass(frozen=True)
class Screenshot(PngShot):
    state_id: str | None
    ref: str | None = None
    full_page: bool = False
    stored: bool = False  # its bytes are in the blob store under sha256

    def placement(self) -> dict[str, Any]:
        return {"state_id": self.state_id, "ref": self.ref, "full_page": self.full_page,
                "stored": self.stored}
