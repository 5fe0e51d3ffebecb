"""The tools' ``outputSchema`` is the schema file's definition with its references spelled
out: it must accept and refuse exactly what the file does (a validating client checks
results against it), and carry no reference a client would have to resolve."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from deepseek_eyes.vision.evidence.gate import schema_document
from deepseek_eyes.vision.types import Variant
from deepseek_eyes.vision_server.schemas import output_schema
from vision.test_evidence import valid_evidence, valid_target

Change = Callable[[dict[str, Any]], None]


def _at(path: str, value: Any) -> Change:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.strip("/").split("/")]
        node: Any = doc
        for part in parents:
            node = node[part]
        node[last] = value

    return change


CHANGES: list[tuple[str, Variant, Change]] = [
    ("as is", Variant.EVIDENCE, lambda doc: None),
    ("as is", Variant.TARGET, lambda doc: None),
    ("extra key", Variant.EVIDENCE, _at("/extra", 1)),
    ("extra key in a line", Variant.EVIDENCE, _at("/ocr/0/language", "en")),
    ("zero width box", Variant.EVIDENCE, _at("/ocr/0/bbox", [0.1, 0.1, 0, 0.2])),
    ("five numbers box", Variant.EVIDENCE, _at("/ocr/0/bbox", [0.1, 0.1, 0.1, 0.1, 0.1])),
    ("null box of a number", Variant.EVIDENCE, _at("/quantitative_facts/0/bbox", None)),
    ("text box of a number", Variant.EVIDENCE, _at("/quantitative_facts/0/bbox", "here")),
    ("number box of a number", Variant.EVIDENCE, _at("/quantitative_facts/0/bbox", 0.5)),
    ("object box of a number", Variant.EVIDENCE, _at("/quantitative_facts/0/bbox", {})),
    ("empty box of a number", Variant.EVIDENCE, _at("/quantitative_facts/0/bbox", [])),
    ("three numbers box of a number", Variant.EVIDENCE,
     _at("/quantitative_facts/0/bbox", [0.1, 0.1, 0.1])),
    ("five numbers box of a number", Variant.EVIDENCE,
     _at("/quantitative_facts/0/bbox", [0.1, 0.1, 0.1, 0.1, 0.1])),
    ("strings box of a number", Variant.EVIDENCE,
     _at("/quantitative_facts/0/bbox", ["0", "0", "0.1", "0.1"])),
    ("zero height box of a number", Variant.EVIDENCE,
     _at("/quantitative_facts/0/bbox", [0.1, 0.1, 0.1, 0])),
    ("null box of an uncertainty", Variant.EVIDENCE, _at("/uncertainties/0/bbox", None)),
    ("box of nulls of an uncertainty", Variant.EVIDENCE,
     _at("/uncertainties/0/bbox", [None, None, None, None])),
    ("null box of a line", Variant.EVIDENCE, _at("/ocr/0/bbox", None)),
    ("bad region id", Variant.EVIDENCE, _at("/regions/0/id", "region-1")),
    ("unknown kind", Variant.EVIDENCE, _at("/regions/0/kind", "diagram")),
    ("bad relation ref", Variant.EVIDENCE, _at("/relations/0/object", "x9")),
    ("confidence over 1", Variant.EVIDENCE, _at("/ocr/0/confidence", 1.2)),
    ("string value", Variant.EVIDENCE, _at("/quantitative_facts/0/value", "42.5")),
    ("other variant's schema", Variant.EVIDENCE, _at("/schema", "deepseekeyes.target.v1")),
    ("extra key in an observation", Variant.TARGET, _at("/observations/0/note", "x")),
    ("null observation box", Variant.TARGET, _at("/observations/0/bbox", None)),
    ("text observation box", Variant.TARGET, _at("/observations/0/bbox", "there")),
    ("wide observation box", Variant.TARGET, _at("/observations/0/bbox", [0, 0, 1.5, 0.5])),
    ("empty answer", Variant.TARGET, _at("/answer", "")),
]


def _file_validator(variant: Variant) -> Draft202012Validator:
    document = schema_document()
    registry: Registry[Any] = Registry().with_resource(
        document["$id"], DRAFT202012.create_resource(document))
    return Draft202012Validator({"$ref": f"{document['$id']}#/$defs/{variant.short}"},
                                registry=registry)


@pytest.mark.parametrize(("name", "variant", "change"), CHANGES,
                         ids=[f"{v.short}: {n}" for n, v, _ in CHANGES])
def test_the_output_schema_judges_as_the_file_does(name: str, variant: Variant,
                                                   change: Change) -> None:
    doc = copy.deepcopy(valid_evidence() if variant is Variant.EVIDENCE else valid_target())
    change(doc)
    expected = _file_validator(variant).is_valid(doc)
    assert Draft202012Validator(output_schema(variant)).is_valid(doc) is expected
    refused_anyway = name == "null box of a line"  # a line's box is not optional
    assert expected is (name == "as is" or (name.startswith("null ") and not refused_anyway))


@pytest.mark.parametrize("variant", list(Variant))
def test_the_output_schema_needs_no_reference(variant: Variant) -> None:
    schema = output_schema(variant)
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert "$ref" not in json.dumps(schema)
    assert "$defs" not in schema
    assert "$id" not in schema
    assert Resource.from_contents(schema, default_specification=DRAFT202012).id() is None


def _descents(schema: dict[str, Any], doc: Any, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many subschemas ``jsonschema`` steps into to validate ``doc`` (its cost)."""
    steps = 0
    descend = Draft202012Validator.descend

    def counting(self: Draft202012Validator, *args: Any, **kwargs: Any) -> Any:
        nonlocal steps
        steps += 1
        return descend(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Draft202012Validator, "descend", counting)
        assert Draft202012Validator(schema, registry=Registry()).is_valid(doc)
    return steps


@pytest.mark.parametrize("variant", list(Variant))
def test_an_optional_box_is_one_schema(variant: Variant) -> None:
    """A box or null is checked without trying branches: ``anyOf`` stepped into the box
    branch for every box, and into both for a null one."""
    schema = json.dumps(output_schema(variant))
    assert "anyOf" not in schema
    assert "oneOf" not in schema
    assert '"type": ["array", "null"]' in schema


def test_a_validating_client_steps_once_per_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """One step per value of the evidence: its objects, their members and each box's four
    numbers, nothing more."""
    doc = valid_evidence()

    def values(node: Any) -> int:
        if isinstance(node, dict):
            return sum(1 + values(v) for v in node.values())
        if isinstance(node, list):
            return sum(1 + values(v) for v in node)
        return 0

    assert _descents(output_schema(Variant.EVIDENCE), doc, monkeypatch) == values(doc)
