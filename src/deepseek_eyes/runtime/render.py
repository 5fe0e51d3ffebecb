"""Validated evidence as compact text for the final model, and image pointers.

The final model reads evidence, not pixels. The rendering carries every field of the
validated object (boxes and confidences rounded to two decimals) in a line-oriented form
that costs a fraction of the JSON's tokens; a pointer carries only the image's identity,
size and one line of summary, for images the conversation has already discussed. Both name
the image by its stable id (``img-1``) so the model can ask ``look`` about it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["MAX_POINTER_SUMMARY", "render_evidence", "render_pointer", "render_target"]

MAX_POINTER_SUMMARY = 240


def _box(bbox: Any) -> str:
    if not isinstance(bbox, Sequence) or len(bbox) != 4:
        return ""
    return " @" + ",".join(f"{float(v):.2f}" for v in bbox)


def _conf(value: Any) -> str:
    return f"{float(value):.2f}" if isinstance(value, int | float) else "?"


def _header(image_id: str, image: Mapping[str, Any], route: str, record_sha256: str) -> str:
    return (
        f"[{image_id}: sha256:{str(image['sha256'])[:16]} {image['width']}x{image['height']} "
        f"{image['media_type']}; evidence from route {route}, record {record_sha256[:12]}]"
    )


def render_evidence(
    image_id: str,
    image: Mapping[str, Any],
    evidence: Mapping[str, Any],
    *,
    route: str,
    record_sha256: str,
) -> str:
    """A ``deepseekeyes.evidence.v1`` object as the final model reads it."""
    lines = [
        _header(image_id, image, route, record_sha256),
        f"summary: {evidence.get('summary', '')}",
        "(boxes are @x,y,w,h as fractions of the image; numbers in () are confidence)",
    ]
    ocr = evidence.get("ocr") or []
    if ocr:
        lines.append(f"text lines ({len(ocr)}, reading order):")
        lines.extend(
            f'  "{o["text"]}" ({_conf(o["confidence"])}){_box(o["bbox"])}' for o in ocr
        )
    for title, field, fmt in _SECTIONS:
        items = evidence.get(field) or []
        if items:
            lines.append(f"{title}:")
            lines.extend(fmt(item) for item in items)
    return "\n".join(lines)


def _region(r: Mapping[str, Any]) -> str:
    return f'  {r["id"]} {r["kind"]} "{r["label"]}" ({_conf(r["confidence"])}){_box(r["bbox"])}'


def _object(o: Mapping[str, Any]) -> str:
    attributes = f" [{', '.join(o['attributes'])}]" if o.get("attributes") else ""
    return f'  {o["id"]} "{o["label"]}" ({_conf(o["confidence"])}){_box(o["bbox"])}{attributes}'


def _relation(r: Mapping[str, Any]) -> str:
    return f'  {r["subject"]} {r["predicate"]} {r["object"]} ({_conf(r["confidence"])})'


def _number(q: Mapping[str, Any]) -> str:
    unit = f" {q['unit']}" if q["unit"] else ""
    source = f'(from "{q["text"]}", {_conf(q["confidence"])})'
    return f'  {q["label"]} = {q["value"]:g}{unit} {source}{_box(q["bbox"])}'


def _uncertainty(u: Mapping[str, Any]) -> str:
    return f'  {u["topic"]}: {u["reason"]}{_box(u["bbox"])}'


_SECTIONS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("regions", "regions", _region),
    ("objects", "objects", _object),
    ("relations", "relations", _relation),
    ("numbers", "quantitative_facts", _number),
    ("uncertainties", "uncertainties", _uncertainty),
)


def render_target(
    image_id: str,
    image: Mapping[str, Any],
    evidence: Mapping[str, Any],
    *,
    route: str,
    record_sha256: str,
) -> str:
    """A ``deepseekeyes.target.v1`` reread as the final model reads it (a tool result)."""
    lines = [
        _header(image_id, image, route, record_sha256),
        f"answer: {evidence.get('answer', '')} ({_conf(evidence.get('confidence'))})",
    ]
    observations = evidence.get("observations") or []
    if observations:
        lines.append("observations:")
        lines.extend(
            f'  "{o["text"]}" ({_conf(o["confidence"])}){_box(o["bbox"])}' for o in observations
        )
    ocr = evidence.get("ocr") or []
    if ocr:
        lines.append(f"text lines ({len(ocr)}):")
        lines.extend(f'  "{o["text"]}"{_box(o["bbox"])}' for o in ocr)
    uncertainties = evidence.get("uncertainties") or []
    if uncertainties:
        lines.append("uncertainties:")
        lines.extend(f'  {u["topic"]}: {u["reason"]}' for u in uncertainties)
    return "\n".join(lines)


def render_pointer(image_id: str, image: Mapping[str, Any], summary: str | None) -> str:
    """An image discussed earlier: identity, size, one line of summary, and how to look."""
    text = (summary or "").replace("\n", " ")
    if len(text) > MAX_POINTER_SUMMARY:
        text = text[: MAX_POINTER_SUMMARY - 1] + "…"
    return (
        f"[{image_id}: sha256:{str(image['sha256'])[:16]} {image['width']}x{image['height']} "
        f"{image['media_type']}; shown earlier{': ' + text if text else ''}; "
        f'call look(image="{image_id}", question=...) for details]'
    )
