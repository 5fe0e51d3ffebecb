"""The strict gate: the schema file, the semantic checks, pointers and prompt schemas."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.evidence.gate import (
    MAX_ISSUES,
    SCHEMA_ID,
    SchemaIssue,
    prompt_schema,
    require_valid,
    schema_document,
    validate_evidence,
)
from deepseek_eyes.vision.types import Variant

EVIDENCE_ONLY_FIELDS = {"summary", "regions", "objects", "relations", "quantitative_facts"}
TARGET_ONLY_FIELDS = {"answer", "observations"}


def valid_evidence() -> dict[str, Any]:
    return {
        "schema": "deepseekeyes.evidence.v1",
        "summary": "An invoice with a total and a company logo.",
        "ocr": [
            {"text": "INVOICE", "bbox": [0.1, 0.05, 0.3, 0.05], "confidence": 0.98},
            {"text": "Total: 42.50 USD", "bbox": [0.1, 0.8, 0.5, 0.05], "confidence": 0.9},
        ],
        "regions": [
            {
                "id": "r1",
                "kind": "text_block",
                "label": "header",
                "bbox": [0.0, 0.0, 1.0, 0.2],
                "confidence": 0.95,
            },
            {
                "id": "r2",
                "kind": "table",
                "label": "line items",
                "bbox": [0.05, 0.3, 0.9, 0.4],
                "confidence": 0.8,
            },
        ],
        "objects": [
            {
                "id": "o1",
                "label": "logo",
                "bbox": [0.7, 0.02, 0.25, 0.15],
                "confidence": 0.7,
                "attributes": ["blue", "round"],
            }
        ],
        "relations": [
            {"subject": "o1", "predicate": "inside", "object": "r1", "confidence": 0.9},
        ],
        "quantitative_facts": [
            {
                "label": "total",
                "value": 42.5,
                "unit": "USD",
                "text": "42.50 USD",
                "bbox": [0.3, 0.8, 0.2, 0.05],
                "confidence": 0.9,
            },
            {
                "label": "pages",
                "value": 1,
                "unit": "",
                "text": "1",
                "bbox": None,
                "confidence": 0.6,
            },
        ],
        "uncertainties": [
            {"topic": "footer", "reason": "blurred", "bbox": [0.0, 0.95, 1.0, 0.05]},
            {"topic": "date", "reason": "not visible", "bbox": None},
        ],
    }


def valid_target() -> dict[str, Any]:
    return {
        "schema": "deepseekeyes.target.v1",
        "answer": "The total is 42.50 USD.",
        "confidence": 0.9,
        "observations": [
            {
                "text": "The total line reads 42.50 USD",
                "bbox": [0.1, 0.8, 0.5, 0.05],
                "confidence": 0.9,
            },
            {"text": "No other totals are shown", "bbox": None, "confidence": 0.7},
        ],
        "ocr": [{"text": "Total: 42.50 USD", "bbox": [0.1, 0.8, 0.5, 0.05], "confidence": 0.9}],
        "uncertainties": [],
    }


def pointers(issues: list[SchemaIssue]) -> list[tuple[str, str]]:
    return [(issue.pointer, issue.keyword) for issue in issues]


def test_valid_evidence_passes() -> None:
    assert validate_evidence(valid_evidence(), Variant.EVIDENCE) == []


def test_valid_target_passes() -> None:
    assert validate_evidence(valid_target(), Variant.TARGET) == []


def test_each_variant_refuses_the_other() -> None:
    issues = validate_evidence(valid_evidence(), Variant.TARGET)
    assert ("/schema", "const") in pointers(issues)
    assert ("/summary", "additionalProperties") in pointers(issues)
    assert ("/answer", "required") in pointers(issues)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.strip("/").split("/")]
        node: Any = doc
        for part in parents:
            node = node[part]
        node[last] = value

    return mutate


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.strip("/").split("/")]
        node: Any = doc
        for part in parents:
            node = node[part]
        del node[last]

    return mutate


@pytest.mark.parametrize(
    ("mutate", "pointer", "keyword"),
    [
        pytest.param(_set("/extra", 1), "/extra", "additionalProperties", id="extra-top-level"),
        pytest.param(
            _set("/ocr/0/language", "en"),
            "/ocr/0/language",
            "additionalProperties",
            id="extra-in-ocr-line",
        ),
        pytest.param(
            _set("/regions/1/color", "red"),
            "/regions/1/color",
            "additionalProperties",
            id="extra-in-region",
        ),
        pytest.param(
            _set("/quantitative_facts/0/currency", "USD"),
            "/quantitative_facts/0/currency",
            "additionalProperties",
            id="extra-in-quantity",
        ),
        pytest.param(
            _delete("/ocr/1/confidence"), "/ocr/1/confidence", "required", id="missing-nested"
        ),
        pytest.param(_delete("/regions"), "/regions", "required", id="missing-top-level"),
        pytest.param(
            _set("/schema", "deepseekeyes.evidence.v2"), "/schema", "const", id="wrong-schema-const"
        ),
        pytest.param(
            _set("/ocr/0/confidence", 1.2), "/ocr/0/confidence", "maximum", id="confidence-above-1"
        ),
        pytest.param(
            _set("/ocr/0/bbox", [0.1, 0.1, 0, 0.2]),
            "/ocr/0/bbox/2",
            "exclusiveMinimum",
            id="bbox-zero-width",
        ),
        pytest.param(
            _set("/regions/0/bbox", [1.5, 0.0, 0.1, 0.1]),
            "/regions/0/bbox/0",
            "maximum",
            id="bbox-x-out-of-range",
        ),
        pytest.param(
            _set("/objects/0/bbox", [0.1, -0.1, 0.1, 0.1]),
            "/objects/0/bbox/1",
            "minimum",
            id="bbox-y-negative",
        ),
        pytest.param(
            _set("/ocr/0/bbox", [0.1, 0.1, 0.2]), "/ocr/0/bbox", "minItems", id="bbox-three-numbers"
        ),
        pytest.param(
            _set("/ocr/0/bbox", [0.8, 0.1, 0.3, 0.2]),
            "/ocr/0/bbox",
            "bbox_containment",
            id="bbox-not-contained",
        ),
        pytest.param(
            _set("/uncertainties/0/bbox", [0.1, 0.9, 0.2, 0.2]),
            "/uncertainties/0/bbox",
            "bbox_containment",
            id="nullable-bbox-contained",
        ),
        pytest.param(
            _set("/uncertainties/1/bbox", "top left"),
            "/uncertainties/1/bbox",
            "type",
            id="nullable-bbox-wrong-type",
        ),
        pytest.param(
            _set("/quantitative_facts/1/bbox", [0.1, 0.1, 0.0, 0.1]),
            "/quantitative_facts/1/bbox/2",
            "exclusiveMinimum",
            id="nullable-bbox-zero-width",
        ),
        pytest.param(
            _set("/regions/1/id", "r1"), "/regions/1/id", "duplicate_id", id="duplicate-id"
        ),
        pytest.param(
            _set("/regions/0/id", "region-1"), "/regions/0/id", "pattern", id="bad-id-pattern"
        ),
        pytest.param(
            _set("/regions/0/kind", "diagram"), "/regions/0/kind", "enum", id="unknown-region-kind"
        ),
        pytest.param(
            _set("/relations/0/object", "r9"),
            "/relations/0/object",
            "unknown_ref",
            id="unknown-relation-ref",
        ),
        pytest.param(
            _set("/quantitative_facts/0/value", float("nan")),
            "/quantitative_facts/0/value",
            "non_finite",
            id="nan",
        ),
        pytest.param(
            _set("/quantitative_facts/0/value", float("inf")),
            "/quantitative_facts/0/value",
            "non_finite",
            id="infinity",
        ),
        pytest.param(
            _set("/quantitative_facts/0/value", "42.5"),
            "/quantitative_facts/0/value",
            "type",
            id="numeric-string",
        ),
        pytest.param(
            _set("/objects/0/attributes", None), "/objects/0/attributes", "type", id="null-array"
        ),
        pytest.param(_set("/summary", ""), "/summary", "minLength", id="empty-summary"),
        pytest.param(
            _set("/ocr/0/text", "x" * 2001), "/ocr/0/text", "maxLength", id="ocr-text-too-long"
        ),
    ],
)
def test_strictness_reports_the_exact_pointer(
    mutate: Callable[[dict[str, Any]], None], pointer: str, keyword: str
) -> None:
    evidence = valid_evidence()
    mutate(evidence)

    issues = validate_evidence(evidence, Variant.EVIDENCE)

    assert (pointer, keyword) in pointers(issues), issues


def test_containment_runs_after_the_schema_passes_only() -> None:
    evidence = valid_evidence()
    evidence["ocr"][0]["bbox"] = [0.8, 0.1, 0.3, 0.2]
    evidence["extra"] = True

    assert pointers(validate_evidence(evidence, Variant.EVIDENCE)) == [
        ("/extra", "additionalProperties")
    ]


def test_containment_allows_float_rounding_on_the_edge() -> None:
    evidence = valid_evidence()
    evidence["ocr"][0]["bbox"] = [0.7, 0.1, 0.30000000001, 0.2]

    assert validate_evidence(evidence, Variant.EVIDENCE) == []


def test_target_refuses_an_extra_field_in_an_observation() -> None:
    target = valid_target()
    target["observations"][0]["region"] = "r1"

    assert pointers(validate_evidence(target, Variant.TARGET)) == [
        ("/observations/0/region", "additionalProperties")
    ]


def test_a_value_that_is_not_an_object_fails_at_the_root() -> None:
    assert pointers(validate_evidence(["not", "an", "object"], Variant.TARGET)) == [("", "type")]


def test_messages_never_echo_long_input() -> None:
    evidence = valid_evidence()
    evidence["schema"] = "s" * 10_000
    evidence["regions"][0]["kind"] = "k" * 10_000
    evidence["z" * 10_000] = 1

    issues = validate_evidence(evidence, Variant.EVIDENCE)

    assert {issue.keyword for issue in issues} == {
        "const",
        "enum",
        "maxLength",
        "additionalProperties",
    }
    assert all(len(issue.message) < 200 for issue in issues)


def test_issues_are_sorted_by_pointer_and_bounded() -> None:
    evidence = valid_evidence()
    line = {"text": "x", "bbox": [0.1, 0.1, 0.1, 0.1], "confidence": 2}
    evidence["ocr"] = [dict(line) for _ in range(300)]

    issues = validate_evidence(evidence, Variant.EVIDENCE)

    assert len(issues) == MAX_ISSUES
    assert [i.pointer for i in issues[:3]] == [
        "/ocr/0/confidence",
        "/ocr/1/confidence",
        "/ocr/2/confidence",
    ]
    assert issues[10].pointer == "/ocr/10/confidence"  # numeric, not lexicographic, order


def test_pointers_escape_slash_and_tilde() -> None:
    evidence = valid_evidence()
    evidence["a/b~c"] = 1

    assert pointers(validate_evidence(evidence, Variant.EVIDENCE)) == [
        ("/a~1b~0c", "additionalProperties")
    ]


def test_require_valid_returns_the_value_itself() -> None:
    evidence = valid_evidence()

    assert require_valid(evidence, Variant.EVIDENCE) is evidence


def test_require_valid_raises_schema_invalid_with_pointers() -> None:
    evidence = valid_evidence()
    evidence["ocr"][0]["confidence"] = 1.2
    evidence["regions"][0]["note"] = "x"

    with pytest.raises(EvidenceError) as caught:
        require_valid(evidence, Variant.EVIDENCE)

    error = caught.value
    assert error.code == "EVIDENCE_SCHEMA_INVALID"
    assert error.details["variant"] == "deepseekeyes.evidence.v1"
    assert error.details["errors"] == [
        {
            "pointer": "/ocr/0/confidence",
            "message": "1.2 is above the maximum 1",
            "keyword": "maximum",
        },
        {
            "pointer": "/regions/0/note",
            "message": 'unexpected property "note"',
            "keyword": "additionalProperties",
        },
    ]
    assert "/ocr/0/confidence" in error.message
    json.dumps(error.to_dict())  # the details travel as JSON


def test_schema_document_is_the_file_and_a_copy() -> None:
    document = schema_document()
    assert document["$id"] == SCHEMA_ID
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["oneOf"] == [{"$ref": "#/$defs/evidence"}, {"$ref": "#/$defs/target"}]
    Draft202012Validator.check_schema(document)

    document["$defs"].clear()

    assert schema_document()["$defs"]  # the cached document was not touched


def _subschemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for child in node.values():
            yield from _subschemas(child)
    elif isinstance(node, list):
        for child in node:
            yield from _subschemas(child)


def test_every_object_is_closed_and_every_field_required_and_bounded() -> None:
    schemas = list(_subschemas(schema_document()["$defs"]))
    objects = [s for s in schemas if s.get("type") == "object"]
    assert len(objects) == 9
    for schema in objects:
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) == set(schema["properties"])
    for schema in schemas:
        if schema.get("type") == "string" and "const" not in schema:
            assert "maxLength" in schema
        if schema.get("type") == "array":
            assert "maxItems" in schema


def test_the_whole_document_accepts_either_variant() -> None:
    validator = Draft202012Validator(schema_document())

    assert validator.is_valid(valid_evidence())
    assert validator.is_valid(valid_target())
    assert not validator.is_valid({**valid_target(), "summary": "both"})


@pytest.mark.parametrize(
    ("variant", "example", "foreign_fields", "foreign_const"),
    [
        (Variant.EVIDENCE, valid_evidence, TARGET_ONLY_FIELDS, "deepseekeyes.target.v1"),
        (Variant.TARGET, valid_target, EVIDENCE_ONLY_FIELDS, "deepseekeyes.evidence.v1"),
    ],
)
def test_prompt_schema_is_self_contained_and_variant_only(
    variant: Variant,
    example: Callable[[], dict[str, Any]],
    foreign_fields: set[str],
    foreign_const: str,
) -> None:
    text = prompt_schema(variant)
    schema = json.loads(text)

    Draft202012Validator.check_schema(schema)
    assert text == json.dumps(schema, ensure_ascii=False, separators=(",", ":"))  # compact
    assert schema["properties"]["schema"]["const"] == variant.value
    assert foreign_const not in text
    assert not foreign_fields & set(schema["properties"])
    for field in foreign_fields:
        assert f'"{field}"' not in text
    refs = {s["$ref"] for s in _subschemas(schema) if "$ref" in s}
    assert refs == {f"#/$defs/{name}" for name in schema["$defs"]}  # only what it uses
    validator = Draft202012Validator(schema)
    assert validator.is_valid(example())
    broken = copy.deepcopy(example())
    broken["ocr"][0]["extra"] = 1
    assert not validator.is_valid(broken)


def test_prompt_schema_is_cached() -> None:
    assert prompt_schema(Variant.TARGET) is prompt_schema(Variant.TARGET)
