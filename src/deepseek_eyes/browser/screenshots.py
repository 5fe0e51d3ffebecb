"""Screenshots: lossless PNG, identified by the SHA-256 of its bytes and of its pixels.

The pixel hash is the one the vision intake takes (``vision.intake.pixel_digest``:
SHA-256 over ``b"RGB:%dx%d:"`` and the packed RGB bytes, alpha flattened on white), written
out here because a capability never imports another; a test keeps the two equal. Two
screenshots of an unchanged page have the same pixel hash even if the encoder's bytes differ,
which is what "the screenshot changed" should mean.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image

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
    digest = hashlib.sha256(b"RGB:%dx%d:" % (width, height))
    rows = max(1, _STRIP_PIXELS // max(1, width))
    for top in range(0, height, rows):
        digest.update(image.crop((0, top, width, min(height, top + rows))).tobytes())
    return digest.hexdigest()


def identify_png(png: bytes) -> tuple[str, str, int, int]:
    """(sha256, pixel_sha256, width, height) of PNG bytes (blocking: run it in a thread)."""
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        width, height = image.size
        return hashlib.sha256(png).hexdigest(), pixel_sha256(image), int(width), int(height)


@dataclass(frozen=True)
class Screenshot:
    png: bytes
    sha256: str
    pixel_sha256: str
    width: int
    height: int
    state_id: str | None
    ref: str | None = None
    full_page: bool = False
    stored: bool = False  # its bytes are in the blob store under sha256

    def to_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "pixel_sha256": self.pixel_sha256,
                "width": self.width, "height": self.height, "bytes": len(self.png),
                "state_id": self.state_id, "ref": self.ref, "full_page": self.full_page,
                "stored": self.stored, "media_type": "image/png"}
