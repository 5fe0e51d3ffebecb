"""What a tool's ``image`` argument names: a stored image, a ``data:`` URL, or a path.

Tried in that order, each by its unambiguous shape: 64 hex digits (optionally after
``sha256:``) are a stored image; text starting ``data:`` is a data URL; anything else is a
path, checked against the served roots (:mod:`.roots`). A data URL is refused by its
encoded length before a byte of it is decoded.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from deepseek_eyes.errors import ImageError, VisionError

__all__ = ["ImageRef", "names_a_path", "parse_image_ref"]

_SHA256 = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")
_DATA_URL = re.compile(r"data:(image/[A-Za-z0-9.+-]+)((?:;[A-Za-z0-9=._-]+)*);base64,(.*)",
                       re.DOTALL)
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class ImageRef:
    """Exactly one of ``sha256`` (lower-case hex), ``data`` (bytes) or ``path`` is set."""

    sha256: str | None = None
    data: bytes | None = None
    path: str | None = None


def names_a_path(text: str) -> bool:
    """Whether ``text`` would be taken as a path, told by its shape alone (nothing decoded)."""
    stripped = text.strip()
    return not (_SHA256.fullmatch(stripped) or stripped[:5].lower() == "data:")


def parse_image_ref(text: str, max_bytes: int) -> ImageRef:
    """Raises:
        VisionError: ``VISION_DATA_URL_INVALID``, ``VISION_IMAGE_REF_INVALID``.
        ImageError: ``IMAGE_TOO_LARGE`` for a data URL over ``max_bytes``.
    """
    stripped = text.strip()
    digest = _SHA256.fullmatch(stripped)
    if digest is not None:
        return ImageRef(sha256=digest.group(1).lower())
    if stripped[:5].lower() == "data:":
        return ImageRef(data=_data_url(stripped, max_bytes))
    if not stripped or len(stripped) > MAX_PATH_CHARS or "\x00" in stripped:
        raise VisionError(
            "image must be a path inside a served root, a data:image/…;base64 URL or the "
            "sha256 of a stored image",
            code="VISION_IMAGE_REF_INVALID",
        )
    return ImageRef(path=stripped)


def _data_url(text: str, max_bytes: int) -> bytes:
    match = _DATA_URL.fullmatch(text)
    if match is None:
        raise VisionError(
            "a data URL must read data:image/<type>;base64,<data>",
            code="VISION_DATA_URL_INVALID",
        )
    payload = "".join(match.group(3).split())
    if len(payload) // 4 * 3 > max_bytes + 2:
        raise ImageError(
            f"the data URL holds over {max_bytes:,} bytes",
            code="IMAGE_TOO_LARGE", details={"limit": max_bytes},
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise VisionError("the data URL is not valid base64",
                          code="VISION_DATA_URL_INVALID") from None
    if len(data) > max_bytes:
        raise ImageError(f"the data URL holds {len(data):,} bytes, over {max_bytes:,}",
                         code="IMAGE_TOO_LARGE", details={"limit": max_bytes})
    return data
