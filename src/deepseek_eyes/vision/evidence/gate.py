"""The strict evidence gate: one schema file, compiled once, plus the checks it cannot say.

``schemas/visual-evidence.schema.json`` is the single source of truth. The gate compiles it
with ``jsonschema`` (Draft 2020-12) and :func:`prompt_schema` derives the text a model is
shown from the same file, so what we ask for and what we accept cannot drift apart.

Decisions a newcomer would otherwise undo:

* The gate never repairs anything. Tolerance lives in
  :mod:`deepseek_eyes.vision.evidence.canonical`,
  which runs before it and records every repair; here a value passes unchanged or fails.
* Checks JSON Schema cannot express (a box contained by the image, unique ids, relation ids
  that name something listed, finite numbers) run in this same gate and report JSON pointers
  like schema errors do, so a caller sees one list of issues, not two mechanisms.
* An issue points at the property at fault, even when that property is missing or
  unexpected (``/ocr/0/extra``, ``/ocr/0/confidence``), not at the object holding it.
* Messages never echo long input: a model's answer can be megabytes, and issues go to
  audit rows and error bodies.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import pkgutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.types import Variant

if TYPE_CHECKING:
    # jsonschema loads with the first validation, not with the module: a cached `see`
    # validates nothing, and jsonschema with its dependencies is a tenth of a second.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = [
    "SCHEMA_ID",
    "SchemaIssue",
    "prompt_schema",
    "require_valid",
    "schema_document",
    "validate_evidence",
]

SCHEMA_ID = "https://deepseekeyes.dev/schemas/visual-evidence.schema.json"
_SCHEMA_RESOURCE = "visual-evidence.schema.json"

#: At most this many issues are reported; a badly wrong answer is rejected just the same.
MAX_ISSUES = 100
#: Slack for containment, so a box computed in floating point that ends exactly on the
#: image edge is not refused for a rounding error.
CONTAINMENT_EPSILON = 1e-6
#: Quoted input values are cut to this many characters in messages.
_QUOTE_LIMIT = 60
#: The schema nests at most five levels; the finite-number scan looks no deeper than this.
_SCAN_DEPTH = 16

_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),
    ((int, float), "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
    (type(None), "null"),
)


@dataclass(frozen=True)
class SchemaIssue:
    """One reason a value failed the gate.

    Attributes:
        pointer: RFC 6901 JSON pointer into the value; ``""`` is the root.
        message: short and human; quoted input is cut to about 60 characters.
        keyword: the JSON Schema keyword that failed, or one of our own checks:
            ``non_finite``, ``bbox_containment``, ``duplicate_id``, ``unknown_ref``.
    """

    pointer: str
    message: str
    keyword: str

    def to_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "message": self.message, "keyword": self.keyword}


# --------------------------------------------------------------------------- the document


@functools.cache
def _document() -> Mapping[str, Any]:
    # The package's loader reads the file (from a directory or a zip alike), as
    # importlib.resources would; its readers import zipfile for every package, a cost a
    # cached `see` (which reads this file for the prompt fingerprint) paid on each start.
    data = pkgutil.get_data("deepseek_eyes.vision", f"schemas/{_SCHEMA_RESOURCE}")
    if data is None:  # a loader that cannot read files: the package is broken
        raise FileNotFoundError(f"deepseek_eyes.vision/schemas/{_SCHEMA_RESOURCE}")
    return cast("JsonObject", json.loads(data.decode("utf-8")))


def schema_document() -> JsonObject:
    """The whole canonical schema file, parsed (a fresh copy; the file is read once)."""
    return copy.deepcopy(dict(_document()))


@functools.cache
def _validator(variant: Variant) -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    # A broken schema file is a programming error; it fails loudly at the first validation.
    # Not when the file is read: a cached `see` reads it for the prompt fingerprint, and
    # importing jsonschema there cost a tenth of its start-up.
    Draft202012Validator.check_schema(_document())
    resource: Resource[Any] = DRAFT202012.create_resource(dict(_document()))
    registry: Registry[Any] = Registry().with_resource(SCHEMA_ID, resource)
    return Draft202012Validator({"$ref": f"{SCHEMA_ID}#/$defs/{variant.short}"}, registry=registry)


@functools.cache
def prompt_schema(variant: Variant) -> str:
    """Compact JSON text of a self-contained schema for ``variant`` alone.

    The root is the variant's object and ``$defs`` holds only the definitions it reaches,
    so a model reading a target prompt never sees the evidence fields and vice versa.
    """
    definitions: Mapping[str, Any] = _document()["$defs"]
    root = definitions[variant.short]
    used: JsonObject = {}
    pending = list(_local_refs(root))
    while pending:
        name = pending.pop()
        if name in used:
            continue
        used[name] = definitions[name]
        pending.extend(_local_refs(definitions[name]))
    schema: JsonObject = {"$schema": _document()["$schema"], **root}
    schema["$defs"] = {name: used[name] for name in definitions if name in used}
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def _local_refs(node: Any) -> Iterator[str]:
    """Names of the ``#/$defs/<name>`` references anywhere under ``node``."""
    prefix = "#/$defs/"
    if isinstance(node, dict):
        for key, child in node.items():
            if key == "$ref" and isinstance(child, str) and child.startswith(prefix):
                yield child[len(prefix) :]
            else:
                yield from _local_refs(child)
    elif isinstance(node, list):
        for child in node:
            yield from _local_refs(child)


# ------------------------------------------------------------------------------ the gate


def validate_evidence(value: Any, variant: Variant) -> list[SchemaIssue]:
    """Every reason ``value`` is not valid ``variant`` evidence; ``[]`` when it is.

    Issues are sorted by pointer (array indices in numeric order) and bounded to the first
    :data:`MAX_ISSUES`. The semantic checks run only once the schema and the finite-number
    scan pass, because they assume the shape the schema guarantees.
    """
    found: dict[tuple[tuple[Any, ...], str], str] = {}
    for path, message, keyword in _non_finite(value):
        found.setdefault((path, keyword), message)
        if len(found) >= MAX_ISSUES:
            break
    flagged = {path for path, _ in found}
    for error in _validator(variant).iter_errors(value):
        if len(found) >= MAX_ISSUES:
            break
        for path, message, keyword in _describe(error):
            if path not in flagged:
                found.setdefault((path, keyword), message)
    if not found:
        for path, message, keyword in _semantic_issues(value):
            found.setdefault((path, keyword), message)
            if len(found) >= MAX_ISSUES:
                break
    ordered = sorted(found.items(), key=lambda item: (_sort_key(item[0][0]), item[0][1]))
    return [
        SchemaIssue(_pointer(path), message, keyword)
        for (path, keyword), message in ordered[:MAX_ISSUES]
    ]


def require_valid(value: Any, variant: Variant) -> JsonObject:
    """Return ``value`` unchanged when it is valid ``variant`` evidence.

    Raises:
        EvidenceError: ``EVIDENCE_SCHEMA_INVALID``; ``details`` holds the variant and every
            issue as ``{"pointer", "message", "keyword"}``, and the message names the first.
    """
    issues = validate_evidence(value, variant)
    if issues:
        first = issues[0]
        where = first.pointer or "the root"
        more = f" (+{len(issues) - 1} more)" if len(issues) > 1 else ""
        raise EvidenceError(
            f"evidence failed the {variant.value} gate at {where}: {first.message}{more}",
            code="EVIDENCE_SCHEMA_INVALID",
            details={"variant": variant.value, "errors": [i.to_dict() for i in issues]},
        )
    return cast("JsonObject", value)


# ------------------------------------------------------------------- schema error wording

_Found = tuple[tuple[Any, ...], str, str]


def _describe(error: ValidationError) -> Iterator[_Found]:
    """Turn one jsonschema error into issues with short messages and exact paths."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        yield from _describe_alternatives(error)
        return
    path = tuple(error.absolute_path)
    keyword = str(error.validator)
    instance = error.instance
    expected = error.validator_value
    if keyword == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        known = schema.get("properties", {})
        for name in instance:
            if name not in known:
                yield (*path, name), f"unexpected property {_quote(name)}", keyword
        return
    if keyword == "required" and isinstance(instance, dict) and isinstance(expected, list):
        for name in expected:
            if name not in instance:
                yield (*path, name), "missing required property", keyword
        return
    yield path, _message(keyword, instance, expected, error.message), keyword


def _describe_alternatives(error: ValidationError) -> Iterator[_Found]:
    """A nullable box that is neither: say why it is not a box, not "valid under none"."""
    context = error.context or []
    branches: dict[Any, list[ValidationError]] = {}
    for sub in context:
        branch = sub.relative_schema_path[0] if sub.relative_schema_path else None
        branches.setdefault(branch, []).append(sub)
    # A branch whose root type does not even match the value is not what was meant.
    plausible = [
        subs
        for subs in branches.values()
        if not any(sub.validator == "type" and not sub.relative_path for sub in subs)
    ]
    if len(plausible) == 1:
        for sub in plausible[0]:
            yield from _describe(sub)
    elif not plausible:
        types = [str(sub.validator_value) for subs in branches.values() for sub in subs]
        yield (
            tuple(error.absolute_path),
            f"expected {' or '.join(dict.fromkeys(types))}, got {_json_type(error.instance)}",
            "type",
        )
    else:
        from jsonschema.exceptions import best_match

        yield from _describe(best_match(context))


def _message(keyword: str, instance: Any, expected: Any, fallback: str) -> str:
    if keyword == "type":
        return f"expected {_type_list(expected)}, got {_json_type(instance)}"
    if keyword == "const":
        return f"must be {_quote(expected)}, got {_quote(instance)}"
    if keyword == "enum" and isinstance(expected, list):
        return f"{_quote(instance)} is not one of: {', '.join(map(str, expected))}"
    if keyword == "minimum":
        return f"{_quote(instance)} is below the minimum {expected}"
    if keyword == "maximum":
        return f"{_quote(instance)} is above the maximum {expected}"
    if keyword == "exclusiveMinimum":
        return f"{_quote(instance)} must be greater than {expected}"
    if keyword == "exclusiveMaximum":
        return f"{_quote(instance)} must be less than {expected}"
    if keyword in ("minLength", "maxLength") and isinstance(instance, str):
        bound = "at least" if keyword == "minLength" else "at most"
        return f"text has {len(instance)} characters; {bound} {expected} allowed"
    if keyword in ("minItems", "maxItems") and isinstance(instance, list):
        bound = "at least" if keyword == "minItems" else "at most"
        return f"array has {len(instance)} items; {bound} {expected} allowed"
    if keyword == "items" and isinstance(instance, list):
        return f"array has {len(instance)} items; extra items are not allowed"
    if keyword == "pattern":
        return f"{_quote(instance)} does not match {expected}"
    return _cut(fallback, 200)


def _type_list(expected: Any) -> str:
    if isinstance(expected, list):
        return " or ".join(map(str, expected))
    return str(expected)


def _json_type(value: Any) -> str:
    for kinds, name in _JSON_TYPES:
        if isinstance(value, kinds):
            return name
    return type(value).__name__


def _quote(value: Any) -> str:
    """A short rendering of an input value that never grows with the input."""
    if isinstance(value, str):
        return json.dumps(_cut(value, _QUOTE_LIMIT), ensure_ascii=False)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        # str() of an int past 4300 digits raises; nobody needs to read one in a message.
        return str(value) if value.bit_length() <= 128 else "a very large integer"
    if isinstance(value, float):
        return repr(value)
    return f"a JSON {_json_type(value)}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------- non-schema checks


def _non_finite(value: Any) -> Iterator[_Found]:
    """NaN and infinities anywhere (JSON Schema's bounds compare false against NaN)."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            yield path, "number is not finite (NaN or infinity)", "non_finite"
        elif len(path) < _SCAN_DEPTH:
            if isinstance(node, dict):
                stack.extend(((*path, key), child) for key, child in node.items())
            elif isinstance(node, list):
                stack.extend(((*path, index), child) for index, child in enumerate(node))


def _semantic_issues(value: JsonObject) -> Iterator[_Found]:
    """What the schema cannot say; ``value`` already has the variant's shape."""
    yield from _containment(value)
    ids: set[str] = set()
    for array in ("regions", "objects"):
        seen: set[str] = set()
        for index, item in enumerate(value.get(array, ())):
            if item["id"] in seen:
                message = f"id {_quote(item['id'])} is not unique"
                yield (array, index, "id"), message, "duplicate_id"
            seen.add(item["id"])
        ids |= seen
    for index, relation in enumerate(value.get("relations", ())):
        for end in ("subject", "object"):
            if relation[end] not in ids:
                yield (
                    ("relations", index, end),
                    f"{_quote(relation[end])} names no listed region or object",
                    "unknown_ref",
                )


def _containment(value: JsonObject) -> Iterator[_Found]:
    """Every ``bbox`` wherever it appears ends inside the image."""
    for path, box in _boxes(value, ()):
        x, y, w, h = box
        over = [
            f"{a}+{b}={s:.4g}"
            for a, b, s in (("x", "w", x + w), ("y", "h", y + h))
            if s > 1 + CONTAINMENT_EPSILON
        ]
        if over:
            yield path, f"box leaves the image: {', '.join(over)} > 1", "bbox_containment"


def _boxes(node: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Sequence[float]]]:
    if isinstance(node, dict):
        for key, child in node.items():
            if key == "bbox" and isinstance(child, list):
                yield (*path, key), child
            else:
                yield from _boxes(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _boxes(child, (*path, index))


# ------------------------------------------------------------------------------ pointers


def _pointer(path: Iterable[Any]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _sort_key(path: tuple[Any, ...]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in path)
