"""Image intake against Pillow's own decode, and the time a decompression bomb costs.

    .venv/bin/python bench/image_intake.py [--repeat N]

Ours: ``decode_image`` (byte, format, pixel and decoded-size checks, the large-decode slot,
EXIF orientation, RGB normalization and the pixel hash). Baseline: ``Image.open`` +
``load`` + ``convert("RGB")`` of the same bytes, the least any intake must do. Three
sizes: a small PNG screenshot, a full-HD JPEG, a 12 MP JPEG (a large decode: it takes a
slot). Then a 150 kB PNG that declares 6000×6000 RGBA (144 MB decoded): ours refuses it
from the header; the baseline decodes it. Lines: ``name: ours=… baseline=… ratio=…``
(median milliseconds; ratio = ours / baseline).
"""

from __future__ import annotations

import argparse
import io
import statistics
import struct
import time
import zlib
from collections.abc import Callable

from PIL import Image

from deepseek_eyes.errors import ImageError
from deepseek_eyes.vision.intake.decode import decode_image


def _encoded(size: tuple[int, int], fmt: str) -> bytes:
    image = Image.effect_noise(size, 40).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, fmt, **({"quality": 88} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _png_bomb(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + width * 4)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body)
            + chunk(b"IEND", b""))


def _median_ms(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _pillow(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return image.convert("RGB")


def _ours(data: bytes) -> object:
    try:
        return decode_image(data)
    except ImageError as error:
        return error.code


def main(repeat: int) -> None:
    cases = {
        "intake_png_800x600": _encoded((800, 600), "PNG"),
        "intake_jpeg_1920x1080": _encoded((1920, 1080), "JPEG"),
        "intake_jpeg_4000x3000": _encoded((4000, 3000), "JPEG"),
        "intake_png_bomb_6000x6000": _png_bomb(6000, 6000),
    }
    for name, data in cases.items():
        ours = _median_ms(lambda d=data: _ours(d), repeat)  # type: ignore[misc]
        baseline = _median_ms(lambda d=data: _pillow(d), max(1, repeat // 2))  # type: ignore[misc]
        print(f"{name}: ours={ours:.2f}ms baseline={baseline:.2f}ms "
              f"ratio={ours / baseline:.3f} ({len(data):,} bytes encoded)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    main(parser.parse_args().repeat)
