"""One result type, and its MCP form."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from mcp_types import ImageContent, TextContent

from deepseek_eyes.toolkit.registration import to_call_result
from deepseek_eyes.toolkit.results import ToolResult
from deepseek_eyes.toolkit.visual import add_evidence, should_deliver


@dataclass(frozen=True)
class Shot:
    png: bytes
    sha256: str


def test_text_and_data_become_content_and_structured_content() -> None:
    result = to_call_result(ToolResult("state s1", {"state_id": "s1"}))
    assert [type(c) for c in result.content] == [TextContent]
    assert result.structured_content == {"state_id": "s1"}
    assert result.is_error is False
    assert result.meta is None


def test_empty_data_means_no_structured_content_and_meta_travels() -> None:
    refusal = to_call_result(ToolResult('{"error": {}}', is_error=True))
    assert refusal.structured_content is None
    assert refusal.is_error is True
    seen = to_call_result(ToolResult("evidence", {"summary": "x"}, meta={"deepseekeyes": {}}))
    assert seen.meta == {"deepseekeyes": {}}
    wire = seen.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["_meta"] == {"deepseekeyes": {}}
    assert wire["structuredContent"] == {"summary": "x"}


def test_a_delivered_screenshot_is_an_image_block_and_only_then() -> None:
    shot = Shot(b"\x89PNG-bytes", "ab" * 32)
    kept = to_call_result(ToolResult("t", {"a": 1}, screenshot=shot))
    assert len(kept.content) == 1  # captured and hashed, not delivered
    sent = to_call_result(ToolResult("t", {"a": 1}, screenshot=shot, deliver=True))
    image = sent.content[1]
    assert isinstance(image, ImageContent)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data) == shot.png


def test_code_reads_the_error_entry() -> None:
    assert ToolResult("x", {"error": {"code": "BROWSER_STATE_STALE"}}).code == \
        "BROWSER_STATE_STALE"
    assert ToolResult("x", {"error": "not a dict"}).code is None
    assert ToolResult("x").code is None


def test_evidence_is_appended_under_one_heading() -> None:
    result = ToolResult("state s1")
    add_evidence(result, "a red button")
    assert result.text == "state s1\nvisual evidence of the screenshot:\na red button"


def test_visual_mode_decides_delivery_only() -> None:
    assert should_deliver("always")
    assert not should_deliver("manual", explicit=True, thin=True)
    assert should_deliver("manual", requested=True)
    assert not should_deliver("auto")
    assert should_deliver("auto", thin=True)
    assert should_deliver("auto", explicit=True)
    assert should_deliver("auto", requested=True)
