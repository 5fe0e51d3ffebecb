"""The tools' ``outputSchema``: the schema file's definitions, spelled out for a client.

The official SDK client validates every ``structuredContent`` against the tool's
``outputSchema`` with ``jsonschema``, whose cost is one step (a new validator, a new
resource) per subschema it descends into: about one per value of the evidence, some 450
for a receipt's, more than a whole call of a trivial tool. So the published schema accepts
and refuses exactly what the file does (``tests/vision_server/test_vision_output_schema.py``
holds them to it) but costs no step the file's form does not need:

* every ``$ref`` is replaced by the definition it names (a reference was one more step, and
  a resolution, at each box, line and number);
* an optional box, ``anyOf: [box, {"type": "null"}]``, is one schema whose ``type`` admits
  both: the box's other keywords constrain arrays only, so a null passes them untouched.
  ``anyOf`` stepped into the box branch for every box (and into both for a null one).

No ``$id``: both tools' schemas come from one file, and a client that caches schemas by
``$id`` would confuse them.
"""

from __future__ import annotations

from typing import Any

from deepseek_eyes.vision.evidence.gate import schema_document
from deepseek_eyes.vision.types import Variant

__all__ = ["output_schema"]

#: The schema file's references nest a few levels (evidence → quantity → optionalBbox →
#: bbox); a deeper one can only be a cycle, which inlining cannot spell out.
_MAX_INLINED_DEPTH = 16

#: Keywords that constrain arrays only (and annotations): a schema made of these and
#: ``"type": "array"`` says nothing about a null, so ``[it, null]`` can be one schema.
_ARRAY_ONLY = frozenset({"type", "description", "minItems", "maxItems", "prefixItems",
                         "items"})
_NULL = {"type": "null"}


def output_schema(variant: Variant) -> dict[str, Any]:
    """The schema file's definition of ``variant`` as the tool's ``outputSchema``: an
    object schema, as MCP requires, with the same constraints in the form cheapest to
    check (see the module docstring)."""
    document = schema_document()
    definitions = document["$defs"]
    root = _inlined(definitions[variant.short], definitions, 0)
    return {"$schema": document["$schema"], **root,
            "title": f"{document['title']}: {variant.value}", "type": "object"}


def _inlined(node: Any, definitions: dict[str, Any], depth: int) -> Any:
    if depth > _MAX_INLINED_DEPTH:
        raise ValueError("the evidence schema's references nest too deep (a cycle?)")
    if isinstance(node, list):
        return [_inlined(item, definitions, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        if len(node) != 1:  # the file's references stand alone; a sibling would need allOf
            raise ValueError(f"a $ref with siblings in the evidence schema: {ref}")
        return _inlined(definitions[ref[len("#/$defs/"):]], definitions, depth + 1)
    return _array_or_null({key: _inlined(value, definitions, depth)
                           for key, value in node.items()})


def _array_or_null(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with ``anyOf: [an array schema, {"type": "null"}]`` (and nothing else but
    a description) made one schema of ``"type": ["array", "null"]``; any other node as
    it is. Both descriptions are kept."""
    branches = node.get("anyOf")
    if set(node) - {"anyOf", "description"} or not isinstance(branches, list) \
            or len(branches) != 2 or branches[1] != _NULL:
        return node
    array = branches[0]
    if not isinstance(array, dict) or array.get("type") != "array" \
            or set(array) - _ARRAY_ONLY:
        return node
    merged = {key: value for key, value in array.items() if key != "description"}
    merged["type"] = ["array", "null"]
    described = [text for text in (node.get("description"), array.get("description"))
                 if isinstance(text, str)]
    if described:
        merged = {"description": " ".join(described), **merged}
    return merged
