"""A screenshot as the screen capabilities keep it: lossless PNG, known by two hashes.

``sha256`` is of the PNG's bytes (the blob store's key); ``pixel_sha256`` is of its decoded
pixels — SHA-256 over ``b"RGB:%dx%d:"`` and the packed RGB rows, the vision intake's
``pixel_digest`` written out here because a capability never imports another (a test keeps
the two equal). Two captures of an unchanged screen have the same pixel hash even when an
encoder's bytes differ, which is what "the screenshot changed" should mean. Each capability
adds what locates its pixels (a browser state and ref, a desktop origin and scale).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["PngShot", "pixel_sha256_rgb"]


def pixel_sha256_rgb(width: int, height: int, rows: Iterable[bytes]) -> str:
    """The pixel hash of an RGB image given as its packed bytes, in one or more strips."""
    digest = hashlib.sha256(b"RGB:%dx%d:" % (width, height))
    for strip in rows:
        digest.update(strip)
    return digest.hexdigest()


@dataclass(frozen=True)
class PngShot:
    png: bytes
    sha256: str
    pixel_sha256: str
    width: int
    height: int

    def placement(self) -> dict[str, Any]:
        """What a capability adds to the summary (between the size and the media type)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """The summary a report and a result's data keep: hashes and size, never bytes."""
        return {"sha256": self.sha256, "pixel_sha256": self.pixel_sha256,
                "width": self.width, "height": self.height, "bytes": len(self.png),
                **self.placement(), "media_type": "image/png"}
