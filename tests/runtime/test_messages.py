from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from deepseek_eyes.errors import TurnError
from deepseek_eyes.runtime.messages import has_images, image_refs, parse_messages, text_of
from deepseek_eyes.vision.cache import ImageMeta

pytestmark = pytest.mark.anyio


def png(color: tuple[int, int, int] = (1, 2, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


async def admit(data: bytes) -> ImageMeta:
    import hashlib

    return ImageMeta(hashlib.sha256(data).hexdigest(), "p" * 64, 8, 6, "image/png", len(data))


async def test_parses_roles_parts_and_images() -> None:
    image = png()
    messages = await parse_messages(
        [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": data_url(image), "detail": "high"}},
            ]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "lookup", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        admit=admit,
    )
    assert messages[0] == {"role": "system", "content": "be brief"}
    part = messages[1]["content"][1]
    assert part["type"] == "image"
    assert part["size"] == len(image)
    assert part["detail"] == "high"
    assert messages[2]["tool_calls"] == [{"id": "c1", "name": "lookup", "arguments": "{}"}]
    assert messages[3]["tool_call_id"] == "c1"
    assert has_images(messages)
    assert [r["sha256"] for r in image_refs(messages + messages)] == [part["sha256"]]
    assert text_of(messages[1]["content"]) == "what is this?"


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ([], "messages"),
        ([{"role": "wizard", "content": "x"}], "messages[0]"),
        ([{"role": "user", "content": [{"type": "audio", "data": "x"}]}], "messages[0].content[0]"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}],
         "messages[0].content[0]"),
        ([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]}],
         "messages[0].content[0]"),
        ([{"role": "assistant", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}],
         "messages[0].content[0]"),
        ([{"role": "tool", "content": "x"}], "messages[0]"),
        ([{"role": "user", "content": 5}], "messages[0]"),
    ],
)
async def test_malformed_messages_name_where(raw: object, where: str) -> None:
    with pytest.raises(TurnError) as info:
        await parse_messages(raw, admit=admit)
    assert info.value.code == "RUNTIME_BAD_MESSAGE"
    assert info.value.details["at"] == where


async def test_http_image_urls_are_refused_unless_enabled() -> None:
    raw = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.test/x.png"}}]}]
    with pytest.raises(TurnError) as info:
        await parse_messages(raw, admit=admit)
    assert info.value.code == "RUNTIME_IMAGE_URL_DISABLED"

    async def fetch(url: str) -> bytes:
        assert url == "https://example.test/x.png"
        return png((9, 9, 9))

    messages = await parse_messages(raw, admit=admit, fetch=fetch)
    assert messages[0]["content"][0]["type"] == "image"


async def test_oversized_data_url_is_refused_before_decoding() -> None:
    raw = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(b"x" * 3000)}}]}]
    with pytest.raises(TurnError) as info:
        await parse_messages(raw, admit=admit, max_image_bytes=1000)
    assert info.value.details["reason"] == "image_too_large"
