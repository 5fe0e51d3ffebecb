"""An admitted image fitted to a seeing model's limits, and look's full-resolution crop."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image

from deepseek_eyes.vision.intake.fit import MIN_CROP_PX, crop_box, crop_png, fit_sync


def encoded(size: tuple[int, int], fmt: str, *, noise: bool = False) -> bytes:
    picture = Image.new("RGB", size, (20, 120, 220))
    if noise:
        rng = random.Random(7)
        picture = Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3))
    out = io.BytesIO()
    picture.save(out, format=fmt)
    return out.getvalue()


def meta(data: bytes, media_type: str) -> dict[str, object]:
    with Image.open(io.BytesIO(data)) as picture:
        return {"width": picture.width, "height": picture.height, "media_type": media_type}


def test_an_image_that_fits_is_sent_as_stored() -> None:
    data = encoded((800, 600), "PNG")
    assert fit_sync(data, meta(data, "image/png"), max_side=8192, max_bytes=1 << 20) is data


def test_a_long_side_is_shrunk_with_its_aspect_kept() -> None:
    data = encoded((9000, 300), "PNG")
    out = fit_sync(data, meta(data, "image/png"), max_side=8192, max_bytes=None)
    with Image.open(io.BytesIO(out)) as picture:
        assert picture.format == "PNG"
        assert picture.size == (8192, 273)


def test_a_format_the_model_does_not_take_becomes_png() -> None:
    data = encoded((40, 30), "BMP")
    out = fit_sync(data, meta(data, "image/bmp"), max_side=8192, max_bytes=None)
    assert out.startswith(b"\x89PNG")


def test_bytes_over_the_budget_become_jpeg_then_fewer_pixels() -> None:
    data = encoded((1200, 900), "PNG", noise=True)  # noise: PNG cannot shrink it
    budget = 60_000
    out = fit_sync(data, meta(data, "image/png"), max_side=8192, max_bytes=budget)
    assert out.startswith(b"\xff\xd8")
    assert len(out) <= budget
    with Image.open(io.BytesIO(out)) as picture:
        assert picture.width < 1200  # the qualities alone were not enough


@pytest.mark.parametrize(("region", "box"), [
    ((0.5, 0.5, 0.5, 0.5), (200, 100, 400, 200)),
    ((0.0, 0.0, 1.0, 1.0), (0, 0, 400, 200)),
    ((0.9, 0.9, 0.5, 0.5), (360, 180, 400, 200)),  # clipped to the image
    ((0.5, 0.5, 0.001, 0.001), (192, 92, 192 + MIN_CROP_PX, 92 + MIN_CROP_PX)),  # grown
])
def test_a_region_maps_to_pixels(region: tuple[float, float, float, float],
                                 box: tuple[int, int, int, int]) -> None:
    assert crop_box(400, 200, region) == box


def test_a_crop_is_full_resolution() -> None:
    picture = Image.new("RGB", (400, 200), (255, 255, 255))
    picture.paste((0, 0, 255), (200, 100, 400, 200))
    out = io.BytesIO()
    picture.save(out, format="PNG")
    crop = crop_png(out.getvalue(), (0.5, 0.5, 0.5, 0.5))
    with Image.open(io.BytesIO(crop)) as cut:
        assert cut.size == (200, 100)
        assert cut.convert("RGB").getpixel((100, 50)) == (0, 0, 255)
