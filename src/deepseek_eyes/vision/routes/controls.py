"""Interface elements on the local route: buttons, text fields, checkboxes, tabs, banners.

Desktop and browser screenshots reach the model through this route, and OCR alone read
two buttons side by side as one line (``Save changes Cancel``) and said nothing of what was
a button, a field or a banner. Here the elements are found from geometry and appearance
with plain OpenCV, and reported as evidence objects with their text and box: targets the
desktop's pixel fallback and a browser screenshot can point at.

How each is recognised (a decision per kind, all from one pass over the image):

* closed rectangular outlines (edges, then contours whose area fills their bounding box),
  judged by their size against the page's text height, whether their inside differs from
  what surrounds them (a fill) and where the text inside them sits: a **button** holds one
  short centred line or is filled; a **text field** is wide, unfilled, its text (a value or
  a placeholder) left-aligned or absent; a **banner** is a filled strip across most of the
  width; a **checkbox** is a small square with no word inside, named by the text just right
  of it, ``checked`` when its inside is filled or marked;
* **tabs**: two or more short labels standing on one long horizontal rule; the one with
  its own thicker underline is ``selected``.

An OCR detection that runs across two elements is cut at the element's edge
(:func:`deepseek_eyes.vision.routes.tables.split_at`), and in the evidence an OCR line that
covered several elements becomes one line per element. Pure functions over an RGB array and
OCR segments; :func:`add_controls` writes into an unchanged ``deepseekeyes.evidence.v1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepseek_eyes.vision.routes.entries import norm_box
from deepseek_eyes.vision.routes.layout import Segment
from deepseek_eyes.vision.routes.table_grid import median, split_at, text_height_on

if TYPE_CHECKING:
    import numpy as np

__all__ = ["KINDS", "Control", "add_controls", "find_controls"]

Box = tuple[float, float, float, float]

KINDS = ("button", "text_field", "checkbox", "tab", "banner")
#: Caps: contours looked at, and elements reported, per image.
MAX_CANDIDATES = 5000
MAX_CONTROLS = 200
#: Colour distance (sum over RGB) above which an inside counts as filled.
_FILL_DELTA = 36


@dataclass(frozen=True)
class Control:
    """One interface element: its kind, its text (``""`` when it shows none), its box in
    pixels and what else was seen (``checked``, ``selected``, ``filled``, its label)."""

    kind: str
    text: str
    box: Box
    confidence: float
    attributes: tuple[str, ...] = ()


def _rectangles(gray: np.ndarray[Any, Any], text_height: float) -> list[tuple[int, int, int, int]]:
    """Closed, nearly rectangular outlines (x0, y0, x1, y1), outermost kept of near twins."""
    import cv2
    import numpy as np

    edges = cv2.Canny(gray, 20, 60)
    edges = cv2.dilate(edges, np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    height, width = gray.shape[:2]
    found: list[tuple[int, int, int, int]] = []
    for contour in contours[:MAX_CANDIDATES]:
        x, y, w, h = cv2.boundingRect(contour)
        if w < 0.6 * text_height or h < 0.6 * text_height:
            continue
        if w > 0.99 * width and h > 0.9 * height:
            continue  # the frame of the whole picture (a field may be as wide as its window)
        if h > 6 * text_height:
            continue  # a panel or a card: a container, not a control
        if cv2.contourArea(contour) < 0.85 * w * h:
            continue
        found.append((x, y, x + w, y + h))
    found.sort(key=lambda b: -(b[2] - b[0]) * (b[3] - b[1]))
    kept: list[tuple[int, int, int, int]] = []
    for box in found:
        if not any(_iou(box, other) > 0.7 for other in kept):
            kept.append(box)
    return kept


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _colour(rgb: np.ndarray[Any, Any], x0: int, y0: int, x1: int, y1: int) -> tuple[int, ...]:
    import numpy as np

    height, width = rgb.shape[:2]
    part = rgb[max(0, y0):min(height, y1), max(0, x0):min(width, x1)]
    if part.size == 0:
        return (255, 255, 255)
    return tuple(int(v) for v in np.median(part.reshape(-1, 3), axis=0))


def _distance(a: Sequence[int], b: Sequence[int]) -> int:
    return sum(abs(int(p) - int(q)) for p, q in zip(a, b, strict=True))


def _inside(segment: Segment, box: Sequence[float], slack: float = 3.0) -> bool:
    cx = (segment.x0 + segment.x1) / 2
    return (box[0] - slack <= segment.x0 and segment.x1 <= box[2] + slack
            and box[1] - slack <= segment.cy <= box[3] + slack
            and box[0] <= cx <= box[2])


def _appearance(rgb: np.ndarray[Any, Any], box: tuple[int, int, int, int]) -> tuple[bool, str]:
    """Whether the inside is filled against the outside, and the inside's colour."""
    x0, y0, x1, y1 = box
    pad = 3
    inside = _colour(rgb, x0 + pad, y0 + pad, x1 - pad, y0 + 2 * pad)  # a band below the top
    inside_low = _colour(rgb, x0 + pad, y1 - 2 * pad, x1 - pad, y1 - pad)
    outside = _colour(rgb, x0, y0 - 3 * pad, x1, y0 - pad)
    outside_low = _colour(rgb, x0, y1 + pad, x1, y1 + 3 * pad)
    filled = (_distance(inside, outside) > _FILL_DELTA
              and _distance(inside_low, outside_low) > _FILL_DELTA)
    return filled, "#{:02x}{:02x}{:02x}".format(*inside[:3])


def _classify(
    rgb: np.ndarray[Any, Any], box: tuple[int, int, int, int], texts: list[Segment],
    text_height: float, image_width: int,
) -> tuple[str, list[str]] | None:
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    filled, fill = _appearance(rgb, box)
    attributes = ["filled", f"fill {fill}"] if filled else []
    words = [t for t in texts if len(t.text.strip()) >= 3]
    if (
        w <= 2 * text_height and h <= 2 * text_height and 0.75 <= w / h <= 1.33
        and not words
    ):
        return "checkbox", ["checked" if filled or texts else "unchecked"]
    if not texts and not filled and h <= 3 * text_height and w >= 4 * h:
        return "text_field", ["empty"]
    if not texts:
        return None
    text_box = (min(t.x0 for t in texts), min(t.y0 for t in texts),
                max(t.x1 for t in texts), max(t.y1 for t in texts))
    rows = len({round(t.cy / max(text_height, 1.0)) for t in texts})
    if filled and w >= 0.5 * image_width and h <= 4.5 * text_height:
        return "banner", attributes
    if h > 3.2 * text_height or rows > 1:
        return None
    centred = abs((text_box[0] + text_box[2]) / 2 - (x0 + x1) / 2) <= 0.15 * w
    left = text_box[0] - x0 <= 0.25 * w and not centred
    if w >= 4 * h and not filled and (left or w > 0.3 * image_width):
        return "text_field", []
    if w <= 0.5 * image_width and (centred or filled):
        return "button", attributes
    return None


def _long_rules(ink: np.ndarray[Any, Any], minimum: int) -> list[tuple[int, int, int]]:
    """Horizontal rules at least ``minimum`` px long, one pixel row each: (y, x0, x1)."""
    import numpy as np

    out: list[tuple[int, int, int]] = []
    for y in np.flatnonzero(ink.sum(axis=1) >= minimum)[:200]:
        row = np.concatenate(([0], ink[y], [0]))
        edges = np.flatnonzero(row[1:] != row[:-1])
        runs = edges.reshape(-1, 2)
        lengths = runs[:, 1] - runs[:, 0]
        best = int(np.argmax(lengths))
        if lengths[best] >= minimum:
            out.append((int(y), int(runs[best, 0]), int(runs[best, 1])))
    merged: list[tuple[int, int, int]] = []
    for rule in out:  # a rule two pixels thick is one rule, at its top row
        if merged and rule[0] - merged[-1][0] <= 4 and abs(rule[1] - merged[-1][1]) < 4:
            continue
        merged.append(rule)
    return merged


def _tabs(
    gray: np.ndarray[Any, Any], segments: Sequence[Segment], text_height: float,
    taken: Sequence[Box],
) -> list[Control]:
    """Short labels in one row standing on a long horizontal rule."""
    import numpy as np

    height, width = gray.shape
    step_y, step_x = max(1, height // 64), max(1, width // 64)
    background = int(np.median(gray[::step_y, ::step_x]))
    ink = (np.abs(gray.astype(np.int16) - background) > 30).astype(np.uint8)
    out: list[Control] = []
    free = [s for s in segments if not any(_inside(s, box) for box in taken)]
    claimed: set[int] = set()
    for ry, rx0, rx1 in _long_rules(ink, max(25, int(width * 0.3)))[:50]:
        # Tabs are named by words: a window's title-bar dots are not tabs.
        above = [s for s in free if 0 <= ry - s.y1 <= 1.2 * text_height
                 and s.x0 >= rx0 - 2 and s.x1 <= rx1 + 2 and len(s.text) <= 30
                 and sum(ch.isalpha() for ch in s.text) >= 2]
        if len(above) < 2:
            continue
        band = median(s.cy for s in above)
        row: list[Segment] = []
        for seg in sorted(above, key=lambda s: s.x0):
            # Tabs stand side by side on one line: apart, level, each named once.
            if abs(seg.cy - band) <= 0.3 * text_height and id(seg) not in claimed and (
                not row or seg.x0 > row[-1].x1
            ):
                row.append(seg)
        if len(row) < 2:
            continue
        claimed.update(id(seg) for seg in row)
        for seg in row:
            # The selected tab's own underline: ink in two rows or more just above the rule,
            # under most of the label.
            strip = ink[max(0, ry - 6):ry, int(seg.x0):int(seg.x1) + 1]
            selected = strip.size > 0 and float((strip.sum(axis=0) >= 2).mean()) > 0.6
            box = (seg.x0, seg.y0, seg.x1, float(ry))
            out.append(Control("tab", seg.text, box, round(seg.confidence * 0.9, 4),
                               ("selected",) if selected else ()))
        if len(out) >= MAX_CONTROLS:
            break
    return out


def _strips(
    rgb: np.ndarray[Any, Any], text_height: float
) -> list[tuple[int, int, int, int]]:
    """Filled bands across the whole width (a bar at the top of a page has no edge above it,
    so no closed outline): runs of rows whose own colour fills most of the row and differs
    from the page's."""
    import numpy as np

    height, width = rgb.shape[:2]
    step = max(1, width // 64)
    sample = rgb[:, ::step].astype(np.int16)
    row_colour = np.median(sample, axis=1)
    page = np.median(row_colour, axis=0)
    same = (np.abs(sample - row_colour[:, None, :]).sum(axis=2) <= 24).mean(axis=1)
    coloured = (np.abs(row_colour - page).sum(axis=1) > _FILL_DELTA) & (same >= 0.6)
    out: list[tuple[int, int, int, int]] = []
    y = 0
    while y < height:
        if not coloured[y]:
            y += 1
            continue
        start = y
        reference = row_colour[y]
        while y < height and coloured[y] and np.abs(row_colour[y] - reference).sum() <= 24:
            y += 1
        if 0.8 * text_height <= y - start <= 4.5 * text_height:
            out.append((0, start, width, y))
        if len(out) >= 20:
            break
    return out


def _field_label(box: Box, segments: Sequence[Segment], text_height: float) -> str:
    """The text just above a field, starting near its left edge, or just to its left."""
    above = [s for s in segments
             if -0.3 * text_height <= box[1] - s.y1 <= 1.5 * text_height
             and abs(s.x0 - box[0]) <= text_height]
    if above:
        return min(above, key=lambda s: box[1] - s.y1).text
    for seg in segments:
        if 0 <= box[0] - seg.x1 <= 3 * text_height and abs(seg.cy - (box[1] + box[3]) / 2) <= (
            0.5 * text_height
        ):
            return seg.text
    return ""


def find_controls(
    rgb: np.ndarray[Any, Any], segments: Sequence[Segment],
    exclude: Sequence[Box] = (),
) -> list[Control]:
    """Interface elements on an RGB image (H×W×3, uint8) read into ``segments``; nothing is
    looked for inside the ``exclude`` boxes (tables already found: their cells are boxes).

    Raises:
        ValueError: the array is not an H×W×3 image.
    """
    import cv2

    text_height = text_height_on(rgb, segments)
    if text_height is None:
        return []
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    width = rgb.shape[1]
    controls: list[Control] = []
    used: set[int] = set()

    def excluded(box: Sequence[float]) -> bool:
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        return any(e[0] <= cx <= e[2] and e[1] <= cy <= e[3] for e in exclude)

    rectangles = [r for r in _rectangles(gray, text_height) if not excluded(r)]
    rectangles += [r for r in _strips(rgb, text_height) if not excluded(r)
                   and not any(_iou(r, other) > 0.7 for other in rectangles)]
    # Smallest first: a button inside a banner or a toolbar claims its own text.
    for box in sorted(rectangles, key=lambda b: (b[2] - b[0]) * (b[3] - b[1])):
        texts = [s for i, s in enumerate(segments) if i not in used and _inside(s, box)]
        crossing = [
            (i, s) for i, s in enumerate(segments)
            if i not in used and box[1] <= s.cy <= box[3] and not _inside(s, box)
            and (s.x0 < box[0] < s.x1 - 2 or s.x0 + 2 < box[2] < s.x1)
        ]
        for _, seg in crossing:  # a detection running over the edge: its part inside
            texts += [p for p in split_at(seg, [box[0], box[2]])
                      if box[0] <= (p.x0 + p.x1) / 2 <= box[2]]
        verdict = _classify(rgb, box, texts, text_height, width)
        if verdict is None:
            continue
        kind, attributes = verdict
        for i, s in enumerate(segments):
            if _inside(s, box):
                used.add(i)
        text = "" if kind == "checkbox" else " ".join(
            t.text for t in sorted(texts, key=lambda t: t.x0))
        if kind == "checkbox":
            label = next((s.text for s in sorted(segments, key=lambda s: s.x0)
                          if 0 <= s.x0 - box[2] <= 3 * text_height
                          and box[1] - 4 <= s.cy <= box[3] + 4 and len(s.text) >= 3), "")
            text = label
        if kind == "text_field":
            label = _field_label(box, segments, text_height)
            if label:
                attributes = [*attributes, f"label {label}"]
        confidence = min((t.confidence for t in texts), default=0.7) * 0.9
        controls.append(Control(kind, text, tuple(float(v) for v in box),  # type: ignore[arg-type]
                                round(confidence, 4), tuple(attributes)))
        if len(controls) >= MAX_CONTROLS:
            break
    taken = [c.box for c in controls] + list(exclude)
    controls += _tabs(gray, segments, text_height, taken)
    return sorted(controls, key=lambda c: (c.box[1], c.box[0]))[:MAX_CONTROLS]


def _pixels(bbox: Any, width: int, height: int) -> Box | None:
    if not isinstance(bbox, list) or len(bbox) != 4:
        return None
    return (bbox[0] * width, bbox[1] * height, (bbox[0] + bbox[2]) * width,
            (bbox[1] + bbox[3]) * height)


def add_controls(
    evidence: dict[str, Any], controls: Sequence[Control], width: int, height: int
) -> None:
    """Write ``controls`` into a ``deepseekeyes.evidence.v1`` object, in place: one object
    each (label ``button "Save changes"``, the kind first among its attributes), and every
    OCR line that ran across two or more text-bearing elements replaced by one line each."""
    if not controls:
        return
    objects: list[dict[str, Any]] = evidence["objects"]
    next_id = 1 + max((int(o["id"][1:]) for o in objects), default=0)
    for control in controls:
        if len(objects) >= 500:
            break
        label = f'{control.kind.replace("_", " ")} "{control.text}"' if control.text else (
            control.kind.replace("_", " "))
        attributes = [control.kind, *control.attributes]
        if control.text:
            attributes.append(f"text {control.text}")
        objects.append({
            "id": f"o{next_id}", "label": label[:200], "bbox": norm_box(control.box, width, height),
            "confidence": round(min(max(control.confidence, 0.0), 1.0), 4),
            "attributes": [a[:100] for a in attributes][:32],
        })
        next_id += 1
    worded = [c for c in controls if c.text and c.kind != "checkbox"]
    ocr: list[dict[str, Any]] = evidence["ocr"]
    rebuilt: list[dict[str, Any]] = []
    for entry in ocr:
        box = _pixels(entry["bbox"], width, height)
        hits = [] if box is None else [
            c for c in worded
            if min(box[3], c.box[3]) - max(box[1], c.box[1]) > 0.5 * (box[3] - box[1])
            and min(box[2], c.box[2]) - max(box[0], c.box[0]) > 0
        ]
        if len(hits) < 2:
            rebuilt.append(entry)
            continue
        rebuilt.extend(
            {"text": control.text[:2000], "bbox": norm_box(control.box, width, height),
             "confidence": entry["confidence"]}
            for control in sorted(hits, key=lambda c: c.box[0])
        )
        # Words of the line outside every element are kept, under the line's own box.
        rest = str(entry["text"])
        for control in hits:
            rest = rest.replace(control.text, " ", 1)
        rest = " ".join(rest.split())
        if rest:
            rebuilt.append({**entry, "text": rest})
    ocr[:] = rebuilt[:2000]
    counts: dict[str, int] = {}
    for control in controls:
        counts[control.kind] = counts.get(control.kind, 0) + 1
    told = ", ".join(f"{n} {kind.replace('_', ' ')}(s)" for kind, n in counts.items())
    evidence["summary"] = f"{evidence['summary']} Interface elements: {told}."[:4000]
