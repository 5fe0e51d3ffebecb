"""Canonicalization: selection by contract, known-structure repairs, bounds, no mutation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.evidence.canonical import (
    BOX_CONVENTIONS,
    MAX_TEXT_BYTES,
    REPAIR_KINDS,
    Canonicalized,
    Repair,
    canonicalize,
)
from deepseek_eyes.vision.evidence.gate import require_valid, validate_evidence
from deepseek_eyes.vision.types import Variant

IMAGE = (200, 100)


def target(answer: str = "final", **fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "schema": "deepseekeyes.target.v1",
        "answer": answer,
        "confidence": 0.9,
        "observations": [],
        "ocr": [],
        "uncertainties": [],
    }
    value.update(fields)
    return value


def evidence(**fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "schema": "deepseekeyes.evidence.v1",
        "summary": "a chart",
        "ocr": [],
        "regions": [],
        "objects": [],
        "relations": [],
        "quantitative_facts": [],
        "uncertainties": [],
    }
    value.update(fields)
    return value


def ocr_line(bbox: Any, confidence: Any = 0.9) -> dict[str, Any]:
    return {"text": "Total", "bbox": bbox, "confidence": confidence}


def box_repair(bbox: Any, convention: str = "auto", size: Any = IMAGE) -> Canonicalized:
    return canonicalize(
        target(ocr=[ocr_line(bbox)]), Variant.TARGET, image_size=size, box_convention=convention
    )


def kinds(result: Canonicalized) -> list[str]:
    return [repair.kind for repair in result.repairs]


# ------------------------------------------------------------------------------ selection


def test_a_valid_object_passes_through_untouched() -> None:
    result = canonicalize(json.dumps(target()), Variant.TARGET)

    assert result == Canonicalized(target(), ())


def test_reasoning_prose_and_two_objects_select_the_last_for_the_contract() -> None:
    text = (
        "<think>The user wants the total. Draft: "
        + json.dumps(target("thinking draft"))
        + " hmm, let me check again.</think>\n"
        + "Here is my first attempt: "
        + json.dumps(target("draft"))
        + "\nOn reflection, the final answer is:\n"
        + json.dumps(target("final"))
        + "\nHope this helps {not json}."
    )

    result = canonicalize(text, Variant.TARGET)

    assert result.value == target("final")
    assert result.repairs == (
        Repair("reasoning_stripped", "", "1 block"),
        Repair("object_selected", "", "2 of 2 candidates"),
    )


def test_an_untagged_reasoning_prefix_is_stripped() -> None:
    text = (
        "reasoning with a draft " + json.dumps(target("draft")) + "</think>" + json.dumps(target())
    )

    result = canonicalize(text, Variant.TARGET)

    assert result.value == target()
    assert result.repairs == (Repair("reasoning_stripped", "", "untagged prefix"),)


def test_an_unterminated_think_loses_its_tag_and_the_last_object_wins() -> None:
    text = "<think>maybe " + json.dumps(target("draft")) + " no: " + json.dumps(target())

    result = canonicalize(text, Variant.TARGET)

    assert result.value == target()
    assert result.repairs == (
        Repair("reasoning_stripped", "", "unterminated block"),
        Repair("object_selected", "", "2 of 2 candidates"),
    )


def test_fenced_json_is_unwrapped() -> None:
    text = "Sure! Here it is:\n```json\n" + json.dumps(target(), indent=2) + "\n```\nDone."

    result = canonicalize(text, Variant.TARGET)

    assert result.value == target()
    assert result.repairs == (Repair("code_fence_unwrapped", "", "json"),)


def test_a_bare_fence_is_unwrapped_with_an_empty_tag() -> None:
    result = canonicalize("```\n" + json.dumps(target()) + "\n```", Variant.TARGET)

    assert result.repairs == (Repair("code_fence_unwrapped", "", ""),)


def test_a_declared_object_beats_a_later_undeclared_one() -> None:
    undeclared = target("undeclared")
    del undeclared["schema"]
    text = json.dumps(target("declared")) + " " + json.dumps(undeclared)

    result = canonicalize(text, Variant.TARGET)

    assert result.value["answer"] == "declared"
    assert result.repairs == (Repair("object_selected", "", "1 of 2 candidates"),)


def test_the_selection_detail_counts_every_candidate() -> None:
    text = " ".join(json.dumps(v) for v in ({"a": 1}, target("one"), {"b": 2}, target(), {}))

    result = canonicalize(text, Variant.TARGET)

    assert result.value == target()
    assert result.repairs == (Repair("object_selected", "", "4 of 5 candidates"),)


def test_the_other_variants_object_is_never_chosen() -> None:
    text = json.dumps(evidence()) + "\n" + json.dumps(target()) + "\n" + json.dumps(evidence())

    assert canonicalize(text, Variant.TARGET).value == target()
    with pytest.raises(EvidenceError) as caught:
        canonicalize(json.dumps(target()), Variant.EVIDENCE)
    assert caught.value.code == "EVIDENCE_NOT_FOUND"
    with pytest.raises(EvidenceError):
        canonicalize(target(), Variant.EVIDENCE)


def test_an_undeclared_object_needs_two_of_the_variants_fields() -> None:
    with pytest.raises(EvidenceError) as caught:
        canonicalize('{"answer": "yes", "note": 1}', Variant.TARGET)

    assert caught.value.code == "EVIDENCE_NOT_FOUND"
    assert caught.value.details == {
        "variant": "deepseekeyes.target.v1",
        "reason": "no_candidate",
        "candidates": 1,
    }


@pytest.mark.parametrize(
    "text",
    ["", "I cannot see any image.", "{not json at all}", "[1, 2, 3]", '"a string"'],
)
def test_no_json_object_is_evidence_not_found(text: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        canonicalize(text, Variant.EVIDENCE)

    assert caught.value.code == "EVIDENCE_NOT_FOUND"


def test_an_object_inside_an_array_is_found() -> None:
    assert canonicalize(f"[{json.dumps(target())}]", Variant.TARGET).value == target()


def test_an_oversized_answer_is_refused_before_parsing() -> None:
    with pytest.raises(EvidenceError) as caught:
        canonicalize("x" * (MAX_TEXT_BYTES + 1), Variant.TARGET)

    assert caught.value.code == "EVIDENCE_NOT_FOUND"
    assert caught.value.details["reason"] == "too_large"
    assert caught.value.details["bytes"] == MAX_TEXT_BYTES + 1


@pytest.mark.parametrize(
    "text",
    [
        "{" * (1 << 20),
        '{"' * (1 << 19),
        '{"a":' * 200_000,
        '{"a":' + "[" * (1 << 20),
        ('{"a":' * 500 + "[" + "1," * 400_000),
        "{}" * (1 << 19),
    ],
    ids=["braces", "brace-quote", "deep-objects", "deep-arrays", "nested-long", "empties"],
)
def test_pathological_text_finishes(text: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        canonicalize(text, Variant.TARGET)

    assert caught.value.code == "EVIDENCE_NOT_FOUND"


def test_a_deep_structured_answer_is_refused() -> None:
    deep: dict[str, Any] = target()
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]

    with pytest.raises(EvidenceError) as caught:
        canonicalize(deep, Variant.TARGET)

    assert caught.value.details["reason"] == "too_deep"


def test_an_unknown_box_convention_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="box convention"):
        canonicalize(target(), Variant.TARGET, box_convention="xyxy")


# -------------------------------------------------------------------- structural repairs


def test_schema_added_to_an_undeclared_matching_object() -> None:
    undeclared = target()
    del undeclared["schema"]

    result = canonicalize(json.dumps(undeclared), Variant.TARGET)

    assert result.value == target()
    assert next(iter(result.value)) == "schema"
    assert result.repairs == (Repair("schema_added", "/schema"),)


def test_array_added_for_missing_or_null_top_level_arrays() -> None:
    value = target()
    del value["observations"]
    value["uncertainties"] = None

    result = canonicalize(value, Variant.TARGET)

    assert result.value == target()
    assert result.repairs == (
        Repair("array_added", "/observations"),
        Repair("array_added", "/uncertainties"),
    )


def test_array_added_for_missing_or_null_object_attributes() -> None:
    obj = {"id": "o1", "label": "cup", "bbox": [0.25, 0.25, 0.5, 0.5], "confidence": 0.8}
    value = evidence(objects=[dict(obj), {**obj, "id": "o2", "attributes": None}])

    result = canonicalize(value, Variant.EVIDENCE)

    assert [o["attributes"] for o in result.value["objects"]] == [[], []]
    assert result.repairs == (
        Repair("array_added", "/objects/0/attributes"),
        Repair("array_added", "/objects/1/attributes"),
    )
    require_valid(result.value, Variant.EVIDENCE)


def test_numeric_strings_become_numbers_in_numeric_fields_only() -> None:
    fact = {
        "label": "total",
        "value": "42",
        "unit": "USD",
        "text": "42",
        "bbox": ["0.25", "0.5", "0.5", "0.25"],
        "confidence": " 0.93 ",
    }
    value = evidence(quantitative_facts=[fact])

    result = canonicalize(value, Variant.EVIDENCE)

    assert result.value["quantitative_facts"][0] == {
        "label": "total",
        "value": 42,
        "unit": "USD",
        "text": "42",
        "bbox": [0.25, 0.5, 0.5, 0.25],
        "confidence": 0.93,
    }
    assert result.repairs == (
        Repair("numeric_string", "/quantitative_facts/0/value"),
        Repair("numeric_string", "/quantitative_facts/0/confidence"),
        Repair("numeric_string", "/quantitative_facts/0/bbox/0"),
        Repair("numeric_string", "/quantitative_facts/0/bbox/1"),
        Repair("numeric_string", "/quantitative_facts/0/bbox/2"),
        Repair("numeric_string", "/quantitative_facts/0/bbox/3"),
    )


def test_numeric_string_for_the_targets_own_confidence() -> None:
    result = canonicalize(target(confidence="0.75"), Variant.TARGET)

    assert result.value["confidence"] == 0.75
    assert result.repairs == (Repair("numeric_string", "/confidence"),)


@pytest.mark.parametrize("text", ["93%", "0.9 (high)", "nan", "inf", "1_000", "1e999", "", "٣"])
def test_numeric_string_never_guesses(text: str) -> None:
    result = canonicalize(target(confidence=text), Variant.TARGET)

    assert result.value["confidence"] == text
    assert result.repairs == ()


# --------------------------------------------------------------------------- box repairs


def test_bbox_pixels_to_normalized_in_auto_when_xywh_fits() -> None:
    result = box_repair([20, 10, 40, 30])

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.1, 0.2, 0.3]
    assert result.repairs == (Repair("bbox_pixels_to_normalized", "/ocr/0/bbox", "200x100"),)


def test_bbox_corners_to_xywh_in_auto_when_only_corners_fit() -> None:
    result = box_repair([120, 10, 180, 90])

    assert result.value["ocr"][0]["bbox"] == [0.6, 0.1, 0.3, 0.8]
    assert result.repairs == (
        Repair("bbox_corners_to_xywh", "/ocr/0/bbox"),
        Repair("bbox_pixels_to_normalized", "/ocr/0/bbox", "200x100"),
    )


def test_auto_leaves_normalized_boxes_alone() -> None:
    assert box_repair([0.25, 0.5, 0.5, 0.25]).repairs == ()


def test_auto_without_image_size_leaves_large_numbers_for_the_gate() -> None:
    result = box_repair([20, 10, 40, 30], size=None)

    assert result.value["ocr"][0]["bbox"] == [20, 10, 40, 30]
    assert result.repairs == ()
    assert ("/ocr/0/bbox/0", "maximum") in [
        (i.pointer, i.keyword) for i in validate_evidence(result.value, Variant.TARGET)
    ]


def test_auto_leaves_a_box_that_fits_neither_reading() -> None:
    result = box_repair([150, 10, 100, 95])  # neither x+w <= 200 nor x2 > x1

    assert result.value["ocr"][0]["bbox"] == [150, 10, 100, 95]
    assert result.repairs == ()


def test_xyxy_pixels_applies_exactly() -> None:
    result = box_repair([20, 10, 60, 40], convention="xyxy-pixels")

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.1, 0.2, 0.3]
    assert kinds(result) == ["bbox_corners_to_xywh", "bbox_pixels_to_normalized"]


def test_bbox_scale_1000_for_qwen_style_xyxy() -> None:
    result = box_repair([100, 200, 300, 600], convention="xyxy-1000")

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.2, 0.2, 0.4]
    assert result.repairs == (
        Repair("bbox_corners_to_xywh", "/ocr/0/bbox"),
        Repair("bbox_scale_1000", "/ocr/0/bbox"),
    )


def test_bbox_yxyx_to_xywh_for_gemini_style_boxes() -> None:
    result = box_repair([200, 100, 600, 300], convention="yxyx-1000")

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.2, 0.2, 0.4]
    assert result.repairs == (
        Repair("bbox_yxyx_to_xywh", "/ocr/0/bbox"),
        Repair("bbox_scale_1000", "/ocr/0/bbox"),
    )


def test_xywh_normalized_never_guesses() -> None:
    result = box_repair([20, 10, 40, 30], convention="xywh-normalized")

    assert result.value["ocr"][0]["bbox"] == [20, 10, 40, 30]
    assert result.repairs == ()


def test_bbox_quad_to_xywh() -> None:
    quad = [[0.25, 0.5], [0.75, 0.5], [0.75, 0.75], [0.25, 0.75]]

    result = box_repair(quad)

    assert result.value["ocr"][0]["bbox"] == [0.25, 0.5, 0.5, 0.25]
    assert result.repairs == (Repair("bbox_quad_to_xywh", "/ocr/0/bbox"),)


def test_a_pixel_quad_is_normalized_too() -> None:
    result = box_repair([[20, 10], [60, 10], [60, 40], [20, 40]])

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.1, 0.2, 0.3]
    assert kinds(result) == ["bbox_quad_to_xywh", "bbox_pixels_to_normalized"]


@pytest.mark.parametrize(
    "box",
    [
        {"x": 0.25, "y": 0.5, "w": 0.5, "h": 0.25},
        {"x": 0.25, "y": 0.5, "width": 0.5, "height": 0.25},
        {"left": 0.25, "top": 0.5, "width": 0.5, "height": 0.25},
    ],
)
def test_bbox_object_to_list_for_xywh_mappings(box: dict[str, float]) -> None:
    result = box_repair(box)

    assert result.value["ocr"][0]["bbox"] == [0.25, 0.5, 0.5, 0.25]
    assert result.repairs == (Repair("bbox_object_to_list", "/ocr/0/bbox", ",".join(box)),)


@pytest.mark.parametrize(
    "box",
    [
        {"x1": 0.25, "y1": 0.5, "x2": 0.75, "y2": 0.75},
        {"xmin": 0.25, "ymin": 0.5, "xmax": 0.75, "ymax": 0.75},
        {"left": 0.25, "top": 0.5, "right": 0.75, "bottom": 0.75},
    ],
)
def test_bbox_object_to_list_for_corner_mappings(box: dict[str, float]) -> None:
    result = box_repair(box)

    assert result.value["ocr"][0]["bbox"] == [0.25, 0.5, 0.5, 0.25]
    assert result.repairs == (
        Repair("bbox_object_to_list", "/ocr/0/bbox", ",".join(box)),
        Repair("bbox_corners_to_xywh", "/ocr/0/bbox"),
    )


def test_a_pixel_mapping_is_normalized_in_auto() -> None:
    result = box_repair({"x": "20", "y": 10, "width": 40, "height": 30})

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.1, 0.2, 0.3]
    assert result.repairs == (
        Repair("numeric_string", "/ocr/0/bbox/x"),
        Repair("bbox_object_to_list", "/ocr/0/bbox", "x,y,width,height"),
        Repair("bbox_pixels_to_normalized", "/ocr/0/bbox", "200x100"),
    )


def test_a_mapping_with_an_extra_key_is_left_for_the_gate() -> None:
    box = {"x": 0.25, "y": 0.5, "w": 0.5, "h": 0.25, "unit": "px"}

    result = box_repair(box)

    assert result.value["ocr"][0]["bbox"] == box
    assert result.repairs == ()


def test_bbox_clamped_when_it_overflows_by_at_most_one_percent() -> None:
    result = box_repair([0.5, 0.5, 0.505, 0.25])

    assert result.value["ocr"][0]["bbox"] == [0.5, 0.5, 0.5, 0.25]
    assert result.repairs == (Repair("bbox_clamped", "/ocr/0/bbox"),)


def test_bbox_clamped_on_the_near_edge() -> None:
    result = box_repair([-0.0078125, 0.25, 0.5, 0.25])

    assert result.value["ocr"][0]["bbox"] == [0.0, 0.25, 0.4921875, 0.25]
    assert kinds(result) == ["bbox_clamped"]


def test_a_box_overflowing_by_more_is_left_for_the_gate() -> None:
    result = box_repair([0.5, 0.5, 0.52, 0.25])

    assert result.value["ocr"][0]["bbox"] == [0.5, 0.5, 0.52, 0.25]
    assert result.repairs == ()
    with pytest.raises(EvidenceError) as caught:
        require_valid(result.value, Variant.TARGET)
    assert caught.value.details["errors"][0]["pointer"] == "/ocr/0/bbox"


def test_a_converted_box_can_be_clamped_too() -> None:
    result = box_repair([100, 200, 1005, 600], convention="xyxy-1000")

    assert result.value["ocr"][0]["bbox"] == [0.1, 0.2, 0.9, 0.4]
    assert kinds(result) == ["bbox_corners_to_xywh", "bbox_scale_1000", "bbox_clamped"]


def test_nullable_boxes_stay_null_and_are_repaired_when_present() -> None:
    value = target(
        observations=[
            {"text": "a", "bbox": None, "confidence": 0.5},
            {"text": "b", "bbox": [100, 200, 300, 600], "confidence": 0.5},
        ],
        uncertainties=[{"topic": "c", "reason": "d", "bbox": [100, 200, 300, 600]}],
    )

    result = canonicalize(value, Variant.TARGET, box_convention="xyxy-1000")

    assert result.value["observations"][0]["bbox"] is None
    assert result.value["observations"][1]["bbox"] == [0.1, 0.2, 0.2, 0.4]
    assert result.value["uncertainties"][0]["bbox"] == [0.1, 0.2, 0.2, 0.4]
    assert {r.pointer for r in result.repairs} == {"/observations/1/bbox", "/uncertainties/0/bbox"}


# ------------------------------------------------------------------ the gate still rules


def test_an_extra_nested_field_survives_and_then_fails_the_gate() -> None:
    line = {**ocr_line(["0.1", 0.1, 0.2, 0.2]), "language": "en"}
    text = "```json\n" + json.dumps(target(ocr=[line])) + "\n```"

    result = canonicalize(text, Variant.TARGET)

    assert result.value["ocr"][0]["language"] == "en"
    with pytest.raises(EvidenceError) as caught:
        require_valid(result.value, Variant.TARGET)
    assert caught.value.code == "EVIDENCE_SCHEMA_INVALID"
    assert [e["pointer"] for e in caught.value.details["errors"]] == ["/ocr/0/language"]


def test_unknown_fields_are_never_renamed_or_dropped() -> None:
    value = evidence(caption="x", ocr=None)
    value["regions"] = [{"id": "r1", "type": "table"}]

    result = canonicalize(value, Variant.EVIDENCE)

    assert result.value["caption"] == "x"
    assert result.value["regions"] == [{"id": "r1", "type": "table"}]
    assert kinds(result) == ["array_added"]


def test_a_messy_answer_is_repaired_into_valid_evidence() -> None:
    raw = {
        "summary": "A bar chart",
        "ocr": [{"text": "Sales", "bbox": [100, 50, 400, 120], "confidence": "0.9"}],
        "regions": [
            {
                "id": "r1",
                "kind": "chart",
                "label": "chart",
                "bbox": [50, 150, 950, 950],
                "confidence": 0.8,
            }
        ],
        "objects": None,
        "quantitative_facts": [
            {
                "label": "Q1",
                "value": "12.5",
                "unit": "%",
                "text": "12.5%",
                "bbox": None,
                "confidence": 0.7,
            }
        ],
    }
    text = "<think>let me look</think>\n```json\n" + json.dumps(raw) + "\n```"

    result = canonicalize(text, Variant.EVIDENCE, image_size=IMAGE, box_convention="xyxy-1000")

    assert require_valid(result.value, Variant.EVIDENCE) is result.value
    assert result.value["ocr"][0]["bbox"] == [0.1, 0.05, 0.3, 0.07]
    assert kinds(result)[:4] == [
        "reasoning_stripped",
        "code_fence_unwrapped",
        "schema_added",
        "array_added",
    ]
    assert all(r.detail in {"", "1 block", "json"} for r in result.repairs)


def test_the_input_is_never_mutated() -> None:
    raw = {
        "answer": "x",
        "confidence": "0.5",
        "ocr": [ocr_line({"x": 20, "y": 10, "w": 40, "h": 30}, "0.9")],
        "observations": None,
    }
    before = copy.deepcopy(raw)

    result = canonicalize(raw, Variant.TARGET, image_size=IMAGE)

    assert raw == before
    assert result.value is not raw
    assert result.value["ocr"][0] is not raw["ocr"][0]
    assert result.value["ocr"][0]["bbox"] == [0.1, 0.1, 0.2, 0.3]


def test_repair_kinds_and_conventions_are_the_published_names() -> None:
    assert set(REPAIR_KINDS) == {
        "reasoning_stripped",
        "code_fence_unwrapped",
        "object_selected",
        "schema_added",
        "array_added",
        "numeric_string",
        "bbox_object_to_list",
        "bbox_quad_to_xywh",
        "bbox_yxyx_to_xywh",
        "bbox_corners_to_xywh",
        "bbox_scale_1000",
        "bbox_pixels_to_normalized",
        "bbox_clamped",
    }
    assert BOX_CONVENTIONS == ("auto", "xywh-normalized", "xyxy-pixels", "xyxy-1000", "yxyx-1000")
    assert Repair("array_added", "/ocr").to_dict() == {
        "kind": "array_added",
        "pointer": "/ocr",
        "detail": "",
    }
