"""Evidence entries from what the local route read: boxes normalized to the image, texts
clipped to the schema's limits, regions with their type in the label, relations by id,
chart ticks and printed values as facts, and the honest gaps (what was not assessed or was
refused) as uncertainties. Pure functions; :mod:`deepseek_eyes.vision.routes.layout`
assembles them into one evidence object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deepseek_eyes.vision.routes.charts import Chart
from deepseek_eyes.vision.routes.plausible import Refusal
from deepseek_eyes.vision.routes.segments import Line, Segment
from deepseek_eyes.vision.routes.structure import Region, relations_between

__all__ = [
    "MAX_ITEMS",
    "MAX_OCR",
    "MAX_TEXT",
    "UNSEEN_NOTE",
    "chart_facts",
    "clip",
    "coverage_note",
    "coverage_summary",
    "gaps",
    "norm_box",
    "ocr_entries",
    "region_entries",
    "relation_entries",
    "state_coverage",
    "summary",
    "unit_interval",
]

MAX_OCR = 2000
MAX_ITEMS = 500
MAX_TEXT = 2000


def norm_box(
    box: tuple[float, float, float, float], width: int, height: int
) -> list[float]:
    x0 = min(max(box[0], 0.0), width - 1.0)
    y0 = min(max(box[1], 0.0), height - 1.0)
    x1 = min(max(box[2], x0 + 1.0), float(width))
    y1 = min(max(box[3], y0 + 1.0), float(height))
    return [
        round(x0 / width, 6),
        round(y0 / height, 6),
        round((x1 - x0) / width, 6),
        round((y1 - y0) / height, 6),
    ]


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ocr_entries(lines: Sequence[Line], width: int, height: int) -> list[dict[str, object]]:
    return [
        {
            "text": clip(line.text),
            "bbox": norm_box(line.box, width, height),
            "confidence": round(min(max(line.confidence, 0.0), 1.0), 4),
        }
        for line in lines[:MAX_OCR]
        if line.text.strip()
    ]


#: Never assessed by the local route, whatever else it found on the image.
UNSEEN_NOTE = (
    "what pictures show (people, things, scenes), colours, shapes and chart marks (bar "
    "heights, points, lines)"
)


def coverage_note(
    *, text: bool, layout: bool, tables: int | None = None,
    controls: Mapping[str, int] | None = None,
) -> str:
    """Exactly what the route assessed on this image and what it did not.

    ``text``: OCR ran and read at least one line. ``layout``: the layout model ran.
    ``tables`` and ``controls``: how many tables and interface elements (by kind) the
    geometric searches found, or ``None`` where no search ran (they work from the text read,
    so an image without text gets none)."""
    done = ["printed text (OCR)" if text else "printed text (OCR; none legible)"]
    skipped: list[str] = []
    if layout:
        done.append("the page's layout (typed regions, columns, reading order)")
    else:
        skipped.append("the page's layout (the layout model did not run)")
    if tables is None and controls is None and not text:
        skipped.append("tables and interface elements (both are sought around the text read)")
    elif tables is None:
        skipped.append("tables")
    else:
        done.append(f"tables from rule lines and aligned columns ({tables or 'none'} found)")
    if controls is None:
        if text or tables is not None:
            skipped.append("interface elements")
    else:
        found = ", ".join(f"{n} {kind.replace('_', ' ')}(s)" for kind, n in controls.items())
        done.append(
            "interface elements (buttons, fields, checkboxes, tabs, banners) from their "
            f"outlines and fills ({found or 'none found'})"
        )
    skipped.append(UNSEEN_NOTE)
    return clip(
        f"Assessed by the local route: {'; '.join(done)}. Not assessed: "
        f"{'; '.join(skipped)}.", 1000,
    )


def coverage_summary(
    *, layout: bool, tables: int | None = None, controls: Mapping[str, int] | None = None
) -> str:
    """One sentence for the summary: what was assessed, what was not."""
    done = ["text"] + (["layout"] if layout else [])
    skipped = [] if layout else ["layout"]
    (done if tables is not None else skipped).append("tables")
    (done if controls is not None else skipped).append("interface elements")
    skipped.append("pictures, colours and chart marks")
    return f"Assessed: {', '.join(done)}; not assessed: {', '.join(skipped)}."


def state_coverage(
    evidence: dict[str, Any], *, layout: bool, tables: int | None,
    controls: Mapping[str, int] | None,
) -> None:
    """Rewrite a finished evidence object's ``coverage`` note and the summary's closing
    sentence, in place, once the table and interface searches have run (or not)."""
    text = bool(evidence["ocr"])
    note = coverage_note(text=text, layout=layout, tables=tables, controls=controls)
    for gap in evidence["uncertainties"]:
        if gap.get("topic") == "coverage":
            gap["reason"] = note
            break
    said = coverage_summary(layout=layout)
    base = str(evidence["summary"])
    base = base.replace(" " + said, "") if said in base else base
    evidence["summary"] = clip(
        f"{base} {coverage_summary(layout=layout, tables=tables, controls=controls)}", 4000
    )
#: A region's kind in the evidence schema, from the route's region types.
SCHEMA_KINDS = {
    "title": "text_block", "text": "text_block", "caption": "text_block",
    "header": "text_block", "footer": "text_block", "list": "text_block",
    "table": "table", "figure": "figure", "chart": "chart", "equation": "other",
}
#: Little text: at most this many lines covering at most this share of the image.
FEW_LINES = 3
SPARSE_AREA = 0.05


def unit_interval(value: float) -> float:
    return round(min(max(value, 0.0), 1.0), 4)


def region_entries(
    regions: Sequence[Region], width: int, height: int
) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for number, region in enumerate(regions[:MAX_ITEMS], start=1):
        # A chart or figure is named by its first words (a title), not by a tick.
        named = [line.text for line in region.lines if any(c.isalpha() for c in line.text)]
        first = named[0] if named else ""
        label = f"{region.kind}: {first}" if first else region.kind
        entries.append({
            "id": f"r{number}",
            "kind": SCHEMA_KINDS.get(region.kind, "other"),
            "label": clip(label, 120),
            "bbox": norm_box(region.box, width, height),
            "confidence": unit_interval(region.confidence),
        })
    return entries


def relation_entries(regions: Sequence[Region]) -> list[dict[str, object]]:
    return [
        {
            "subject": f"r{relation.subject + 1}", "predicate": relation.predicate,
            "object": f"r{relation.object + 1}", "confidence": 0.9,
        }
        for relation in relations_between(regions[:MAX_ITEMS])
    ][:MAX_ITEMS]


def chart_facts(charts: Sequence[Chart], width: int, height: int) -> list[dict[str, object]]:
    items: list[tuple[str, float, str, Segment]] = []
    for chart in charts:
        items.extend((f"{t.axis}-axis tick", t.value, t.unit, t.segment) for t in chart.ticks)
        items.extend(
            (
                f"{v.category} (value printed on the chart)" if v.category
                else "value printed on the chart",
                v.value, v.unit, v.segment,
            )
            for v in chart.values
        )
    return [
        {
            "label": clip(label, 200), "value": value, "unit": unit,
            "text": clip(segment.text, 500),
            "bbox": norm_box(box_of(segment), width, height),
            "confidence": unit_interval(segment.confidence),
        }
        for label, value, unit, segment in items
    ]


def box_of(segment: Segment) -> tuple[float, float, float, float]:
    return (segment.x0, segment.y0, segment.x1, segment.y1)


def gaps(
    regions: Sequence[Region], lines: Sequence[Line], refused: Sequence[Refusal],
    width: int, height: int, *, min_confidence: float, layout_assessed: bool = True,
) -> list[dict[str, object]]:
    """What the route did not assess or declined to read, each with its box where it has
    one: the standing note, the page's layout when the layout model did not run, an image
    with little or no text, every figure and chart, every refused detection and every
    low-confidence line."""
    gaps: list[dict[str, object]] = [{
        "topic": "coverage",
        "reason": coverage_note(text=bool(lines), layout=layout_assessed),
        "bbox": None,
    }]
    if not layout_assessed:
        gaps.append({
            "topic": "layout",
            "reason": "The layout model did not run (turned off or not installed): regions "
            "are text blocks grouped from the lines alone, untyped; titles, figures, tables "
            "and captions were not told apart.",
            "bbox": None,
        })
    text_area = sum(
        (line.box[2] - line.box[0]) * (line.box[3] - line.box[1]) for line in lines
    ) / max(width * height, 1)
    if not lines:
        gaps.append({
            "topic": "no text",
            "reason": "No legible text was found. What the image shows (objects, people, "
            "scene, colours, shapes) was not assessed by the local route.",
            "bbox": None,
        })
    elif len(lines) <= FEW_LINES and text_area <= SPARSE_AREA:
        gaps.append({
            "topic": "little text",
            "reason": f"Only {len(lines)} short line(s) of text cover {text_area:.1%} of the "
            "image; the rest of it (objects, people, scene, colours, shapes) was not "
            "assessed by the local route.",
            "bbox": None,
        })
    for region in regions:
        if region.kind == "chart":
            gaps.append({
                "topic": "chart values",
                "reason": "The chart's marks (bar heights, points, lines) and colours were "
                "not measured; numbers printed on it are reported as printed values and its "
                "axis labels as ticks.",
                "bbox": norm_box(region.box, width, height),
            })
        elif region.kind == "figure":
            gaps.append({
                "topic": "figure content",
                "reason": "What this figure shows (objects, shapes, colours) was not "
                "assessed; only text printed in it was read.",
                "bbox": norm_box(region.box, width, height),
            })
    for refusal in refused:
        segment = refusal.segment
        gaps.append({
            "topic": "refused text",
            "reason": clip(
                f"a detection read as {segment.text[:40]!r} ({segment.confidence:.2f}) was "
                f"not reported as text: {refusal.reason}", 1000
            ),
            "bbox": norm_box(box_of(segment), width, height),
        })
    gaps.extend(
        {
            "topic": "low-confidence text",
            "reason": clip(f"read as {line.text!r} with confidence {line.confidence:.2f}", 400),
            "bbox": norm_box(line.box, width, height),
        }
        for line in lines
        if line.confidence < min_confidence
    )
    return gaps[:MAX_ITEMS]


def summary(
    regions: Sequence[Region], lines: Sequence[Line], charts: Sequence[Chart],
    width: int, height: int, *, layout_assessed: bool = True,
) -> str:
    counts: dict[str, int] = {}
    for region in regions:
        counts[region.kind] = counts.get(region.kind, 0) + 1
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    if lines:
        head = "; ".join(repr(clip(line.text, 80)) for line in lines[:3])
        summary = (
            f"Local OCR read {len(lines)} text line(s) in {len(regions)} region(s) "
            f"({kinds}) on a {width}x{height} image, in reading order. First lines: {head}."
        )
    else:
        summary = f"Local OCR found no legible text on a {width}x{height} image."
        if regions:
            summary += f" The layout model marked {kinds} (content not assessed)."
    for chart in charts:
        axes = sorted({t.axis for t in chart.ticks})
        summary += (
            f" A chart: {len(chart.ticks)} axis tick(s) on the {'/'.join(axes)} axis, "
            f"{len(chart.values)} value(s) printed on it."
        )
    return clip(f"{summary} {coverage_summary(layout=layout_assessed)}", 4000)
