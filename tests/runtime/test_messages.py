from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Sequence

import pytest
from PIL import Image

from deepseek_eyes.errors import ImageError, TurnError
from deepseek_eyes.runtime.messages import has_images, image_refs, parse_messages, text_of
from deepseek_eyes.vision.evidence.cache import ImageMeta

pytestmark = pytest.mark.anyio


def png(color: tuple[int, int, int] = (1, 2, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


async def admit(images: Sequence[bytes], *,
                sha256s: Sequence[str | None] | None = None) -> list[ImageMeta]:
    # A hash the parser already took is the hash of those bytes.
    for data, known in zip(images, sha256s or [None] * len(images), strict=True):
        assert known in (None, hashlib.sha256(data).hexdigest())
    return [
        ImageMeta(hashlib.sha256(data).hexdigest(), "p" * 64, 8, 6, "image/png", len(data))
        for data in images
    ]


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
    with pytest.raises(ImageError) as info:
        await parse_messages(raw, admit=admit, max_image_bytes=1000)
    assert info.value.code == "IMAGE_TOO_LARGE"
    assert info.value.details["param"] == "messages[0].content[0]"
    assert info.value.details["limit"] == 1000


async def test_url_schemes_are_case_insensitive() -> None:
    seen: list[str] = []

    async def fetch(url: str) -> bytes:
        seen.append(url)
        return png((9, 9, 9))

    upper = data_url(png((1, 2, 3))).replace("data:", "DATA:", 1)
    raw = [_image_message("HTTP://example.test/a.png", "Https://example.test/b.png", upper)]
    messages = await parse_messages(raw, admit=admit, fetch=fetch)
    assert [part["type"] for part in messages[0]["content"]] == ["image"] * 3
    assert seen == ["HTTP://example.test/a.png", "Https://example.test/b.png"]
    with pytest.raises(TurnError) as info:
        await parse_messages([_image_message("ftp://example.test/c.png")], admit=admit,
                             fetch=fetch)
    assert info.value.code == "RUNTIME_BAD_MESSAGE"
    assert info.value.details["param"] == "messages[0].content[0]"


async def test_an_empty_message_list_names_its_param() -> None:
    with pytest.raises(TurnError) as info:
        await parse_messages([], admit=admit)
    assert (info.value.code, info.value.details["param"]) == ("RUNTIME_BAD_MESSAGE", "messages")


def _image_message(*urls: str) -> dict[str, object]:
    return {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}} for url in urls
    ]}


async def test_too_many_distinct_images_are_refused_before_any_admission_or_fetch() -> None:
    calls: list[object] = []

    async def counting_admit(images: Sequence[bytes], *,
                                 sha256s: Sequence[str | None] | None = None,
                                 ) -> list[ImageMeta]:
        calls.append(("admit", len(images)))
        return await admit(images, sha256s=sha256s)

    async def fetch(url: str) -> bytes:
        calls.append(("fetch", url))
        return png((7, 7, 7))

    # 40 messages of 250 distinct tiny images each: refused at the ninth, nothing else done.
    raw = [
        _image_message(*(data_url(png((m, i % 250, 1))) for i in range(250)))
        for m in range(40)
    ]
    with pytest.raises(TurnError) as info:
        await parse_messages(raw, admit=counting_admit, fetch=fetch, max_images=8)
    assert info.value.code == "RUNTIME_TOO_MANY_IMAGES"
    assert info.value.details == {"at": "messages[0].content[8]", "limit": 8}
    assert calls == []

    urls = [f"https://example.test/{i}.png" for i in range(9)]
    with pytest.raises(TurnError) as info:
        await parse_messages([_image_message(*urls)], admit=counting_admit, fetch=fetch,
                             max_images=8)
    assert info.value.code == "RUNTIME_TOO_MANY_IMAGES"
    assert calls == []


async def test_repeats_count_once_and_are_admitted_once() -> None:
    batches: list[int] = []

    async def counting_admit(images: Sequence[bytes], *,
                                 sha256s: Sequence[str | None] | None = None,
                                 ) -> list[ImageMeta]:
        batches.append(len(images))
        return await admit(images, sha256s=sha256s)

    fetched: list[str] = []

    async def fetch(url: str) -> bytes:
        fetched.append(url)
        return png((9, 9, 9))

    one = data_url(png((1, 1, 1)))
    raw = [
        _image_message(*([one] * 250)),
        _image_message(one, "https://example.test/a.png", "https://example.test/a.png"),
    ]
    messages = await parse_messages(raw, admit=counting_admit, fetch=fetch, max_images=2)
    assert batches == [2]  # one call, distinct images only
    assert fetched == ["https://example.test/a.png"]
    assert {p["sha256"] for p in messages[0]["content"]} == {
        hashlib.sha256(png((1, 1, 1))).hexdigest()
    }
    assert [sorted(p) for p in messages[1]["content"][:1]] == [sorted(
        ["type", "sha256", "media_type", "width", "height", "size", "detail"]
    )]


async def test_a_failed_fetch_stops_the_others_and_admits_nothing() -> None:
    admitted: list[int] = []

    async def counting_admit(images: Sequence[bytes], *,
                                 sha256s: Sequence[str | None] | None = None,
                                 ) -> list[ImageMeta]:
        admitted.append(len(images))
        return await admit(images, sha256s=sha256s)

    async def fetch(url: str) -> bytes:
        if url.endswith("bad.png"):
            raise TurnError("nope", code="RUNTIME_IMAGE_FETCH_FAILED", details={"url": url})
        return png((3, 3, 3))

    raw = [_image_message("https://example.test/ok.png", "https://example.test/bad.png")]
    with pytest.raises(TurnError) as info:
        await parse_messages(raw, admit=counting_admit, fetch=fetch)
    assert info.value.code == "RUNTIME_IMAGE_FETCH_FAILED"
    assert admitted == []


async def test_distinct_urls_are_fetched_a_few_at_a_time() -> None:
    import anyio

    from deepseek_eyes.runtime.messages import FETCH_CONCURRENCY

    active = peak = 0

    async def fetch(url: str) -> bytes:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.05)
        active -= 1
        return png((int(url.rsplit("/", 1)[1]), 0, 0))

    urls = [f"https://example.test/{i}" for i in range(12)]
    messages = await parse_messages([_image_message(*urls)], admit=admit, fetch=fetch)
    assert peak == FETCH_CONCURRENCY  # not one after another, and not all at once
    assert len({p["sha256"] for p in messages[0]["content"]}) == 12


async def test_a_refused_image_names_its_message_and_part() -> None:
    """Admission knows a refused image only by its place among the distinct images; the
    error it raises names the message and the content part that carried it."""
    good, bad = png((1, 2, 3)), b"\x89PNG\r\n\x1a\nxx"

    async def refuse_second(images: Sequence[bytes], *,
                            sha256s: Sequence[str | None] | None = None) -> list[ImageMeta]:
        assert list(images) == [good, bad]
        raise ImageError("the image is truncated", code="IMAGE_TRUNCATED", details={"index": 1})

    with pytest.raises(ImageError) as info:
        await parse_messages([
            {"role": "user", "content": [{"type": "image_url",
                                          "image_url": {"url": data_url(good)}}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [
                {"type": "text", "text": "and this one?"},
                {"type": "image_url", "image_url": {"url": data_url(bad)}},
            ]},
        ], admit=refuse_second)
    assert info.value.code == "IMAGE_TRUNCATED"
    assert info.value.message == "messages[2].content[1]: the image is truncated"
    assert info.value.details == {"index": 1, "at": "messages[2].content[1]",
                                  "param": "messages[2].content[1]"}


async def test_a_resent_history_is_structured_once_up_to_its_first_image() -> None:
    from deepseek_eyes.runtime.messages import ParsedHistories

    memo = ParsedHistories()
    history: list[dict[str, object]] = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "reasoning_content": "r",
         "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    first = await parse_messages(history, admit=admit, memo=memo, scope="s")
    image = {"role": "user", "content": [{"type": "image_url",
                                          "image_url": {"url": data_url(png())}}]}
    longer = [*history, image, {"role": "assistant", "content": "seen"}]
    second = await parse_messages(longer, admit=admit, memo=memo, scope="s")
    assert second == await parse_messages(longer, admit=admit)  # what a whole parse gives
    assert all(a is b for a, b in zip(first, second[:4], strict=True))  # not structured again
    third = await parse_messages([*longer, {"role": "user", "content": "more"}],
                                 admit=admit, memo=memo, scope="s")
    assert all(a is b for a, b in zip(second[:4], third[:4], strict=True))
    assert third[4] is not second[4]  # from the image on: structured (and admitted) again
    assert third[4] == second[4]
    other = await parse_messages(longer, admit=admit, memo=memo, scope="another")
    assert other[0] is not second[0]  # one client's forms never reach another's
    edited = await parse_messages([{"role": "system", "content": "be long"}, *history[1:]],
                                  admit=admit, memo=memo, scope="s")
    assert edited[0]["content"] == "be long"
    assert edited[1] == second[1]
    assert edited[1] is not second[1]  # a history that starts otherwise is structured whole
