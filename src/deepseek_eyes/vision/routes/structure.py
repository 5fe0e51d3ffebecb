"""Page structure from OCR segments and the layout model's regions: typed regions, the
lines each holds, columns kept apart, and the order a person reads them in.

Three steps, each a function here:

1. **Assignment.** Each OCR segment goes to the most specific layout region holding most of
   it (the smallest: a title inside a text box is the title's); the lines of a region are
   grouped from its own segments only, so a line never runs from one region into another.
   Segments outside every region become text blocks of their own, as before layout, and so
   do a figure's (a photographed receipt is one figure to the model: its lines are still
   text, in blocks inside the figure).
2. **Columns.** The model often draws one text box over two columns, and a page with a
   sidebar is two columns of another width. A text region whose lines leave a vertical
   gutter (a gap wider than a line height that no line crosses) is cut at it, one region a
   column. Boxes of text regions are then snapped to their lines: the model's boxes are
   drawn on an 800x608 squeeze of the page and can miss a title's width by a third.
3. **Reading order** by recursive cuts (XY-cut): a band across the page reads before the
   band below it, a column before the column on its right, each recursively. Bands that
   share a gutter (paragraphs of two columns that happen to line up) are joined before the
   columns are cut, or a two-column page would be read across, paragraph by paragraph (but
   only paragraphs: a window's one-line title bar stays a band above its sidebar). Page
   headers go first and footers last (a lone line at the page's top or bottom edge is one,
   whatever the model said); a region inside another is read right after it.

Relations come from the result: ``inside`` for a text region within a figure or table,
``below`` and ``left_of`` between regions read one after the other. Pure functions over
plain data; the model itself is :mod:`deepseek_eyes.vision.routes.regions`.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from deepseek_eyes.vision.routes.regions import LayoutBox
from deepseek_eyes.vision.routes.segments import Line, Segment

__all__ = ["Region", "Relation", "arrange", "reading_order", "relations_between"]

Box = tuple[float, float, float, float]
#: Region types whose lines are the region (their box is snapped to them).
TEXT_KINDS = frozenset({"title", "text", "caption", "header", "footer", "list"})
#: Region types that hold other things (their box is the model's, grown to hold lines).
CONTAINER_KINDS = frozenset({"figure", "table", "chart", "equation"})
#: A segment belongs to a region holding at least this share of its area.
MIN_SHARE = 0.5
#: A text region within a container by this share of its area is inside it.
INSIDE_SHARE = 0.8
#: A vertical gap between a region's lines this many line heights wide is a gutter.
GUTTER = 1.0


@dataclass
class Region:
    """One region of the page: its type, box in pixels, confidence and lines in order."""

    kind: str
    box: Box
    confidence: float
    lines: list[Line] = field(default_factory=list)
    #: The region holding this one (an index into the arranged list), if any.
    inside: int | None = None


@dataclass(frozen=True)
class Relation:
    subject: int
    predicate: str
    object: int


def _area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _overlap(a: Box, b: Box) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _union(boxes: Sequence[Box]) -> Box:
    return (
        min(b[0] for b in boxes), min(b[1] for b in boxes),
        max(b[2] for b in boxes), max(b[3] for b in boxes),
    )


def _segment_box(segment: Segment) -> Box:
    return (segment.x0, segment.y0, segment.x1, segment.y1)


def _padded(box: Box, pad: float) -> Box:
    return (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)


def _owner(segment: Segment, regions: Sequence[Region]) -> int | None:
    """The smallest region holding most of ``segment``. The model's boxes are drawn tight
    (a page number's box was smaller than OCR's box of it), so each is grown by half the
    segment's height first."""
    box = _segment_box(segment)
    area = max(_area(box), 1e-6)
    pad = 0.5 * segment.height
    holding = [
        (i, r) for i, r in enumerate(regions)
        if _overlap(box, _padded(r.box, pad)) / area >= MIN_SHARE
    ]
    if not holding:
        return None
    return min(holding, key=lambda item: _area(item[1].box))[0]


def _columns(lines: Sequence[Line]) -> list[list[Line]]:
    """``lines`` split at the vertical gutters no line crosses, left to right."""
    if len(lines) < 2:
        return [list(lines)]
    height = statistics.median(line.height for line in lines)
    ordered = sorted(lines, key=lambda line: line.box[0])
    groups: list[list[Line]] = [[ordered[0]]]
    right = ordered[0].box[2]
    for line in ordered[1:]:
        if line.box[0] - right > GUTTER * height:
            groups.append([line])
        else:
            groups[-1].append(line)
        right = max(right, line.box[2])
    return groups


def arrange(
    segments: Sequence[Segment],
    layout: Sequence[LayoutBox],
    group_lines: Callable[[Sequence[Segment]], list[Line]],
    group_blocks: Callable[[Sequence[Line]], list[list[int]]],
    *,
    alone: frozenset[Segment] = frozenset(),
    kinds: dict[int, str] | None = None,
    page: tuple[int, int] | None = None,
) -> list[Region]:
    """Regions in reading order, each with its lines in reading order.

    ``group_lines`` and ``group_blocks`` are the route's line and block grouping (passed in,
    not imported: they live with the evidence builder that calls this). Segments in
    ``alone`` (a chart's ticks and values) are lines on their own, never joined to a
    neighbour. ``kinds`` renames layout regions by index (a figure found to be a chart).
    ``page`` (width, height) lets a lone line at the page's edge be its header or footer.
    """
    model = [
        Region((kinds or {}).get(i, box.kind), (box.x0, box.y0, box.x1, box.y1), box.score)
        for i, box in enumerate(layout)
    ]
    owned: dict[int | None, list[Segment]] = {}
    for segment in segments:
        owned.setdefault(_owner(segment, model), []).append(segment)

    def lines_of(members: Sequence[Segment]) -> list[Line]:
        joined = group_lines([s for s in members if s not in alone])
        return [*joined, *(Line((s,)) for s in members if s in alone)]

    regions: list[Region] = []
    for index, region in enumerate(model):
        lines = lines_of(owned.get(index, []))
        if region.kind in TEXT_KINDS:
            if not lines:
                continue  # the model saw text where OCR read none: nothing to report
            columns = _columns(lines) if region.kind in ("text", "list") else [lines]
            regions.extend(
                Region(
                    region.kind, _union([line.box for line in column]), region.confidence,
                    _in_order(column),
                )
                for column in columns
            )
        elif region.kind == "figure":
            # Text in a figure is read as text blocks inside it: a photographed receipt
            # is one figure to the model, and its lines are still the receipt's lines.
            box = _union([region.box, *(line.box for line in lines)])
            regions.append(Region(region.kind, box, region.confidence))
            regions.extend(_blocks(lines, group_blocks))
        else:
            box = _union([region.box, *(line.box for line in lines)])
            regions.append(Region(region.kind, box, region.confidence, _in_order(lines)))
    regions.extend(_blocks(lines_of(owned.get(None, [])), group_blocks))
    for region in regions:
        if region.kind in TEXT_KINDS or region.kind == "chart":
            region.inside = _container(region, regions)
            if region.inside is not None and region.kind in ("header", "footer"):
                region.kind = "text"  # a chart's title is no page header
    if page is not None:
        _retype(regions, page[1])
    order = reading_order(regions)
    renumber = {old: new for new, old in enumerate(order)}
    arranged = [regions[i] for i in order]
    for region in arranged:
        if region.inside is not None:
            region.inside = renumber[region.inside]
    return arranged


def _blocks(
    lines: list[Line], group_blocks: Callable[[Sequence[Line]], list[list[int]]]
) -> list[Region]:
    """Text regions of lines no text region of the model holds: blocks, cut into columns."""
    regions: list[Region] = []
    for members in group_blocks(lines):
        for column in _columns([lines[i] for i in members]):
            confidence = statistics.fmean(line.confidence for line in column)
            regions.append(Region(
                "text", _union([line.box for line in column]), confidence, _in_order(column)
            ))
    return regions


#: A one-line text region wholly within this share of the page's top or bottom is the
#: page's header or footer (the model called a journal's running head plain text).
PAGE_EDGE = 0.08


def _retype(regions: list[Region], height: int) -> None:
    """Types the model's boxes miss, from position: a lone line at the page's top or bottom
    edge is its header or footer; a header just above a chart or figure is its title."""
    if len(regions) < 2:
        return
    for region in regions:
        if region.kind == "text" and len(region.lines) == 1 and region.inside is None:
            if region.box[3] <= PAGE_EDGE * height:
                region.kind = "header"
            elif region.box[1] >= (1 - PAGE_EDGE) * height:
                region.kind = "footer"
    for region in regions:
        if region.kind != "header":
            continue
        line_height = region.box[3] - region.box[1]
        for other in regions:
            if (
                other.kind in ("figure", "chart")
                and -line_height <= other.box[1] - region.box[3] <= line_height
                and other.box[0] <= region.box[0] and region.box[2] <= other.box[2]
            ):
                region.kind = "title"
                break


def _in_order(lines: Sequence[Line]) -> list[Line]:
    """Rows top to bottom (lines overlapping vertically by half their height share a row;
    a baseline a pixel higher does not put a line's right half first), each left to right."""
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda ln: (ln.box[1] + ln.box[3]) / 2):
        if rows:
            last = rows[-1][-1].box
            overlap = min(last[3], line.box[3]) - max(last[1], line.box[1])
            if overlap >= 0.5 * min(last[3] - last[1], line.box[3] - line.box[1]):
                rows[-1].append(line)
                continue
        rows.append([line])
    return [line for row in rows for line in sorted(row, key=lambda ln: ln.box[0])]


def _container(region: Region, regions: Sequence[Region]) -> int | None:
    area = max(_area(region.box), 1e-6)
    holders = [
        (i, other) for i, other in enumerate(regions)
        if other.kind in CONTAINER_KINDS and other is not region
        and _overlap(region.box, other.box) / area >= INSIDE_SHARE
    ]
    if not holders:
        return None
    return min(holders, key=lambda item: _area(item[1].box))[0]


def _split(items: list[int], boxes: Sequence[Box], axis: int) -> list[list[int]]:
    """``items`` cut where no box spans: along y (``axis`` 1, bands) or x (0, columns)."""
    start, end = axis, axis + 2
    ordered = sorted(items, key=lambda i: (boxes[i][start], boxes[i][1 - axis]))
    groups: list[list[int]] = [[ordered[0]]]
    reach = boxes[ordered[0]][end]
    for i in ordered[1:]:
        slack = 0.1 * min(boxes[i][end] - boxes[i][start], reach - boxes[groups[-1][0]][start])
        if boxes[i][start] >= reach - max(slack, 0.0):
            groups.append([i])
        else:
            groups[-1].append(i)
        reach = max(reach, boxes[i][end])
    return groups


def _gutters(items: list[int], boxes: Sequence[Box]) -> list[tuple[float, float]]:
    columns = _split(items, boxes, 0)
    spans = [(min(boxes[i][0] for i in c), max(boxes[i][2] for i in c)) for c in columns]
    return [(a[1], b[0]) for a, b in itertools.pairwise(spans)]


def _shares_gutter(a: list[int], b: list[int], boxes: Sequence[Box]) -> bool:
    return any(
        min(ga[1], gb[1]) > max(ga[0], gb[0])
        for ga in _gutters(a, boxes) for gb in _gutters(b, boxes)
    )


def _order(
    items: list[int], boxes: Sequence[Box], tall: frozenset[int], bands_first: bool = True
) -> list[int]:
    """XY-cut. Bands that share a gutter are joined before columns are cut, but only when
    every region in both is a paragraph (``tall``: two lines or more, or a container): a
    window's one-line title bar above a sidebar and its content is a band of its own."""
    if len(items) <= 1:
        return items
    if bands_first:
        bands = _split(items, boxes, 1)
        if len(bands) > 1:
            joined: list[list[int]] = [bands[0]]
            for band in bands[1:]:
                if all(i in tall for i in (*joined[-1], *band)) and _shares_gutter(
                    joined[-1], band, boxes
                ):
                    joined[-1] = joined[-1] + band
                else:
                    joined.append(band)
            if len(joined) > 1:
                return [i for band in joined for i in _order(band, boxes, tall)]
            return _order(joined[0], boxes, tall, bands_first=False)
    columns = _split(items, boxes, 0)
    if len(columns) > 1:
        return [i for column in columns for i in _order(column, boxes, tall)]
    return sorted(items, key=lambda i: (boxes[i][1], boxes[i][0]))


def reading_order(regions: Sequence[Region]) -> list[int]:
    """Indices of ``regions`` in reading order: page headers, the body by recursive cuts,
    page footers; a region inside another right after it, in its own reading order."""
    boxes = [r.box for r in regions]
    tall = frozenset(
        i for i, r in enumerate(regions) if len(r.lines) >= 2 or r.kind in CONTAINER_KINDS
    )
    top = [i for i, r in enumerate(regions) if r.inside is None]
    headers = [i for i in top if regions[i].kind == "header"]
    footers = [i for i in top if regions[i].kind == "footer"]
    body = [i for i in top if regions[i].kind not in ("header", "footer")]
    by_position = lambda i: (boxes[i][1], boxes[i][0])  # noqa: E731 (a sort key)
    outer = [
        *sorted(headers, key=by_position),
        *(_order(body, boxes, tall) if body else []),
        *sorted(footers, key=by_position),
    ]
    order: list[int] = []

    def emit(i: int) -> None:  # a region, then what it holds (a chart in a figure, its text)
        order.append(i)
        children = [j for j, r in enumerate(regions) if r.inside == i and j not in order]
        for child in _order(children, boxes, tall) if children else []:
            emit(child)

    for i in outer:
        emit(i)
    return order


def relations_between(regions: Sequence[Region]) -> list[Relation]:
    """``inside`` for each region within another; ``below`` or ``left_of`` between regions
    read one after the other, where their boxes say so."""
    relations = [
        Relation(i, "inside", r.inside) for i, r in enumerate(regions) if r.inside is not None
    ]
    for i in range(1, len(regions)):
        a, b = regions[i - 1].box, regions[i].box
        tolerance = 0.1 * min(a[3] - a[1], b[3] - b[1])
        if b[1] >= a[3] - tolerance:
            relations.append(Relation(i, "below", i - 1))
        elif a[2] <= b[0] + tolerance:
            relations.append(Relation(i - 1, "left_of", i))
    return relations
