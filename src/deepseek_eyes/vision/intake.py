"""Safe image intake: untrusted bytes in, one oriented RGB image (or an ``ImageError``) out.

Every image a user or a tool hands us passes through :func:`decode_image` before any route
sees it. The checks run cheapest first — byte count, then the format Pillow identifies from
the header, then the pixel count the header declares — and only then are pixels decoded, so
memory stays bounded by ``max_pixels`` and a 100 kB file that claims 100000×100000 pixels
is refused in microseconds. Every Pillow failure becomes an :class:`ImageError` with a
stable code; nothing else escapes.

Decisions a newcomer would otherwise undo:

* **Pillow's globals are never touched.** ``Image.MAX_IMAGE_PIXELS`` and
  ``ImageFile.LOAD_TRUNCATED_IMAGES`` are process-wide and other code relies on them. Our
  own header check enforces ``max_pixels``; Pillow's decompression-bomb warning is turned
  into an error only inside ``warnings.catch_warnings()``. So the effective cap is the
  smaller of ``max_pixels`` and Pillow's ``MAX_IMAGE_PIXELS`` (89,478,485 by default).
  Truncated files are refused (``load()`` sees truncation; JPEG ``verify()`` does not).
* **The pixel hash, not the file hash, identifies what a route saw.** ``pixel_sha256`` is
  taken over the normalized RGB pixels (EXIF orientation applied, alpha flattened on
  white), so the same picture saved as PNG and as BMP shares evidence.
  :meth:`DecodedImage.route_payload` sends a remote model the original bytes only when
  they already show exactly those pixels; otherwise a lossless PNG of them, so a route
  never sees a sideways photo or a transparent background we did not see.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import struct
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from deepseek_eyes.errors import ImageError
from deepseek_eyes.settings import ImageSettings

__all__ = [
    "DecodedImage",
    "ImageLimits",
    "decode_image",
    "pixel_digest",
    "read_image_file",
]

#: Pillow format name → media type, for every format intake can accept.
MEDIA_TYPES: Mapping[str, str] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
    "BMP": "image/bmp",
}
_LABELS = {"PNG": "PNG", "JPEG": "JPEG", "WEBP": "WebP", "GIF": "GIF", "BMP": "BMP"}
# Formats a remote model decodes to the same pixels Pillow does (GIF and BMP are not
# universally accepted by multimodal APIs, so they always travel as PNG).
_PASSTHROUGH_FORMATS = frozenset({"PNG", "JPEG", "WEBP"})
_WHITE = (255, 255, 255)
_HEX = re.compile(r"^[0-9a-f]{64}$")
# Modes that carry an alpha channel of their own (``transparency`` in info is the other way).
_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_WIDE_GRAY_MODES = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N"})
_HASH_STRIP_PIXELS = 1 << 20  # hash in strips so digesting never copies the whole image
_REASON_MAX = 200


@dataclass(frozen=True)
class ImageLimits:
    """What intake accepts; see :class:`~deepseek_eyes.settings.ImageSettings`."""

    max_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    formats: frozenset[str] = frozenset({"PNG", "JPEG", "WEBP", "GIF", "BMP"})

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.max_pixels <= 0:
            raise ValueError("image limits must be positive")
        unknown = set(self.formats) - MEDIA_TYPES.keys()
        if unknown:
            raise ValueError(f"intake cannot accept image formats {sorted(unknown)}")

    @classmethod
    def from_settings(cls, settings: ImageSettings) -> ImageLimits:
        return cls(
            max_bytes=settings.max_bytes,
            max_pixels=settings.max_pixels,
            formats=frozenset(settings.formats),
        )


class _PayloadCache:
    """The lazily built route payload; a mutable holder inside the frozen dataclass."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: tuple[bytes, str] | None = None


@dataclass(frozen=True)
class DecodedImage:
    """An admitted image.

    Equality and hashing use the identifying fields (both hashes, size, format); the
    pixels and the original bytes are carried, not compared.
    """

    sha256: str
    pixel_sha256: str
    width: int
    height: int
    format: str
    media_type: str
    size: int
    pixels: Image.Image = field(compare=False)
    original: bytes = field(repr=False, compare=False)
    #: True when ``original`` already shows exactly ``pixels`` and may be sent as is.
    original_matches_pixels: bool = field(default=False, repr=False, compare=False)
    _payload: _PayloadCache = field(
        default_factory=_PayloadCache, init=False, repr=False, compare=False
    )

    def route_payload(self) -> tuple[bytes, str]:
        """The bytes and media type to send to a remote model.

        The original bytes when they show exactly :attr:`pixels`; otherwise a lossless PNG
        of :attr:`pixels`, encoded on first use and kept.
        """
        if self.original_matches_pixels:
            return self.original, self.media_type
        with self._payload.lock:
            if self._payload.value is None:
                buffer = io.BytesIO()
                self.pixels.save(buffer, format="PNG")
                self._payload.value = (buffer.getvalue(), "image/png")
            return self._payload.value


def pixel_digest(image: Image.Image) -> str:
    """SHA-256 over ``b"RGB:%dx%d:" % (w, h)`` and the image's packed RGB bytes.

    A non-RGB image is first normalized the way :func:`decode_image` normalizes pixels
    (alpha flattened on white), so both agree on any image.
    """
    rgb = image if image.mode == "RGB" and "transparency" not in image.info else _to_rgb(image)
    width, height = rgb.size
    digest = hashlib.sha256(b"RGB:%dx%d:" % (width, height))
    rows = max(1, _HASH_STRIP_PIXELS // max(1, width))
    for top in range(0, height, rows):
        digest.update(rgb.crop((0, top, width, min(height, top + rows))).tobytes())
    return digest.hexdigest()


def decode_image(
    data: bytes, limits: ImageLimits = ImageLimits(), *, sha256: str | None = None
) -> DecodedImage:
    """Decode untrusted image bytes into an oriented RGB image.

    ``sha256`` is the hex SHA-256 of ``data`` when the caller already has it.

    Raises:
        ImageError: ``IMAGE_EMPTY``, ``IMAGE_TOO_LARGE``, ``IMAGE_UNSUPPORTED_FORMAT``,
            ``IMAGE_DECOMPRESSION_BOMB`` or ``IMAGE_TRUNCATED``; never anything else for
            any ``data``.
    """
    size = len(data)
    if size == 0:
        raise ImageError("The image has no bytes.", code="IMAGE_EMPTY", details={"size": 0})
    if size > limits.max_bytes:
        raise ImageError(
            f"The image is {size:,} bytes, over the limit of {limits.max_bytes:,} bytes.",
            code="IMAGE_TOO_LARGE",
            details={"size": size, "limit": limits.max_bytes},
        )
    if sha256 is None:
        sha256 = hashlib.sha256(data).hexdigest()
    elif not _HEX.match(sha256):
        raise ValueError("sha256 must be 64 lower-case hex digits")  # a caller's bug

    fmt = _sniff(data)
    with warnings.catch_warnings():
        # Warnings about untrusted input are our errors or nothing: never leak them.
        # catch_warnings() is process-wide before Python 3.14, so a concurrent thread may
        # briefly see other filters; the header check in _decode() does not depend on them.
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            return _decode(data, sha256, limits)
        except ImageError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            limit = min(limits.max_pixels, Image.MAX_IMAGE_PIXELS or limits.max_pixels)
            raise ImageError(
                f"The image declares more pixels than the limit of {limit:,}.",
                code="IMAGE_DECOMPRESSION_BOMB",
                details={"limit": limit, "decoder_limit": Image.MAX_IMAGE_PIXELS},
            ) from exc
        except (OSError, SyntaxError, ValueError, struct.error, EOFError) as exc:
            raise _truncated(fmt, exc) from exc
        except Exception as exc:
            # Fuzzed files have made Pillow raise IndexError, KeyError, TypeError and
            # ZeroDivisionError; a broken file must still surface as an ImageError.
            raise _truncated(fmt, exc) from exc


def read_image_file(path: Path, limits: ImageLimits = ImageLimits()) -> bytes:
    """Read an image file, never more than ``limits.max_bytes + 1`` bytes of it.

    Only regular files are read: a FIFO or a device could block or never end.

    Raises:
        ImageError: ``IMAGE_TOO_LARGE`` over the byte limit, ``IMAGE_UNREADABLE`` when the
            path is missing, a directory, not a regular file, or unreadable.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _unreadable(path, exc.strerror or type(exc).__name__) from exc
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
                raise _unreadable(path, kind)
            data = handle.read(limits.max_bytes + 1)
    except OSError as exc:
        raise _unreadable(path, exc.strerror or type(exc).__name__) from exc
    if len(data) > limits.max_bytes:
        size = max(info.st_size, len(data))
        raise ImageError(
            f"The image file {path} is {size:,} bytes, over the limit of "
            f"{limits.max_bytes:,} bytes.",
            code="IMAGE_TOO_LARGE",
            details={"path": str(path), "size": size, "limit": limits.max_bytes},
        )
    return data


# --------------------------------------------------------------------------- internals


def _decode(data: bytes, sha256: str, limits: ImageLimits) -> DecodedImage:
    try:
        opened = Image.open(io.BytesIO(data), formats=sorted(limits.formats))
    except UnidentifiedImageError:
        raise _unidentified(data, limits) from None
    with opened:
        fmt = "JPEG" if opened.format == "MPO" else (opened.format or "")
        if fmt not in limits.formats:
            raise _unsupported(fmt, limits)
        width, height = opened.size
        if width * height > limits.max_pixels:
            raise ImageError(
                f"The image declares {width}×{height} pixels ({width * height:,}), over the "
                f"limit of {limits.max_pixels:,}.",
                code="IMAGE_DECOMPRESSION_BOMB",
                details={
                    "width": width,
                    "height": height,
                    "pixels": width * height,
                    "limit": limits.max_pixels,
                },
            )
        # Read before load(): the tile list (the raw layout, e.g. 16-bit PNG) is gone after.
        rawmodes = {tile.args for tile in opened.tile} if opened.format == "PNG" else set()
        opened.load()  # GIF, WebP, APNG, MPO: the first frame only
        orientation = opened.getexif().get(ExifTags.Base.Orientation, 1)
        rotated = orientation in range(2, 9)
        if rotated:
            ImageOps.exif_transpose(opened, in_place=True)
        exact = (
            opened.format in _PASSTHROUGH_FORMATS
            and not rotated
            and opened.mode in ("RGB", "L")
            and "transparency" not in opened.info
            and not getattr(opened, "is_animated", False)
            # 16-bit PNG samples: other decoders may round them to 8 bits differently.
            and rawmodes <= {opened.mode}
        )
        pixels = _to_rgb(opened)
    return DecodedImage(
        sha256=sha256,
        pixel_sha256=pixel_digest(pixels),
        width=pixels.width,
        height=pixels.height,
        format=fmt,
        media_type=MEDIA_TYPES[fmt],
        size=len(data),
        pixels=pixels,
        original=data,
        original_matches_pixels=exact,
    )


def _to_rgb(image: Image.Image) -> Image.Image:
    """A new RGB image without metadata: wide gray scaled to 8 bits, alpha on white."""
    if image.mode in _WIDE_GRAY_MODES:
        image = _wide_gray_to_8bit(image)
    try:
        if image.mode in _ALPHA_MODES or "transparency" in image.info:
            rgba = image.convert("RGBA")
            rgb = Image.new("RGB", image.size, _WHITE)
            rgb.paste(rgba, mask=rgba)
        else:
            rgb = image.convert("RGB")
    except ValueError as exc:  # Pillow has no conversion for this mode
        raise ImageError(
            f"Images with pixel mode {image.mode} are not supported.",
            code="IMAGE_UNSUPPORTED_FORMAT",
            details={"mode": image.mode},
        ) from exc
    rgb.info = {}  # no ICC profile or EXIF from another mode travels with the pixels
    return rgb


def _wide_gray_to_8bit(image: Image.Image) -> Image.Image:
    """16-bit gray to 8-bit, scaled (v >> 8), keeping a ``transparency`` key as alpha.

    Pillow's own ``convert("L")`` clips values above 255 instead of scaling them, and its
    ``I;16`` → ``RGBA`` conversion compares the clipped value with the key.
    """
    import numpy as np  # only 16-bit gray needs it; a cached `see` never decodes (start-up)

    values = np.asarray(image.convert("I"), dtype=np.int64)
    gray = Image.fromarray(np.clip(values >> 8, 0, 255).astype(np.uint8))
    key = image.info.get("transparency")
    if not isinstance(key, int):
        return gray
    alpha = Image.fromarray(np.where(values == key, 0, 255).astype(np.uint8))
    gray.putalpha(alpha)
    return gray


_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"II+\x00", "TIFF"),
    (b"%PDF-", "PDF"),
    (b"8BPS", "PSD"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"\xff\x0a", "JPEG XL"),
    (b"\x00\x00\x00\x0cJXL ", "JPEG XL"),
)
_FTYP_BRANDS = {
    b"avif": "AVIF",
    b"avis": "AVIF",
    b"heic": "HEIC",
    b"heix": "HEIC",
    b"mif1": "HEIF",
    b"msf1": "HEIF",
}


def _sniff(data: bytes) -> str | None:
    """Name a format from its magic bytes, for messages only (Pillow decides what opens)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if data[4:8] == b"ftyp":
        return _FTYP_BRANDS.get(data[8:12])
    for magic, name in _SIGNATURES:
        if data.startswith(magic):
            return name
    return None


def _accepted(limits: ImageLimits) -> str:
    names = [_LABELS[f] for f in MEDIA_TYPES if f in limits.formats]
    if not names:
        return "no image formats"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _unsupported(fmt: str, limits: ImageLimits) -> ImageError:
    label = _LABELS.get(fmt, fmt)
    return ImageError(
        f"{label} images are not accepted; send {_accepted(limits)}.",
        code="IMAGE_UNSUPPORTED_FORMAT",
        details={"format": fmt, "allowed": sorted(limits.formats)},
    )


def _unidentified(data: bytes, limits: ImageLimits) -> ImageError:
    sniffed = _sniff(data)
    if sniffed in limits.formats:
        # The magic bytes are right but Pillow could not parse the header behind them.
        return ImageError(
            f"The {_LABELS[sniffed]} image's header is truncated or corrupt.",
            code="IMAGE_TRUNCATED",
            details={"format": sniffed, "reason": "header cannot be parsed"},
        )
    if sniffed is not None:
        return _unsupported(sniffed, limits)
    return ImageError(
        f"The data is not an image in an accepted format ({_accepted(limits)}).",
        code="IMAGE_UNSUPPORTED_FORMAT",
        details={"format": None, "allowed": sorted(limits.formats)},
    )


def _truncated(fmt: str | None, exc: BaseException) -> ImageError:
    label = f"{_LABELS.get(fmt, fmt)} " if fmt else ""
    details: dict[str, Any] = {
        "format": fmt,
        "reason": f"{type(exc).__name__}: {exc}"[:_REASON_MAX],
    }
    return ImageError(
        f"The {label}image is truncated or corrupt and cannot be decoded.",
        code="IMAGE_TRUNCATED",
        details=details,
    )


def _unreadable(path: Path, reason: str) -> ImageError:
    return ImageError(
        f"The image file {path} cannot be read: {reason}.",
        code="IMAGE_UNREADABLE",
        details={"path": str(path), "reason": reason},
    )
