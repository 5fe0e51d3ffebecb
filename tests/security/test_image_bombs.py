"""Red team, issue #19 item 8 (images): decompression bombs.

PNG, GIF, WebP and JPEG files a few kilobytes long whose headers declare huge pixel
counts, or a decoded size over ``image.max_decoded_bytes``, are built here and sent
through the real intake — ``decode_image``, and ``vision serve``'s ``see`` as data URLs
and as files in a served root. Each is refused with ``IMAGE_DECOMPRESSION_BOMB`` before a
pixel is decoded: at once, and (measured in a child process of its own) without the
resident set growing. A normal image still decodes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from deepseek_eyes.errors import ImageError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import ImageSettings, Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.intake.decode import ImageLimits, decode_image, decoded_bytes
from deepseek_eyes.vision_server.roots import ServedRoots
from deepseek_eyes.vision_server.service import VisionService
from vision.loopback import LoopbackVisionServer

LIMITS = ImageLimits.from_settings(ImageSettings())
SRC = Path(__file__).resolve().parents[2] / "src"

# -- bombs, built here ------------------------------------------------------------------------


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(
        ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


#: PNG colour types: (type, bit depth) → bytes per pixel of a scanline.
PNG_KINDS = {"RGBA": (6, 8, 4), "RGB": (2, 8, 3), "L16": (0, 16, 2), "L": (0, 8, 1)}


def png_bomb(width: int, height: int, kind: str = "RGBA", *, rows: int | None = 4) -> bytes:
    """A PNG of ``width``×``height`` zero pixels. ``rows``: compress only that many
    scanlines (the header is what intake must refuse on); None: all of them, a complete
    and valid file (zlib streamed, so building it holds one row)."""
    colour, depth, channels = PNG_KINDS[kind]
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    row = b"\x00" * (1 + width * channels)
    packer = zlib.compressobj(9)
    body = b"".join(packer.compress(row) for _ in range(height if rows is None else rows))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", body + packer.flush()) + _chunk(b"IEND", b""))


def gif_bomb(width: int, height: int) -> bytes:
    """A GIF whose screen and only frame declare ``width``×``height`` (two-colour table)."""
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    frame = b"," + struct.pack("<HHHHB", 0, 0, width, height, 0)
    return b"GIF89a" + screen + frame + b"\x02\x02\x4c\x01\x00;"


def _small(fmt: str, **options: object) -> bytearray:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (90, 10, 10)).save(buffer, fmt, **options)
    return bytearray(buffer.getvalue())


def webp_bomb(width: int, height: int) -> bytes:
    """A lossless WebP whose VP8L header is patched to ``width``×``height`` (≤ 16384)."""
    data = _small("WEBP", lossless=True)
    assert data[12:16] == b"VP8L"
    assert data[20] == 0x2F
    old = struct.unpack("<I", bytes(data[21:25]))[0]
    data[21:25] = struct.pack("<I", (width - 1) | ((height - 1) << 14) | (old & ~0xFFFFFFF))
    return bytes(data)


def jpeg_bomb(width: int, height: int) -> bytes:
    """A baseline JPEG whose frame header (SOF0) is patched to ``width``×``height``."""
    data = _small("JPEG")
    at = data.index(b"\xff\xc0")
    data[at + 5:at + 9] = struct.pack(">HH", height, width)
    return bytes(data)


@st.composite
def bombs(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """(file, width, height): over the pixel limit, or under it but over the byte budget."""
    fmt = draw(st.sampled_from(["PNG-RGBA", "PNG-RGB", "PNG-L16", "GIF", "WEBP", "JPEG"]))
    side = 16384 if fmt == "WEBP" else 60000
    over_budget = fmt in ("PNG-RGBA", "PNG-RGB", "WEBP", "JPEG") and draw(st.booleans())
    if over_budget:  # 4 stored bytes a pixel: between the budget and the pixel limit
        pixels = draw(st.integers(LIMITS.max_decoded_bytes // 4 + 1, LIMITS.max_pixels))
    else:
        pixels = draw(st.integers(LIMITS.max_pixels + 1, side * side))
    width = draw(st.integers(max(1, -(-pixels // side)), min(side, pixels)))
    height = min(side, -(-pixels // width))
    build = {"PNG-RGBA": lambda: png_bomb(width, height, "RGBA"),
             "PNG-RGB": lambda: png_bomb(width, height, "RGB"),
             "PNG-L16": lambda: png_bomb(width, height, "L16"),
             "GIF": lambda: gif_bomb(width, height), "WEBP": lambda: webp_bomb(width, height),
             "JPEG": lambda: jpeg_bomb(width, height)}[fmt]
    return build(), width, height


# -- refused before decode --------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(bombs())
def test_bombs_are_refused_from_their_header(case: tuple[bytes, int, int]) -> None:
    data, width, height = case
    assert len(data) < 200_000  # a small file …
    started = time.perf_counter()
    with pytest.raises(ImageError) as refused:
        decode_image(data, LIMITS)
    assert time.perf_counter() - started < 0.5  # … refused at once
    error = refused.value
    assert error.code == "IMAGE_DECOMPRESSION_BOMB", error.details
    if "budget" in error.details:
        assert (error.details["width"], error.details["height"]) == (width, height)
        assert error.details["decoded_bytes"] == decoded_bytes(width, height,
                                                               error.details["mode"])
        assert error.details["decoded_bytes"] > error.details["budget"]


def test_the_byte_budget_refuses_what_the_pixel_limit_admits() -> None:
    data = png_bomb(6000, 6000, "RGBA")  # 36 MP: under 40 MP, 144 MB decoded
    with pytest.raises(ImageError) as refused:
        decode_image(data, LIMITS)
    assert refused.value.details == {"width": 6000, "height": 6000, "mode": "RGBA",
                                     "decoded_bytes": 144_000_000,
                                     "budget": LIMITS.max_decoded_bytes}
    small = png_bomb(600, 600, "RGBA", rows=None)  # 1.44 MB decoded
    with pytest.raises(ImageError) as tight:
        decode_image(small, ImageLimits(max_decoded_bytes=1 << 20))
    assert tight.value.details["budget"] == 1 << 20
    assert decode_image(small, ImageLimits(max_decoded_bytes=2 << 20)).width == 600


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from test_image_bombs import png_bomb
from deepseek_eyes.errors import ImageError
from deepseek_eyes.vision.intake.decode import ImageLimits, decode_image
width, height, kind = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = png_bomb(width, height, kind, rows=None)
decode_image(png_bomb(8, 8, "RGB", rows=None))  # the decoders loaded, as in a server
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
try:
    decode_image(data, ImageLimits())
    code = None
except ImageError as error:
    code = error.code
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "size": len(data), "seconds": time.perf_counter() - started,
                  "growth_bytes": (after - before) * 1024}))
"""


def in_a_child(width: int, height: int, kind: str) -> dict[str, object]:
    here = Path(__file__).resolve().parent
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(map(str, (SRC, here.parent, here)))}
    # S603: our own interpreter running our own script, with numbers for arguments.
    done = subprocess.run([sys.executable, "-c", CHILD, str(SRC), str(width), str(height),  # noqa: S603
                           kind], capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_complete_png_bomb_costs_no_memory() -> None:
    """A real, valid 6000×6000 RGBA PNG of ~140 kB (144 MB decoded): refused, and the
    child's peak resident set does not grow."""
    result = in_a_child(6000, 6000, "RGBA")
    assert result["code"] == "IMAGE_DECOMPRESSION_BOMB"
    assert isinstance(result["size"], int)
    assert result["size"] < 300_000
    assert isinstance(result["growth_bytes"], int)
    assert result["growth_bytes"] < 16 * 1024 * 1024
    assert isinstance(result["seconds"], float)
    assert result["seconds"] < 0.5


def test_an_admitted_16_bit_image_stays_within_its_bound() -> None:
    """Under the budget (6300×6300 16-bit gray, 79 MB decoded, ~77 kB encoded) an image is
    decoded; what it costs is bounded by the decoded frame plus its RGB copy (it took
    920 MB before the 16-bit path stopped widening samples to int64)."""
    result = in_a_child(6300, 6300, "L16")
    assert result["code"] is None
    bound = decoded_bytes(6300, 6300, "I;16") + decoded_bytes(6300, 6300, "RGB") + (32 << 20)
    assert isinstance(result["growth_bytes"], int)
    assert result["growth_bytes"] < bound, result


# -- through vision serve: data URLs and files ------------------------------------------------


@pytest.fixture
def service(tmp_path: Path, loopback: LoopbackVisionServer) -> Iterator[VisionService]:
    settings = Settings.model_validate({"vision": {"routes": [{
        "name": "loop", "base_url": loopback.url("healthy~bombs"), "model": "vision-1"}],
        "route_priority": ["loop"]}})
    home = DataHome.open(settings)
    bridge = VisionBridge(settings, home)
    root = tmp_path / "served"
    root.mkdir()
    yield VisionService(bridge, ServedRoots.of([root]))
    home.close()


def data_url(data: bytes, media: str) -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bombs())
def test_bombs_sent_to_vision_serve_are_refused(service: VisionService,
                                                case: tuple[bytes, int, int]) -> None:
    data, _, _ = case
    media = {b"\x89P": "image/png", b"GI": "image/gif", b"RI": "image/webp",
             b"\xff\xd8": "image/jpeg"}[data[:2]]
    root = service.roots.roots[0]
    path = root / f"bomb-{len(list(root.iterdir()))}.img"
    path.write_bytes(data)

    async def both() -> list[str]:
        codes = []
        for reference in (data_url(data, media), str(path)):
            with pytest.raises(ImageError) as refused:
                await service.see(reference)
            codes.append(refused.value.code)
        return codes

    assert anyio.run(both) == ["IMAGE_DECOMPRESSION_BOMB"] * 2
    assert not service.bridge.home.blobs.contains(hashlib.sha256(data).hexdigest())


@pytest.mark.anyio
async def test_a_normal_image_still_decodes(service: VisionService) -> None:
    try:
        buffer = io.BytesIO()
        Image.effect_noise((1600, 1200), 40).convert("RGB").save(buffer, "JPEG", quality=85)
        photo = buffer.getvalue()
        (service.roots.roots[0] / "photo.jpg").write_bytes(photo)
        by_url = await service.see(data_url(photo, "image/jpeg"))
        by_path = await service.see(str(service.roots.roots[0] / "photo.jpg"))
        assert (by_url.image.width, by_url.image.height) == (1600, 1200)
        assert by_path.image.sha256 == by_url.image.sha256
        assert decode_image(photo, LIMITS).pixels.size == (1600, 1200)
    finally:
        await service.bridge.aclose()
