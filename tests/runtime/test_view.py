from __future__ import annotations

from typing import Any

import pytest

from deepseek_eyes.runtime.budget import fit, message_tokens
from deepseek_eyes.runtime.view import (
    BRIDGE_SYSTEM_PROMPT,
    EvidenceSlot,
    ViewMemo,
    build_view,
    carries_images,
)

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


def test_pointer_history_carries_a_pointer_for_earlier_images() -> None:
    messages = [
        user(text("What is the total?"), IMAGE),
        {"role": "assistant", "content": "64.03"},
        user(text("And the tax?")),
    ]
    view = build_view(messages, path="bridged", slots=SLOTS, history_evidence="pointer")
    pointer = view.messages[1]["content"]
    assert "shown earlier" in pointer
    assert 'look(image="img-1"' in pointer
    assert '"TOTAL 64.03"' not in pointer
    full = build_view(messages, path="bridged", slots=SLOTS, history_evidence="full")
    assert '"TOTAL 64.03"' in full.messages[1]["content"]
    # The same image sent again: the latest copy is full, the earlier one a pointer.
    again = [*messages, user(text("Look again"), IMAGE)]
    view = build_view(again, path="bridged", slots=SLOTS, history_evidence="pointer")
    assert "shown earlier" in view.messages[1]["content"]
    assert '"TOTAL 64.03"' in view.messages[-1]["content"]


def test_full_history_keeps_every_evidence_where_it_was() -> None:
    first = [user(text("What is the total?"), IMAGE)]
    later = [*first, {"role": "assistant", "content": "64.03"}, user(text("And the tax?")),
             {"role": "assistant", "content": "none"}, user(text("Again:"), IMAGE)]
    one = build_view(first, path="bridged", slots=SLOTS)
    three = build_view(later, path="bridged", slots=SLOTS)
    # The later request starts with the exact messages of the earlier one: a cached prefix.
    assert three.messages[: len(one.messages)] == one.messages
    assert three.messages[-1]["content"].endswith(
        "[img-1 again: its evidence is in an earlier message]")
    assert three.avoided_tokens == 0


def test_native_path_sends_user_images_as_data_urls() -> None:
    view = build_view(
        [user(text("what?"), IMAGE)], path="native", image_bytes={IMAGE["sha256"]: b"\x89PNG"}
    )
    parts = view.messages[0]["content"]
    assert parts[1]["type"] == "image_url"
    assert parts[1]["image_url"]["url"] == "data:image/png;base64,iVBORw=="


OTHER = {**IMAGE, "sha256": "ef" * 32, "width": 10, "height": 10}
THIRD = {**IMAGE, "sha256": "12" * 32, "width": 20, "height": 20}
BYTES = {IMAGE["sha256"]: b"one", OTHER["sha256"]: b"two", THIRD["sha256"]: b"three"}


def _kinds(message: dict[str, Any]) -> list[str]:
    return [
        "pixels" if p["type"] == "image_url"
        else "again" if " again:" in p["text"]
        else "ref" if "not sent again" in p["text"] else "text"
        for p in message["content"]
    ]


def test_native_turns_send_earlier_images_as_references_and_repeats_once() -> None:
    messages = [
        user(text("first"), IMAGE, OTHER),
        {"role": "assistant", "content": "two images"},
        user(text("second"), THIRD, THIRD, THIRD),
        {"role": "assistant", "content": "one image"},
        user(text("and now?"), OTHER),
    ]
    view = build_view(messages, path="native", image_bytes=BYTES)
    assert _kinds(view.messages[0]) == ["text", "ref", "ref"]
    assert _kinds(view.messages[2]) == ["text", "ref", "ref", "ref"]
    assert _kinds(view.messages[4]) == ["text", "pixels"]  # the latest message's image
    assert "[img-1: sha256:abababababababab 900x700 image/png;" in str(view.messages[0])
    assert str(view.messages).count("data:") == 1
    # Earlier images sent again only up to the setting, most recent first, once each.
    view = build_view(messages, path="native", image_bytes=BYTES, native_history_images=1)
    assert _kinds(view.messages[0]) == ["text", "ref", "ref"]
    assert _kinds(view.messages[2]) == ["text", "again", "again", "pixels"]
    view = build_view(messages, path="native", image_bytes=BYTES, native_history_images=2)
    assert _kinds(view.messages[0]) == ["text", "pixels", "ref"]  # OTHER: sent in the latest
    assert str(view.messages).count("data:") == 3
    # The bytes of every image sent as pixels must be given (read off the event loop).
    with pytest.raises(ValueError, match="needs the bytes"):
        build_view(messages, path="native", image_bytes={})


def test_an_image_repeated_in_one_message_is_rendered_once() -> None:
    copies = [IMAGE] * 250
    view = build_view([user(text("what?"), *copies)], path="bridged", slots=SLOTS)
    content = view.messages[1]["content"]
    assert content.count('"TOTAL 64.03"') == 1
    assert content.count("[img-1 again: the same image as above]") == 249
    single = build_view([user(text("what?"), IMAGE)], path="bridged", slots=SLOTS)
    # 249 one-line references, not 249 more evidence blocks.
    assert view.evidence_tokens - single.evidence_tokens == 249 * 10


def test_avoided_tokens_are_the_difference_pointers_made() -> None:
    messages = [
        user(text("What is the total?"), IMAGE),
        {"role": "assistant", "content": "64.03"},
        user(text("And the tax?")),
    ]
    pointer = build_view(messages, path="bridged", slots=SLOTS, history_evidence="pointer")
    full = build_view(messages, path="bridged", slots=SLOTS, history_evidence="full")
    assert pointer.avoided_tokens == full.evidence_tokens - pointer.evidence_tokens > 0
    assert full.avoided_tokens == 0


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
    fitted, omitted = fit(build_view(messages, path="text").messages, 1200)
    roles = [m["role"] for m in fitted]
    assert roles[0] == "system"
    assert fitted[-1] == {"role": "user", "content": "latest question"}
    assert "tool" not in roles  # the tool result left with its call
    assert omitted >= 3
    assert "left out" in fitted[1]["content"]


def _pixel_exchange() -> list[dict[str, Any]]:
    """A turn whose MCP tool brought an image delivered as pixels, then a new question."""
    shot = {"id": "tool-img-1", **{k: v for k, v in IMAGE.items() if k != "type"},
            "pixels": True}
    return [
        user(text("take a picture")),
        {"role": "assistant", "content": "", "reasoning": "r",
         "tool_calls": [{"id": "c1", "name": "mcp__cam__shot", "arguments": "{}"}],
         "internal": True},
        {"role": "tool", "tool_call_id": "c1", "name": "mcp__cam__shot", "internal": True,
         "content": "[tool-img-1: the tool's image, 900x700 image/png, attached as pixels]",
         "images": [shot]},
        {"role": "assistant", "content": "a receipt", "reasoning": "r2"},
        user(text("and now?")),
    ]


def test_an_earlier_pixel_image_is_a_reference_on_every_path() -> None:
    messages = _pixel_exchange()
    for path in ("text", "native"):
        view = build_view(messages, path=path, image_bytes={}, thinking="enabled")
        tool = view.messages[2]
        content = tool["content"]
        joined = content if isinstance(content, str) else " ".join(
            p["text"] for p in content if p["type"] == "text")
        assert "call look with image tool-img-1" in joined, path
        assert "image_url" not in str(content), path
        # The exchange called a tool: both its assistant messages carry their reasoning.
        assert [m.get("reasoning_content") for m in view.messages
                if m["role"] == "assistant"] == ["r", "r2"]


def test_a_bridged_view_puts_a_pixel_images_evidence_after_the_result() -> None:
    view = build_view(_pixel_exchange(), path="bridged",
                      slots={IMAGE["sha256"]: EvidenceSlot(
                          "tool-img-1", IMAGE, "local", "cd" * 32, EVIDENCE)})
    tool = view.messages[3]  # after the bridge's system prompt
    assert tool["role"] == "tool"
    assert tool["content"].startswith("[tool-img-1: the tool's image")
    assert "TOTAL 64.03" in tool["content"]


def test_the_current_exchanges_tool_images_go_as_pixels() -> None:
    messages = _pixel_exchange()[:3]
    view = build_view(messages, path="native", image_bytes={IMAGE["sha256"]: b"\x89PNG\r\n\x1a\nx"})
    content = view.messages[2]["content"]
    assert [p["type"] for p in content] == ["text", "image_url"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert [i.sha256 for i in view.pixels] == [IMAGE["sha256"]]


def _long_history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 4 == 0:
            out.append({"role": "user", "content": f"q{i}"})
        elif i % 4 == 1:
            out.append({"role": "assistant", "content": "", "reasoning": f"r{i}",
                        "tool_calls": [{"id": f"c{i}", "name": "f", "arguments": "{}"}]})
        elif i % 4 == 2:
            out.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": "x" * i})
        else:
            out.append({"role": "assistant", "content": f"a{i}", "reasoning": f"r{i}"})
    return out


@pytest.mark.parametrize("thinking", ["enabled", "disabled", None])
def test_a_view_memo_changes_no_view_and_renders_each_message_once(thinking: Any) -> None:
    history = _long_history(40)
    memo = ViewMemo()
    plain = build_view(history, path="text", thinking=thinking)
    first = build_view(history, path="text", thinking=thinking, memo=memo)
    assert first.messages == plain.messages
    # The next turn: the same stored messages and a new one. Each earlier rendering is
    # the same object again, and the new exchange's reasoning follows the same rules.
    longer = [*history, {"role": "user", "content": "next"}]
    second = build_view(longer, path="text", thinking=thinking, memo=memo)
    assert second.messages == build_view(longer, path="text", thinking=thinking).messages
    assert all(a is b for a, b in zip(first.messages, second.messages, strict=False))
    # Its costs are the budget's own estimate, and the fitted request is the same.
    assert [memo.cost(m) for m in second.messages] == [
        message_tokens(m) for m in second.messages]
    assert fit(second.messages, 200, memo.costs) == fit(second.messages, 200)
    # The costs of the next request: the shared head taken as counted, the rest counted.
    changed = [*second.messages[:-1], {"role": "user", "content": "x"}]
    assert memo.costs(changed) == [message_tokens(m) for m in changed]
    # A message that is not one of its renderings is counted as it is, every time.
    other = {"role": "user", "content": "not rendered here"}
    assert memo.cost(other) == message_tokens(other)


def test_a_view_memo_is_bounded() -> None:
    memo = ViewMemo(limit=10)
    history = _long_history(25)
    view = build_view(history, path="text", thinking="enabled", memo=memo)
    assert view.messages == build_view(history, path="text", thinking="enabled").messages
    assert len(memo._plain) <= 10


def test_carries_images_sees_parts_and_attached_pixels_only() -> None:
    assert not carries_images({"role": "user", "content": "hi"})
    assert carries_images(user(text("look"), IMAGE))
    assert not carries_images({"role": "assistant", "content": [IMAGE]})
    assert carries_images({"role": "tool", "tool_call_id": "c", "content": "shot",
                           "images": [{"id": "tool-img-1", "pixels": True, **IMAGE}]})
    assert not carries_images({"role": "tool", "tool_call_id": "c", "content": "shot",
                               "images": [{"id": "tool-img-1", **IMAGE}]})


def test_a_text_view_renders_only_what_follows_the_closed_exchanges() -> None:
    memo = ViewMemo()
    history = _long_history(30)
    for turn in range(4):  # a conversation that grows, as a session's log does
        history = [*history, {"role": "user", "content": f"turn {turn}"},
                   {"role": "assistant", "content": "", "reasoning": "t",
                    "tool_calls": [{"id": f"t{turn}", "name": "f", "arguments": "{}"}]},
                   {"role": "tool", "tool_call_id": f"t{turn}", "content": "r"}]
        for thinking in ("enabled", None):
            assert build_view(history, path="text", thinking=thinking, memo=memo).messages \
                == build_view(history, path="text", thinking=thinking).messages
    # An earlier message edited (another object, other content): rendered again.
    edited = [*history]
    edited[3] = {"role": "assistant", "content": "edited", "reasoning": "r3"}
    assert build_view(edited, path="text", thinking="enabled", memo=memo).messages \
        == build_view(edited, path="text", thinking="enabled").messages
    # An image in what is new: not a plain text view; the whole view is built.
    with_image = [*history, user(text("and this?"), IMAGE)]
    view = build_view(with_image, path="text", thinking="enabled", memo=memo)
    assert view.messages == build_view(with_image, path="text", thinking="enabled").messages
