from __future__ import annotations

from typing import Any

from deepseek_eyes.runtime.view import BRIDGE_SYSTEM_PROMPT, EvidenceSlot, build_view

IMAGE = {"type": "image", "sha256": "ab" * 32, "media_type": "image/png", "width": 900,
         "height": 700, "size": 45_000, "detail": "auto"}
EVIDENCE: dict[str, Any] = {
    "schema": "deepseekeyes.evidence.v1",
    "summary": "A receipt.",
    "ocr": [{"text": "TOTAL 64.03", "bbox": [0.1, 0.2, 0.3, 0.04], "confidence": 0.99}],
    "regions": [], "objects": [], "relations": [],
    "quantitative_facts": [{"label": "TOTAL", "value": 64.03, "unit": "", "text": "64.03",
                            "bbox": None, "confidence": 0.99}],
    "uncertainties": [],
}
SLOTS = {IMAGE["sha256"]: EvidenceSlot("img-1", IMAGE, "local", "cd" * 32, EVIDENCE)}


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_text_path_passes_messages_through() -> None:
    view = build_view([user(text("hi")), {"role": "assistant", "content": "yo"}], path="text")
    assert view.messages == [{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "yo"}]
    assert view.evidence_tokens == 0


def test_bridged_path_renders_the_turns_images_in_full() -> None:
    view = build_view([user(text("What is the total?"), IMAGE)], path="bridged", slots=SLOTS)
    assert view.messages[0] == {"role": "system", "content": BRIDGE_SYSTEM_PROMPT}
    first = view.messages[1]["content"]
    assert isinstance(first, str)
    assert '"TOTAL 64.03"' in first
    assert "TOTAL = 64.03" in first
    assert "img-1" in first
    assert "image_url" not in str(view.messages)
    assert view.evidence_tokens > 0


def test_later_turns_carry_a_pointer_unless_full_history_is_asked() -> None:
    messages = [
        user(text("What is the total?"), IMAGE),
        {"role": "assistant", "content": "64.03"},
        user(text("And the tax?")),
    ]
    view = build_view(messages, path="bridged", slots=SLOTS)
    pointer = view.messages[1]["content"]
    assert "shown earlier" in pointer
    assert 'look(image="img-1"' in pointer
    assert '"TOTAL 64.03"' not in pointer
    full = build_view(messages, path="bridged", slots=SLOTS, history_evidence="full")
    assert '"TOTAL 64.03"' in full.messages[1]["content"]
    # The same image sent again: the latest copy is full, the earlier one a pointer.
    again = [*messages, user(text("Look again"), IMAGE)]
    view = build_view(again, path="bridged", slots=SLOTS)
    assert "shown earlier" in view.messages[1]["content"]
    assert '"TOTAL 64.03"' in view.messages[-1]["content"]


def test_native_path_sends_user_images_as_data_urls() -> None:
    view = build_view(
        [user(text("what?"), IMAGE)], path="native", image_bytes=lambda sha: b"\x89PNG"
    )
    parts = view.messages[0]["content"]
    assert parts[1]["type"] == "image_url"
    assert parts[1]["image_url"]["url"] == "data:image/png;base64,iVBORw=="


def test_budget_drops_oldest_and_keeps_tool_pairs() -> None:
    filler = "x" * 4000
    messages = [
        {"role": "system", "content": "sys"},
        user(text(filler)),
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c", "name": "t", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c", "content": filler},
        {"role": "assistant", "content": filler},
        user(text("latest question")),
    ]
    view = build_view(messages, path="text", budget_tokens=1200)
    roles = [m["role"] for m in view.messages]
    assert roles[0] == "system"
    assert view.messages[-1] == {"role": "user", "content": "latest question"}
    assert "tool" not in roles  # the tool result left with its call
    assert view.omitted >= 3
    assert "left out" in view.messages[1]["content"]
