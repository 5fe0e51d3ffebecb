"""Safe image intake: untrusted bytes in, one oriented RGB image (or an ``ImageError``) out.

Every image a user or a tool hands us passes through :func:`decode_image` before any route
sees it. The checks run cheapest first — byte count, then the format Pillow identifies from
the header, then the pixel count the header declares, then the *decoded size* (width ×
height × the bytes per pixel Pillow stores for the mode: 1 for L/P, 2 for 16-bit gray, 4
for RGB(A) and the rest) against ``image.max_decoded_bytes`` — and only then are pixels
decoded (``Image.open`` reads only the header). A 100 kB file that claims 100000×100000
pixels, or a 150 kB PNG that would inflate to 40 MP of RGBA, is refused in microseconds
with ``IMAGE_DECOMPRESSION_BOMB`` (details: width, height, mode, decoded_bytes, budget).
Every Pillow failure becomes an :class:`ImageError` with a stable code; nothing else
escapes.

Decisions a newcomer would otherwise undo:

* **Pillow's globals are never touched.** ``Image.MAX_IMAGE_PIXELS`` and
  ``ImageFile.LOAD_TRUNCATED_IMAGES`` are process-wide and other code relies on them. Our
  own header check enforces ``max_pixels``; Pillow's decompression-bomb warning is turned
  into an error only inside ``warnings.catch_warnings()``. So the effective cap is the
  smaller of ``max_pixels`` and Pillow's ``MAX_IMAGE_PIXELS`` (89,478,485 by default).
  Truncated files are refused (``load()`` sees truncation; JPEG ``verify()`` does not).
* **Decoding runs in the caller's worker thread, under a budget, not in a process.** What
  one decode may hold is bounded before it starts: the decoded frame (≤ the budget) plus
  its RGB copy (4 bytes a pixel, ≤ ``max_pixels``); 16-bit gray is shifted down in its own
  2-byte samples, never widened to int64 (a 77 kB 16-bit PNG of 6300×6300 took 920 MB RSS
  before, 200 MB now). What all decodes hold together is bounded by
  :data:`LARGE_DECODE_SLOTS`: a decode over :data:`LARGE_DECODE_BYTES` waits for a slot
  (``IMAGE_DECODE_BUSY`` after :data:`DECODE_SLOT_WAIT` s); small ones never wait, so the
  fast path is unchanged. A process worker under ``RLIMIT_AS`` was measured and rejected:
  the pixels must come back (routes, tiling, the pixel hash), so every image crosses a
  pipe — warm, 231 ms against 138 ms in a thread for a 1080p JPEG and 895 ms against
  255 ms for 12 MP, plus ~0.8–1 s to start a worker — and the parent holds a second copy.
* **The pixel hash, not the file hash, identifies what a route saw.** ``pixel_sha256`` is
  taken over the normalized RGB pixels (EXIF orientation applied, alpha flattened on
  white), so the same picture saved as PNG and as BMP shares evidence.
  :meth:`DecodedImage.route_payload` sends a remote model the original bytes only when
  they already show exactly those pixels; otherwise a lossless PNG of them, so a route
  never sees a sideways photo or a transparent background we did not see.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import struct
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepseek_eyes.errors import ImageError
from deepseek_eyes.settings import ImageSettings

if TYPE_CHECKING:
    # Pillow is imported where pixels are decoded, not here: a cached `see` reads the file
    # and its hash and never decodes, and Pillow is a tenth of that command's start-up.
    from PIL import Image

__all__ = [
    "DecodedImage",
    "ImageLimits",
    "decode_image",
    "decoded_bytes",
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
    #: Decoded size (width × height × stored bytes per pixel) allowed, checked before load.
    max_decoded_bytes: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.max_pixels <= 0 or self.max_decoded_bytes <= 0:
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
            max_decoded_bytes=settings.max_decoded_bytes,
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
    from PIL import Image  # see the TYPE_CHECKING import

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
    from PIL import Image, UnidentifiedImageError

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
        decoded = decoded_bytes(width, height, opened.mode)
        if decoded > limits.max_decoded_bytes:
            raise ImageError(
                f"The image would decode to {decoded:,} bytes ({width}×{height} {opened.mode}), "
                f"over the budget of {limits.max_decoded_bytes:,} bytes.",
                code="IMAGE_DECOMPRESSION_BOMB",
                details={"width": width, "height": height, "mode": opened.mode,
                         "decoded_bytes": decoded, "budget": limits.max_decoded_bytes},
            )
        # Read before load(): the tile list (the raw layout, e.g. 16-bit PNG) is gone after.
        rawmodes = {tile.args for tile in opened.tile} if opened.format == "PNG" else set()
        with _decode_slot(decoded):
            opened.load()  # GIF, WebP, APNG, MPO: the first frame only
            return _finish(opened, data, sha256, fmt, rawmodes)


def _finish(opened: Image.Image, data: bytes, sha256: str, fmt: str,
            rawmodes: set[Any]) -> DecodedImage:
    """Orientation, RGB pixels and their digest of a loaded image (inside its slot, since
    its copies are the rest of the decode's memory)."""
    from PIL import ExifTags, ImageOps

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
    from PIL import Image

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
    from PIL import Image

    # The samples as stored (2 bytes each for I;16), not widened to int64 first: this path
    # is the one whose temporaries are several times the decoded image.
    values = np.asarray(image)
    shifted = values >> 8
    np.clip(shifted, 0, 255, out=shifted)
    gray = Image.fromarray(shifted.astype(np.uint8))
    del shifted
    key = image.info.get("transparency")
    if not isinstance(key, int):
        return gray
    alpha = Image.fromarray(np.where(values == key, 0, 255).astype(np.uint8))
    gray.putalpha(alpha)
    return gray


#: Bytes per pixel Pillow stores for a mode (every mode not named takes 4: RGB is RGBX).
_STORED_BYTES: Mapping[str, int] = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2,
                                    "I;16B": 2, "I;16N": 2}
#: A decode of more than this many bytes takes one of the few large-decode slots.
LARGE_DECODE_BYTES = 16 * 1024 * 1024
LARGE_DECODE_SLOTS = 2
#: How long a large decode waits for a slot before it is refused (IMAGE_DECODE_BUSY).
DECODE_SLOT_WAIT = 60.0
_LARGE_DECODES = threading.BoundedSemaphore(LARGE_DECODE_SLOTS)


def decoded_bytes(width: int, height: int, mode: str) -> int:
    """What Pillow allocates to hold the decoded pixels of one frame of this mode."""
    return width * height * _STORED_BYTES.get(mode, 4)


@contextlib.contextmanager
def _decode_slot(decoded: int) -> Iterator[None]:
    """Small decodes run at once; a large one holds one of :data:`LARGE_DECODE_SLOTS`, so
    the memory all concurrent decodes hold stays bounded however many requests arrive."""
    if decoded <= LARGE_DECODE_BYTES:
        yield
        return
    if not _LARGE_DECODES.acquire(timeout=DECODE_SLOT_WAIT):
        raise ImageError(
            f"{LARGE_DECODE_SLOTS} large images are being decoded; this one waited "
            f"{DECODE_SLOT_WAIT:.0f} s and is refused.",
            code="IMAGE_DECODE_BUSY",
            details={"decoded_bytes": decoded, "slots": LARGE_DECODE_SLOTS},
        )
    try:
        yield
    finally:
        _LARGE_DECODES.release()


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
