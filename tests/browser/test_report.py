"""Report v2, screenshot identity and argument checks, without a browser."""

from __future__ import annotations

import io
import re

import pytest
from PIL import Image

from deepseek_eyes.browser.calls import Args
from deepseek_eyes.browser.report import (
    REPORT_SCHEMA,
    Assertion,
    ReportRecorder,
    Step,
    redact_arguments,
)
from deepseek_eyes.browser.screenshots import identify_png, pixel_sha256
from deepseek_eyes.errors import BrowserError
from deepseek_eyes.vision.intake.decode import pixel_digest


def _png(image: Image.Image, **save: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **save)  # type: ignore[arg-type]
    return buffer.getvalue()


def test_the_pixel_hash_is_the_vision_intakes() -> None:
    rgba = Image.new("RGBA", (31, 17), (200, 10, 10, 128))
    for image in (rgba, rgba.convert("RGB"), rgba.convert("L")):
        assert pixel_sha256(image) == pixel_digest(image)


def test_the_same_pixels_encoded_twice_have_one_pixel_hash() -> None:
    image = Image.new("RGB", (64, 48), (10, 120, 200))
    fast, small = _png(image, compress_level=0), _png(image, compress_level=9)
    assert fast != small
    one, two = identify_png(fast), identify_png(small)
    assert one[0] != two[0]  # different bytes
    assert one[1:] == two[1:]  # same pixels, same size


def test_typed_secrets_never_reach_the_report() -> None:
    # Typed text is hidden unless the handler resolved a plain field (a refusal before
    # resolution, e.g. a stale state id, keeps only the length and the keyed hash).
    kept = redact_arguments("browser_type", {"state_id": "s1", "text": "hunter2"})
    assert "hunter2" not in repr(kept)
    assert kept["text"]["chars"] == 7
    assert kept["text"]["hash"].startswith("h:")
    assert len(kept["text"]["hash"]) == 10
    plain = redact_arguments("browser_type", {"text": "Alice"}, typed_in_clear=True)
    assert plain["text"] == "Alice"
    # A prompt's answer is always hidden; an assertion's needle is not typed anywhere.
    answer = redact_arguments("browser_dialog", {"text": "pin 1234"}, typed_in_clear=True)
    assert "1234" not in _without_hashes(repr(answer))
    assert redact_arguments("browser_assert", {"text": "Welcome"})["text"] == "Welcome"
    hidden_value = redact_arguments("browser_assert", {"kind": "element", "value": "s3cret"})
    assert "s3cret" not in repr(hidden_value)
    url = redact_arguments("browser_navigate", {"url": "http://x/p?token=abc#frag"})["url"]
    assert url.startswith("http://x/p?token=<h:")
    assert "abc" not in _without_hashes(url)
    assert "frag" not in url


def _without_hashes(text: str) -> str:
    """``text`` with each keyed hash (``h:`` and 8 hex digits) blanked: a hex secret such
    as ``abc`` or ``1234`` may appear inside one by chance (about once in a few thousand
    runs, since the key is random), which says nothing about the secret."""
    return re.sub(r"h:[0-9a-f]{8}", "h:########", text)


def test_report_v2_in_json_and_text() -> None:
    report = ReportRecorder(clock=lambda: 1000.0)
    report.add_step(Step(1, "browser_navigate", {"url": "http://x/"}, None, "s1", "ok", None,
                         "http://x/", 1000.0, 12))
    report.add_step(Step(2, "browser_click", {"state_id": "s0", "ref": "e1"}, "s1", "s2",
                         "refused", "BROWSER_STATE_STALE", "http://x/", 1000.0, 3))
    report.add_assertion(Assertion("text", "text 'Hi' present", "present", True, "s2", 3))
    report.add_screenshot({"sha256": "a" * 64, "pixel_sha256": "b" * 64, "width": 2,
                           "height": 2, "state_id": "s2"})
    data = report.to_dict([{"state_id": "s1"}, {"state_id": "s2"}])
    assert data["schema"] == REPORT_SCHEMA
    assert data["summary"]["outcomes"] == {"ok": 1, "refused": 1}
    assert data["summary"]["assertions"] == {"passed": 1, "failed": 0, "evidence": 0}
    text = report.to_text([{"state_id": "s1"}, {"state_id": "s2"}])
    assert "refused BROWSER_STATE_STALE [s1 → s2]" in text
    assert "PASS text" in text
    assert "screenshot sha256:aaaaaaaaaaaaaaaa" in text


def test_arguments_are_checked_before_anything_runs() -> None:
    args = Args({"page": True, "amount": float("nan"), "ref": 5, "options": [],
                 "state_id": "s1"})
    for check in (lambda: args.integer("page", default=1, minimum=1, maximum=9),
                  lambda: args.number("amount", default=1, minimum=0, maximum=9),
                  lambda: args.string("ref"), lambda: args.strings("options"),
                  lambda: args.require("missing")):
        with pytest.raises(BrowserError) as refused:
            check()
        assert refused.value.code == "BROWSER_ARGUMENT_INVALID"
    assert args.require("state_id") == "s1"
