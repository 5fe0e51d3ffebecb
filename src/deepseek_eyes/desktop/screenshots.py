"""Screenshots of the desktop: lossless PNG, identified by the SHA-256 of its bytes and of
its decoded pixels, with the origin and scale that map its pixels back to the screen.

The pixel hash is the vision intake's (:mod:`deepseek_eyes.toolkit.screenshots`), computed
here from the captured RGB directly — the capture *is* the decoded pixels,
so "the screenshot changed" compares pixels, never an encoder's bytes. A capture larger than
``desktop.screenshot_max_side`` is scaled down; ``scale`` is PNG pixels per screen pixel.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image

from deepseek_eyes.desktop.model import Capture
from deepseek_eyes.toolkit.screenshots import PngShot, pixel_sha256_rgb

__all__ = ["Screenshot", "encode_capture"]


@dataclass(frozen=True)
class Screenshot(PngShot):
    origin: tuple[int, int]  # the PNG's (0, 0) on the screen
    scale: float  # PNG pixels per screen pixel

    def to_global(self, x: float, y: float) -> tuple[int, int]:
        """A point of the PNG on the screen."""
        return (round(self.origin[0] + x / self.scale), round(self.origin[1] + y / self.scale))

    def to_local(self, x: float, y: float) -> tuple[int, int]:
        """A screen point in the PNG's pixels."""
        return (round((x - self.origin[0]) * self.scale), round((y - self.origin[1]) * self.scale))

    def placement(self) -> dict[str, Any]:
        return {"origin": list(self.origin), "scale": self.scale}


def encode_capture(capture: Capture, max_side: int) -> Screenshot:
    """PNG of a capture, scaled down when larger than ``max_side`` (blocking: a thread)."""
    image = Image.frombytes("RGB", (capture.width, capture.height), capture.rgb)
    scale = 1.0
    longest = max(capture.width, capture.height)
    if longest > max_side:
        scale = max_side / longest
        size = (max(1, round(capture.width * scale)), max(1, round(capture.height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    rgb = image.tobytes()
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    png = out.getvalue()
    return Screenshot(png, hashlib.sha256(png).hexdigest(),
                      pixel_sha256_rgb(image.width, image.height, (rgb,)), image.width,
                      image.height, capture.origin, scale)
