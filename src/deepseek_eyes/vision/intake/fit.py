"""An admitted image fitted to what a seeing model accepts, before its pixels are sent.

DeepSeek documents its limits (32 MiB an image, 8,192 px a side, 4,096 once a request holds
15 images or more) and formats (JPEG, PNG, GIF, WebP); our intake admits more (BMP, 40 MP).
So an image about to travel as pixels is sent as stored when it fits, and otherwise
shrunk (long side to the limit, aspect kept) and re-encoded: PNG, or JPEG when the
original was one, lower JPEG qualities (then fewer pixels) only if the bytes still do not
fit: a request's images share its byte limit. The stored
original, its SHA-256 and its evidence are untouched: this is the copy one request
carries.

Only admitted images come here (decoded safely once already), so the decode is trusted to
be bounded; it runs in a worker thread.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

import anyio

__all__ = [
    "MIN_CROP_PX", "SENDABLE_TYPES", "Region", "check_region", "crop_box", "crop_png",
    "fit_for_model", "fit_sync",
]

#: Media types a seeing DeepSeek model takes as they are.
SENDABLE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_JPEG_QUALITIES = (90, 80, 65, 50)
_SMALLEST_SIDE = 256


def _fits(data: bytes, image: Mapping[str, Any], max_side: int | None,
          max_bytes: int | None) -> bool:
    if str(image.get("media_type")) not in SENDABLE_TYPES:
        return False
    if max_side is not None and max(int(image["width"]), int(image["height"])) > max_side:
        return False
    return max_bytes is None or len(data) <= max_bytes


def fit_sync(data: bytes, image: Mapping[str, Any], *, max_side: int | None,
             max_bytes: int | None) -> bytes:
    """``data`` as is when it fits; else shrunk and re-encoded (blocking)."""
    if _fits(data, image, max_side, max_bytes):
        return data
    from PIL import Image, ImageOps  # only when pixels change: a text turn never loads Pillow

    with Image.open(io.BytesIO(data)) as opened:
        picture = ImageOps.exif_transpose(opened)
        picture = picture.convert("RGBA" if "A" in picture.getbands() else "RGB")
    if max_side is not None and max(picture.size) > max_side:
        picture.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    jpeg = str(image.get("media_type")) == "image/jpeg"
    if not jpeg:
        out = io.BytesIO()
        picture.save(out, format="PNG", optimize=False)
        if max_bytes is None or out.tell() <= max_bytes:
            return out.getvalue()
    flat = picture.convert("RGB")
    encoded = b""
    while True:
        for quality in _JPEG_QUALITIES:
            out = io.BytesIO()
            flat.save(out, format="JPEG", quality=quality)
            encoded = out.getvalue()
            if max_bytes is None or len(encoded) <= max_bytes:
                return encoded
        if max(flat.size) <= _SMALLEST_SIDE:
            return encoded  # nothing smaller is worth sending; the budget was tiny
        # Still too large at the lowest quality: fewer pixels, then the qualities again.
        flat = flat.resize((max(1, flat.width * 3 // 4), max(1, flat.height * 3 // 4)),
                           Image.Resampling.LANCZOS)


async def fit_for_model(data: bytes, image: Mapping[str, Any], *, max_side: int | None,
                        max_bytes: int | None) -> bytes:
    """:func:`fit_sync` off the event loop when work is needed."""
    if _fits(data, image, max_side, max_bytes):
        return data
    return await anyio.to_thread.run_sync(
        lambda: fit_sync(data, image, max_side=max_side, max_bytes=max_bytes))


Region = tuple[float, float, float, float]


def check_region(value: Any) -> Region:
    """A zoom region as a caller gave it (``[x, y, w, h]``, fractions of the image from its
    top-left, as evidence boxes are), checked.

    Raises:
        ValueError: the sentence to show the caller, when it is not four finite numbers
            with x and y in [0, 1) and w and h in (0, 1].
    """
    if (not isinstance(value, list | tuple) or len(value) != 4
            or not all(isinstance(v, int | float) and not isinstance(v, bool)
                       and math.isfinite(v) for v in value)):
        raise ValueError("region must be [x, y, w, h]: four numbers from 0 to 1")
    x, y, w, h = (float(v) for v in value)
    if not (0 <= x < 1 and 0 <= y < 1 and 0 < w <= 1 and 0 < h <= 1):
        raise ValueError(
            "region must be [x, y, w, h] with x and y in [0, 1) and w and h in (0, 1]")
    return x, y, w, h


#: A crop smaller than this many pixels on a side is grown around its centre.
MIN_CROP_PX = 16


def crop_box(width: int, height: int, region: Region) -> tuple[int, int, int, int]:
    """The pixel box (left, top, right, bottom) of a normalized ``[x, y, w, h]`` region
    (the evidence schema's box convention), clipped to the image and at least
    :data:`MIN_CROP_PX` a side where the image allows."""
    x, y, w, h = region
    left, top = max(0.0, x) * width, max(0.0, y) * height
    right, bottom = min(1.0, x + w) * width, min(1.0, y + h) * height
    box = [round(left), round(top), round(right), round(bottom)]
    for lo, hi, size in ((0, 2, width), (1, 3, height)):
        short = MIN_CROP_PX - (box[hi] - box[lo])
        if short > 0:
            box[lo] = max(0, box[lo] - (short + 1) // 2)
            box[hi] = min(size, box[lo] + MIN_CROP_PX)
            box[lo] = max(0, box[hi] - MIN_CROP_PX)
    return box[0], box[1], box[2], box[3]


def crop_png(data: bytes, region: Region) -> bytes:
    """The region of an admitted image at full resolution, as a lossless PNG (blocking)."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as opened:
        picture = ImageOps.exif_transpose(opened)
        box = crop_box(picture.width, picture.height, region)
        cropped = picture.crop(box)
        cropped = cropped.convert("RGBA" if "A" in cropped.getbands() else "RGB")
    out = io.BytesIO()
    cropped.save(out, format="PNG")
    return out.getvalue()
