"""Safe image intake: every refusal code, normalization to RGB, hashes and route payloads."""

from __future__ import annotations

import hashlib
import io
import os
import random
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import GifImagePlugin, Image, ImageFile

from deepseek_eyes.errors import ImageError
from deepseek_eyes.settings import ImageSettings
from deepseek_eyes.vision.intake.decode import (
    DecodedImage,
    ImageLimits,
    decode_image,
    pixel_digest,
    read_image_file,
)

RED = (255, 0, 0)
BLUE = (0, 0, 255)
WHITE = (255, 255, 255)


def encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def sample(size: tuple[int, int] = (64, 48), seed: int = 1) -> Image.Image:
    """A small RGB image with real structure (noise), so codecs have work to do."""
    rng = random.Random(seed)
    return Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3))


def refused(data: bytes, limits: ImageLimits | None = None) -> ImageError:
    with pytest.raises(ImageError) as caught:
        decode_image(data, limits or ImageLimits())
    error = caught.value
    # Every refusal is one human sentence.
    assert error.message.endswith(".")
    assert "\n" not in error.message
    return error


def chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload))
    )


def png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG whose IHDR claims ``width``×``height`` RGB pixels."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def gif_header_only(width: int, height: int) -> bytes:
    """A GIF whose screen and first image descriptor claim ``width``×``height``."""
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0x80, 0, 0)
        + b"\x00\x00\x00\xff\xff\xff"
        + b","
        + struct.pack("<HHHHB", 0, 0, width, height, 0)
        + b"\x02\x02\x4c\x01\x00;"
    )


def bmp_header_only(width: int, height: int) -> bytes:
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + 40 + 16, 0, 0, 54) + info + b"\x00" * 16


# --------------------------------------------------------------------------- refusals


def test_empty_bytes_are_refused() -> None:
    assert refused(b"").code == "IMAGE_EMPTY"


def test_random_bytes_are_an_unsupported_format() -> None:
    data = b"\x00" + random.Random(7).randbytes(4096)
    error = refused(data)
    assert error.code == "IMAGE_UNSUPPORTED_FORMAT"
    assert error.details["format"] is None


def test_tiff_is_refused_by_name_when_not_allowed() -> None:
    error = refused(encode(sample(), "TIFF"))
    assert error.code == "IMAGE_UNSUPPORTED_FORMAT"
    assert error.details["format"] == "TIFF"
    assert "TIFF" in error.message


def test_a_real_format_outside_a_narrowed_allow_list_is_unsupported() -> None:
    only_png = ImageLimits(formats=frozenset({"PNG"}))
    error = refused(encode(sample(), "JPEG"), only_png)
    assert error.code == "IMAGE_UNSUPPORTED_FORMAT"
    assert error.details == {"format": "JPEG", "allowed": ["PNG"]}
    decode_image(encode(sample(), "PNG"), only_png)  # still fine


def test_truncated_png_is_refused() -> None:
    data = encode(sample((200, 200)), "PNG")
    assert refused(data[: len(data) // 2]).code == "IMAGE_TRUNCATED"


def test_png_cut_inside_its_header_is_truncated_not_unsupported() -> None:
    data = encode(sample(), "PNG")
    error = refused(data[:30])
    assert error.code == "IMAGE_TRUNCATED"
    assert error.details["format"] == "PNG"


def test_truncated_jpeg_is_refused_although_verify_accepts_it() -> None:
    data = encode(sample((200, 200)), "JPEG", quality=90)[:-400]
    with Image.open(io.BytesIO(data)) as lazy:
        lazy.verify()  # Pillow's verify() does not notice a truncated JPEG
    error = refused(data)
    assert error.code == "IMAGE_TRUNCATED"
    assert error.details["format"] == "JPEG"


def test_over_the_byte_limit_is_refused_before_pillow_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("Pillow was asked to open an oversized image")

    monkeypatch.setattr(Image, "open", never)
    error = refused(b"\x89PNG" + b"\x00" * 1020, ImageLimits(max_bytes=1000))
    assert error.code == "IMAGE_TOO_LARGE"
    assert error.details == {"size": 1024, "limit": 1000}


@pytest.mark.parametrize(
    "data",
    [
        png_header_only(50_000, 50_000),
        gif_header_only(50_000, 50_000),
        bmp_header_only(100_000, 100_000),
    ],
    ids=["png", "gif", "bmp"],
)
def test_header_only_bombs_are_refused_from_the_header(data: bytes) -> None:
    assert len(data) < 200
    assert refused(data).code == "IMAGE_DECOMPRESSION_BOMB"


def test_our_pixel_limit_reports_the_declared_size() -> None:
    error = refused(png_header_only(8000, 8000))  # 64 M pixels: over 40 M, under Pillow's cap
    assert error.code == "IMAGE_DECOMPRESSION_BOMB"
    assert error.details == {
        "width": 8000,
        "height": 8000,
        "pixels": 64_000_000,
        "limit": 40_000_000,
    }


def test_a_moderate_image_over_a_small_custom_pixel_limit_is_a_bomb() -> None:
    error = refused(encode(sample((100, 80)), "PNG"), ImageLimits(max_pixels=5000))
    assert error.code == "IMAGE_DECOMPRESSION_BOMB"
    assert error.details["pixels"] == 8000
    assert error.details["limit"] == 5000


def test_pillows_bomb_warning_is_an_error_locally_and_its_globals_stay_put() -> None:
    before = (Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)
    # 100 M pixels: within our raised limit, over Pillow's warning threshold (~89 M).
    error = refused(png_header_only(10_000, 10_000),
                    ImageLimits(max_pixels=400_000_000, max_decoded_bytes=1 << 31))
    assert error.code == "IMAGE_DECOMPRESSION_BOMB"
    assert error.details["decoder_limit"] == Image.MAX_IMAGE_PIXELS
    assert before == (Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)


def outcome(data: bytes) -> str:
    """The decoded mode, or the refusal code; any other exception fails the test."""
    try:
        return decode_image(data).pixels.mode
    except ImageError as error:
        return error.code


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "BMP", "WEBP"])
def test_corrupted_files_only_ever_raise_image_error(fmt: str) -> None:
    original = encode(sample((40, 30)).convert("P") if fmt == "GIF" else sample((40, 30)), fmt)
    rng = random.Random(fmt)
    outcomes: set[str] = set()
    for _ in range(60):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = rng.choice([len(data), rng.randrange(1, len(data))])
        outcomes.add(outcome(bytes(data[:cut])))
    assert outcomes <= {
        "RGB",
        "IMAGE_TRUNCATED",
        "IMAGE_UNSUPPORTED_FORMAT",
        "IMAGE_DECOMPRESSION_BOMB",
    }
    assert "IMAGE_TRUNCATED" in outcomes


# --------------------------------------------------------------------------- normalization


def test_exif_orientation_6_rotates_the_pixels() -> None:
    stored = Image.new("RGB", (40, 20), BLUE)
    stored.paste(RED, (0, 0, 8, 8))  # a marker in the stored top-left corner
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    decoded = decode_image(encode(stored, "JPEG", quality=95, exif=exif.tobytes()))
    assert (decoded.width, decoded.height) == (20, 40)
    assert decoded.pixels.size == (20, 40)
    # Turned clockwise, the stored top-left corner lands top-right.
    marker = decoded.pixels.getpixel((16, 3))
    elsewhere = decoded.pixels.getpixel((3, 3))
    assert isinstance(marker, tuple)
    assert isinstance(elsewhere, tuple)
    assert marker[0] > 200
    assert marker[2] < 60
    assert elsewhere[0] < 60
    assert elsewhere[2] > 200


def test_alpha_is_flattened_onto_white() -> None:
    image = Image.new("RGBA", (3, 1))
    image.putpixel((0, 0), (255, 0, 0, 0))  # invisible red
    image.putpixel((1, 0), (0, 0, 0, 128))  # half-transparent black
    image.putpixel((2, 0), (0, 0, 255, 255))  # opaque blue
    decoded = decode_image(encode(image, "PNG"))
    assert decoded.pixels.mode == "RGB"
    assert decoded.pixels.getpixel((0, 0)) == WHITE
    gray = decoded.pixels.getpixel((1, 0))
    assert isinstance(gray, tuple)
    assert all(126 <= channel <= 128 for channel in gray)
    assert decoded.pixels.getpixel((2, 0)) == BLUE


def test_cmyk_jpeg_is_decoded_to_rgb() -> None:
    cmyk = Image.new("CMYK", (16, 16), (0, 255, 255, 0))  # red ink
    decoded = decode_image(encode(cmyk, "JPEG", quality=95))
    assert decoded.format == "JPEG"
    assert decoded.pixels.mode == "RGB"
    red = decoded.pixels.getpixel((8, 8))
    assert isinstance(red, tuple)
    assert red[0] > 240
    assert max(red[1], red[2]) < 15


def test_palette_png_is_decoded_to_rgb_and_its_transparent_index_to_white() -> None:
    image = Image.new("P", (2, 1))
    image.putpalette([*RED, *BLUE])
    image.putpixel((1, 0), 1)
    opaque = decode_image(encode(image, "PNG"))
    assert opaque.pixels.mode == "RGB"
    assert [opaque.pixels.getpixel((x, 0)) for x in range(2)] == [RED, BLUE]
    keyed = decode_image(encode(image, "PNG", transparency=0))
    assert [keyed.pixels.getpixel((x, 0)) for x in range(2)] == [WHITE, BLUE]


def test_16_bit_grayscale_is_scaled_not_clipped() -> None:
    image = Image.new("I;16", (4, 1))
    for x, value in enumerate([0, 256, 32_768, 65_535]):
        image.putpixel((x, 0), value)
    decoded = decode_image(encode(image, "PNG"))
    assert decoded.pixels.mode == "RGB"
    assert [decoded.pixels.getpixel((x, 0)) for x in range(4)] == [
        (0, 0, 0),
        (1, 1, 1),
        (128, 128, 128),
        (255, 255, 255),
    ]
    # Other decoders may round 16-bit samples differently: never pass the original on.
    assert decoded.route_payload()[0] != decoded.original


def test_16_bit_grayscale_transparency_key_matches_the_full_value() -> None:
    image = Image.new("I;16", (3, 1))
    for x, value in enumerate([0, 256, 300]):
        image.putpixel((x, 0), value)
    decoded = decode_image(encode(image, "PNG", transparency=256))
    # Only the keyed 16-bit value is transparent, not every value that scales to 1.
    assert [decoded.pixels.getpixel((x, 0)) for x in range(3)] == [
        (0, 0, 0),
        WHITE,
        (1, 1, 1),
    ]


def test_animated_gif_gives_its_first_frame() -> None:
    frames = [Image.new("RGB", (10, 10), RED), Image.new("RGB", (10, 10), BLUE)]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100)
    with Image.open(io.BytesIO(data)) as check:
        assert isinstance(check, GifImagePlugin.GifImageFile)
        assert check.n_frames == 2
    decoded = decode_image(data)
    assert decoded.format == "GIF"
    assert decoded.media_type == "image/gif"
    assert decoded.pixels.getpixel((5, 5)) == RED


@pytest.mark.parametrize(
    ("fmt", "params", "media_type"),
    [("WEBP", {"lossless": True}, "image/webp"), ("BMP", {}, "image/bmp")],
)
def test_webp_and_bmp_are_accepted(fmt: str, params: dict[str, Any], media_type: str) -> None:
    image = sample()
    data = encode(image, fmt, **params)
    decoded = decode_image(data)
    assert (decoded.format, decoded.media_type) == (fmt, media_type)
    assert (decoded.width, decoded.height) == image.size
    assert decoded.pixels.tobytes() == image.tobytes()  # both encodings here are lossless


def test_decoded_image_identifies_the_bytes() -> None:
    data = encode(sample(), "PNG")
    decoded = decode_image(data)
    assert decoded.sha256 == hashlib.sha256(data).hexdigest()
    assert decoded.size == len(data)
    assert decoded.original == data
    assert "original" not in repr(decoded)
    assert decoded == decode_image(data)


def test_a_known_sha256_is_taken_as_given_and_a_malformed_one_is_a_bug() -> None:
    data = encode(sample(), "PNG")
    assert decode_image(data, sha256="ab" * 32).sha256 == "ab" * 32
    with pytest.raises(ValueError, match="64 lower-case hex"):
        decode_image(data, sha256="not-a-hash")


# --------------------------------------------------------------------------- hashes


def test_pixel_hash_is_the_same_across_encodings_and_changes_with_one_pixel() -> None:
    image = sample()
    as_png = decode_image(encode(image, "PNG"))
    as_bmp = decode_image(encode(image, "BMP"))
    assert as_png.sha256 != as_bmp.sha256
    assert as_png.pixel_sha256 == as_bmp.pixel_sha256

    changed = image.copy()
    pixel = changed.getpixel((10, 10))
    assert isinstance(pixel, tuple)
    changed.putpixel((10, 10), ((pixel[0] + 1) % 256, pixel[1], pixel[2]))
    assert decode_image(encode(changed, "PNG")).pixel_sha256 != as_png.pixel_sha256


def test_pixel_digest_is_the_documented_formula_even_when_hashed_in_strips() -> None:
    image = Image.new("RGB", (512, 4500), (3, 4, 5))  # taller than one hashing strip
    image.putpixel((511, 4499), (9, 9, 9))
    expected = hashlib.sha256(b"RGB:512x4500:" + image.tobytes()).hexdigest()
    assert pixel_digest(image) == expected


def test_pixel_digest_normalizes_like_decode() -> None:
    rgba = Image.new("RGBA", (4, 4), (10, 20, 30, 0))
    assert pixel_digest(rgba) == decode_image(encode(rgba, "PNG")).pixel_sha256
    assert pixel_digest(rgba) == pixel_digest(Image.new("RGB", (4, 4), WHITE))


# --------------------------------------------------------------------------- route payload


def test_route_payload_is_the_original_bytes_for_a_plain_rgb_png() -> None:
    data = encode(sample(), "PNG")
    decoded = decode_image(data)
    payload, media_type = decoded.route_payload()
    assert payload is decoded.original
    assert media_type == "image/png"


def test_route_payload_is_a_png_of_the_rotated_pixels_for_an_exif_rotated_jpeg() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    decoded = decode_image(encode(sample((40, 20)), "JPEG", exif=exif.tobytes()))
    payload, media_type = decoded.route_payload()
    assert media_type == "image/png"
    assert payload.startswith(b"\x89PNG")
    with Image.open(io.BytesIO(payload)) as sent:
        assert sent.size == (20, 40)
        assert pixel_digest(sent) == decoded.pixel_sha256
    assert decoded.route_payload()[0] is payload  # encoded once


@pytest.mark.parametrize(
    "image",
    [Image.new("RGBA", (8, 8), (1, 2, 3, 4)), Image.new("P", (8, 8))],
    ids=["rgba", "palette"],
)
def test_route_payload_re_encodes_when_pixels_needed_conversion(image: Image.Image) -> None:
    decoded = decode_image(encode(image, "PNG"))
    payload, media_type = decoded.route_payload()
    assert media_type == "image/png"
    assert payload != decoded.original
    with Image.open(io.BytesIO(payload)) as sent:
        assert sent.mode == "RGB"
        assert pixel_digest(sent) == decoded.pixel_sha256


def test_a_decoded_image_built_by_hand_always_re_encodes() -> None:
    pixels = Image.new("RGB", (2, 2), RED)
    decoded = DecodedImage(
        sha256="0" * 64,
        pixel_sha256=pixel_digest(pixels),
        width=2,
        height=2,
        format="BMP",
        media_type="image/bmp",
        size=3,
        pixels=pixels,
        original=b"BM?",
    )
    payload, media_type = decoded.route_payload()
    assert media_type == "image/png"
    with Image.open(io.BytesIO(payload)) as sent:
        assert sent.getpixel((1, 1)) == RED


# --------------------------------------------------------------------------- limits and files


def test_limits_come_from_settings() -> None:
    limits = ImageLimits.from_settings(
        ImageSettings(max_bytes=1234, max_pixels=5678, formats=("PNG", "GIF"))
    )
    assert limits == ImageLimits(max_bytes=1234, max_pixels=5678, formats=frozenset({"PNG", "GIF"}))
    assert ImageLimits.from_settings(ImageSettings()) == ImageLimits()


def test_limits_refuse_formats_intake_cannot_name() -> None:
    with pytest.raises(ValueError, match="TIFF"):
        ImageLimits(formats=frozenset({"PNG", "TIFF"}))


def test_read_image_file_reads_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"x" * 1000)
    assert read_image_file(path, ImageLimits(max_bytes=1000)) == b"x" * 1000


def test_read_image_file_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.png"
    path.write_bytes(b"x" * 5000)
    with pytest.raises(ImageError) as caught:
        read_image_file(path, ImageLimits(max_bytes=1000))
    assert caught.value.code == "IMAGE_TOO_LARGE"
    assert caught.value.details["size"] == 5000
    assert caught.value.details["limit"] == 1000


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_read_image_file_reports_unreadable_paths(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "directory":
        path.mkdir()
    with pytest.raises(ImageError) as caught:
        read_image_file(path)
    assert caught.value.code == "IMAGE_UNREADABLE"
    assert caught.value.details["path"] == str(path)


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_read_image_file_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    path = tmp_path / "pipe.png"
    os.mkfifo(path)
    with pytest.raises(ImageError) as caught:
        read_image_file(path)
    assert caught.value.code == "IMAGE_UNREADABLE"
