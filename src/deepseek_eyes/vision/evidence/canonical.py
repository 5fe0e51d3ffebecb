"""From a route's raw answer to one candidate evidence object, repaired only where it is safe.

Models write ``"0.93"`` for ``0.93``, leave out empty arrays and draw boxes in their own
convention (pixel corners, Qwen's 0–1000 ``[x1, y1, x2, y2]``, Gemini's 0–1000
``[ymin, xmin, ymax, xmax]``). :func:`canonicalize` takes the object the contract asks for
(found and selected by :mod:`deepseek_eyes.vision.evidence.extraction`) and normalizes that *known*
structure, recording every change, the extraction steps included, as a :class:`Repair` for
the audit log. The strict gate (:func:`deepseek_eyes.vision.evidence.gate.require_valid`) runs
unchanged afterwards.

Decisions a newcomer would otherwise undo:

* Repairs touch only structure the schema defines: missing arrays, numeric strings in
  numeric fields, box shapes. Nothing is ever deleted, renamed or invented beyond that, so
  an extra or misspelt field still fails the gate. What is known is read from the schema
  file itself (:func:`_layout`), not from a second hand-written list.
* ``auto`` boxes are guessed only with the image size in hand; without it a box outside
  0..1 is left for the gate to reject rather than scaled by a guess.
* :data:`MAX_TEXT_BYTES` and :data:`MAX_CANDIDATES` are defined by the extraction module
  and re-exported here, where callers have always imported them.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.settings import BoxConvention
from deepseek_eyes.vision.evidence.extraction import (
    MAX_CANDIDATES,
    MAX_TEXT_BYTES,
    find_candidates,
    select_candidate,
)
from deepseek_eyes.vision.evidence.gate import schema_document
from deepseek_eyes.vision.types import Variant

__all__ = [
    "BOX_CONVENTIONS",
    "MAX_CANDIDATES",
    "MAX_TEXT_BYTES",
    "REPAIR_KINDS",
    "Canonicalized",
    "Repair",
    "canonicalize",
]

#: A box may overflow an image edge by this fraction of the image and still be clamped.
CLAMP_TOLERANCE = 0.01

#: The conventions a route may declare (``box_convention`` in its settings).
BOX_CONVENTIONS: tuple[str, ...] = get_args(BoxConvention)

#: Every repair kind, in the order the steps run. Names are stable: audit rows keep them.
REPAIR_KINDS = (
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
)

# Plain decimal or exponent notation only: no "nan", "inf", "1_000", "50%" or other digits.
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_MAX_NUMBER_TEXT = 64

_XYWH_KEYS = (
    ("x", "y", "w", "h"),
    ("x", "y", "width", "height"),
    ("left", "top", "width", "height"),
)
_CORNER_KEYS = (
    ("x1", "y1", "x2", "y2"),
    ("xmin", "ymin", "xmax", "ymax"),
    ("left", "top", "right", "bottom"),
)


@dataclass(frozen=True)
class Repair:
    """One change made to the model's answer before the gate.

    Attributes:
        kind: one of :data:`REPAIR_KINDS`.
        pointer: RFC 6901 pointer to where the change was made (``""`` for the whole answer).
        detail: short and mechanical (a convention, a count); never evidence text, because
            repairs go to the audit log.
    """

    kind: str
    pointer: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "pointer": self.pointer, "detail": self.detail}


@dataclass(frozen=True)
class Canonicalized:
    """The selected, repaired object (not yet validated) and what was done to it."""

    value: JsonObject
    repairs: tuple[Repair, ...]


def canonicalize(
    raw: str | JsonObject,
    variant: Variant,
    *,
    image_size: tuple[int, int] | None = None,
    box_convention: str = "auto",
) -> Canonicalized:
    """Select the ``variant`` object in ``raw`` and repair its known structure.

    ``raw`` is a route's text answer or an already-structured value (never mutated).
    ``image_size`` is ``(width, height)`` in pixels; ``box_convention`` is the route's
    setting (one of :data:`BOX_CONVENTIONS`).

    Raises:
        EvidenceError: ``EVIDENCE_NOT_FOUND`` when the answer is too large or holds no
            object for this contract.
        ValueError: an unknown ``box_convention`` (a settings bug, not a model failure).
    """
    if box_convention not in BOX_CONVENTIONS:
        raise ValueError(f"unknown box convention {box_convention!r}")
    found = find_candidates(raw, variant)
    chosen = select_candidate(found, variant, _layout(variant).keys)
    repairs: list[Repair] = []
    if found.reasoning:
        repairs.append(Repair("reasoning_stripped", "", found.reasoning))
    if chosen.fence is not None:
        repairs.append(Repair("code_fence_unwrapped", "", chosen.fence))
    if found.total > 1:
        detail = f"{chosen.ordinal} of {found.total} candidates"
        repairs.append(Repair("object_selected", "", detail))
    value = _Repairer(variant, image_size, box_convention, repairs).run(chosen.value)
    return Canonicalized(value, tuple(repairs))


# ------------------------------------------------------------- what the schema says exists


@dataclass(frozen=True)
class _Fields:
    """What kind of repairable field each property of one object is."""

    numbers: tuple[str, ...]
    boxes: tuple[str, ...]
    arrays: tuple[str, ...]  # arrays of plain values (``attributes``)


@dataclass(frozen=True)
class _Layout:
    """The repairable structure of one variant of the evidence schema."""

    keys: frozenset[str]  # the variant's top-level properties other than ``schema``
    top: _Fields
    items: tuple[tuple[str, _Fields], ...]  # top-level arrays of objects and their fields


@functools.cache
def _layout(variant: Variant) -> _Layout:
    """Read the repairable structure of ``variant`` from the canonical schema file."""
    definitions: JsonObject = schema_document()["$defs"]
    root = definitions[variant.short]
    items: list[tuple[str, _Fields]] = []
    plain_arrays: list[str] = []
    for name, prop in root["properties"].items():
        resolved = _resolve(prop, definitions)
        if resolved.get("type") != "array":
            continue
        item = _resolve(resolved.get("items", {}), definitions)
        if item.get("type") == "object":
            items.append((name, _fields(item, definitions)))
        else:
            plain_arrays.append(name)
    top = _fields(root, definitions)
    return _Layout(
        keys=frozenset(root["properties"]) - {"schema"},
        top=_Fields(top.numbers, top.boxes, (*top.arrays, *(name for name, _ in items))),
        items=tuple(items),
    )


def _fields(schema: Mapping[str, Any], definitions: JsonObject) -> _Fields:
    numbers: list[str] = []
    boxes: list[str] = []
    arrays: list[str] = []
    for name, prop in schema.get("properties", {}).items():
        resolved = _resolve(prop, definitions)
        if _is_box(prop, definitions):
            boxes.append(name)
        elif resolved.get("type") == "number":
            numbers.append(name)
        elif resolved.get("type") == "array":
            item = _resolve(resolved.get("items", {}), definitions)
            if item.get("type") != "object":
                arrays.append(name)
    return _Fields(tuple(numbers), tuple(boxes), tuple(arrays))


def _resolve(schema: Mapping[str, Any], definitions: JsonObject) -> Mapping[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 16:
        schema = definitions[str(schema["$ref"]).rsplit("/", 1)[-1]]
        seen += 1
    return schema


def _is_box(schema: Mapping[str, Any], definitions: JsonObject) -> bool:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.endswith("/bbox") or _is_box(_resolve(schema, definitions), definitions)
    return any(_is_box(branch, definitions) for branch in schema.get("anyOf", ()))


# ------------------------------------------------------------------------------- repairs


def _pointer(*parts: str | int) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def _number_from_text(text: str) -> int | float | None:
    stripped = text.strip()
    if len(stripped) > _MAX_NUMBER_TEXT or not _NUMBER_TEXT.fullmatch(stripped):
        return None
    if _INTEGER_TEXT.fullmatch(stripped):
        return int(stripped)
    number = float(stripped)
    return number if math.isfinite(number) else None


class _Repairer:
    """Applies the known-structure repairs to one selected object, recording each."""

    def __init__(
        self,
        variant: Variant,
        image_size: tuple[int, int] | None,
        convention: str,
        repairs: list[Repair],
    ) -> None:
        self._variant = variant
        self._layout = _layout(variant)
        self._image_size = image_size if image_size and min(image_size) > 0 else None
        self._convention = convention
        self._repairs = repairs

    def run(self, value: JsonObject) -> JsonObject:
        if "schema" not in value:
            value = {"schema": self._variant.value, **value}
            self._repairs.append(Repair("schema_added", "/schema"))
        self._repair_fields(value, self._layout.top, ())
        for name, fields in self._layout.items:
            items = value.get(name)
            if not isinstance(items, list):
                continue
            for index, item in enumerate(items):
                if isinstance(item, dict):
                    self._repair_fields(item, fields, (name, index))
        return value

    def _repair_fields(
        self, obj: JsonObject, fields: _Fields, at: tuple[str | int, ...]
    ) -> None:
        for name in fields.arrays:
            if obj.get(name) is None:
                obj[name] = []
                self._repairs.append(Repair("array_added", _pointer(*at, name)))
        for name in fields.numbers:
            if isinstance(obj.get(name), str):
                number = _number_from_text(obj[name])
                if number is not None:
                    obj[name] = number
                    self._repairs.append(Repair("numeric_string", _pointer(*at, name)))
        for name in fields.boxes:
            if obj.get(name) is not None:
                obj[name] = self._repair_box(obj[name], (*at, name))

    # -- boxes ------------------------------------------------------------------------------

    def _repair_box(self, box: Any, at: tuple[str | int, ...]) -> Any:
        """Return the repaired box, or ``box`` itself when it is not a recognizable shape."""
        local: list[Repair] = []
        parsed = self._parse_box(box, at, local)
        if parsed is None:
            return box
        values, form = parsed
        where = _pointer(*at)
        result = self._normalize(values, form, where, local)
        if result is None:  # the scale cannot be known: keep the shape fixes only
            result = values
            if form == "corners":
                result = _corners_to_xywh(values)
                local.append(Repair("bbox_corners_to_xywh", where))
        else:
            result = self._clamp(result, where, local)
        if not local:
            return box
        self._repairs.extend(local)
        return result

    def _parse_box(
        self, box: Any, at: tuple[str | int, ...], local: list[Repair]
    ) -> tuple[list[float], str] | None:
        """Four numbers and their form: ``list`` (order per convention), ``xywh`` or
        ``corners`` (known from the shape); None for anything else."""
        if isinstance(box, dict):
            for form, key_sets in (("xywh", _XYWH_KEYS), ("corners", _CORNER_KEYS)):
                for key_set in key_sets:
                    if len(box) == 4 and set(box) == set(key_set):
                        numbers = self._numbers([(box[k], (*at, k)) for k in key_set], local)
                        if numbers is None:
                            return None
                        detail = ",".join(key_set)
                        local.append(Repair("bbox_object_to_list", _pointer(*at), detail))
                        return numbers, form
            return None
        if not isinstance(box, list) or len(box) != 4:
            return None
        if all(isinstance(point, list) and len(point) == 2 for point in box):
            numbers = self._numbers(
                [(point[axis], (*at, i, axis)) for i, point in enumerate(box) for axis in (0, 1)],
                local,
            )
            if numbers is None:
                return None
            xs, ys = numbers[0::2], numbers[1::2]
            local.append(Repair("bbox_quad_to_xywh", _pointer(*at)))
            left, top = min(xs), min(ys)
            return [left, top, max(xs) - left, max(ys) - top], "xywh"
        flat = self._numbers([(v, (*at, i)) for i, v in enumerate(box)], local)
        return None if flat is None else (flat, "list")

    def _numbers(
        self, items: list[tuple[Any, tuple[str | int, ...]]], local: list[Repair]
    ) -> list[float] | None:
        numbers: list[float] = []
        for value, at in items:
            number = self._number(value, at, local)
            if number is None:
                return None
            numbers.append(number)
        return numbers

    @staticmethod
    def _number(value: Any, at: tuple[str | int, ...], local: list[Repair]) -> float | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return value
        if isinstance(value, str):
            number = _number_from_text(value)
            if number is not None:
                local.append(Repair("numeric_string", _pointer(*at)))
            return number
        return None

    def _normalize(
        self, values: list[float], form: str, where: str, local: list[Repair]
    ) -> list[float] | None:
        """Normalized ``[x, y, w, h]``, or None when the scale cannot be known."""
        convention = self._convention
        if convention == "yxyx-1000" and form == "list":
            y1, x1, y2, x2 = values
            local.append(Repair("bbox_yxyx_to_xywh", where))
            local.append(Repair("bbox_scale_1000", where))
            return _corners_to_xywh([x1, y1, x2, y2], 1000, 1000)
        if convention in ("xyxy-pixels", "xyxy-1000", "yxyx-1000"):
            # A dict or a quad names its own order; only the scale comes from the route.
            order = "corners" if form == "list" else form
            if convention != "xyxy-pixels":
                return _to_xywh(values, order, (1000, 1000), "bbox_scale_1000", where, local)
            if self._image_size is None:
                return None
            return _to_xywh(
                values, order, self._image_size, "bbox_pixels_to_normalized", where, local
            )
        if convention == "xywh-normalized" or not any(v > 1 for v in values):
            order = "xywh" if form == "list" else form
            return _to_xywh(values, order, None, "", where, local)
        if self._image_size is None:
            return None
        return _auto_pixels(values, form, self._image_size, where, local)

    def _clamp(self, box: list[float], where: str, local: list[Repair]) -> list[float]:
        """Pull a box that overflows an edge by at most :data:`CLAMP_TOLERANCE` inside.

        Only an overflowing side moves, so the other coordinates stay exactly as given.
        """
        x, y, w, h = box
        overflow = max(-x, -y, x + w - 1, y + h - 1)
        if not (x < 0 or y < 0 or w > 1 or h > 1 or overflow > 1e-9):
            return box
        if overflow > CLAMP_TOLERANCE:
            return box  # well outside: the gate says so with a pointer
        if x < 0:
            x, w = 0.0, x + w
        if y < 0:
            y, h = 0.0, y + h
        if x + w > 1:
            w = 1 - x
        if y + h > 1:
            h = 1 - y
        if w <= 0 or h <= 0:
            return box
        local.append(Repair("bbox_clamped", where))
        return [x, y, w, h]


def _auto_pixels(
    values: list[float], form: str, size: tuple[int, int], where: str, local: list[Repair]
) -> list[float] | None:
    """Read an ``auto`` box with a value above 1 as pixels: ``[x, y, w, h]`` when that fits
    the image, else corners when those fit; otherwise None (left for the gate)."""
    width, height = size
    slack_w, slack_h = width * (1 + CLAMP_TOLERANCE), height * (1 + CLAMP_TOLERANCE)
    a, b, c, d = values
    if form in ("list", "xywh") and a + c <= slack_w and b + d <= slack_h:
        return _to_xywh(values, "xywh", size, "bbox_pixels_to_normalized", where, local)
    if form in ("list", "corners") and c > a and d > b and c <= slack_w and d <= slack_h:
        return _to_xywh(values, "corners", size, "bbox_pixels_to_normalized", where, local)
    return None


def _to_xywh(
    values: list[float],
    order: str,
    scale: tuple[int, int] | None,
    scale_kind: str,
    where: str,
    local: list[Repair],
) -> list[float]:
    """``values`` in ``order`` (``xywh`` or ``corners``) divided by ``scale`` when given."""
    width, height = scale or (1, 1)
    if order == "corners":
        local.append(Repair("bbox_corners_to_xywh", where))
        result = _corners_to_xywh(values, width, height)
    elif scale is not None:
        x, y, w, h = values
        result = [x / width, y / height, w / width, h / height]
    else:
        result = list(values)
    if scale is not None:
        detail = f"{width}x{height}" if scale_kind == "bbox_pixels_to_normalized" else ""
        local.append(Repair(scale_kind, where, detail))
    return result


def _corners_to_xywh(values: list[float], width: int = 1, height: int = 1) -> list[float]:
    # Width from the difference of the raw corners, then one division: the exact result
    # for exact inputs (a 20..60 px box in 200 px is exactly 0.1 + 0.2, not 0.30000000000000004).
    x1, y1, x2, y2 = values
    return [x1 / width, y1 / height, (x2 - x1) / width, (y2 - y1) / height]
