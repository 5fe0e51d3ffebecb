"""Charts read as charts: axis ticks apart from the values printed on the marks.

OCR sees a chart's numbers as text on rows, and the line grouper joins a number across a
wide gap to what is on its left (right for a price column, wrong here): the tick ``20`` and
the bar value ``18.9`` beside it became one line ``20 18.9``. This module finds the axes
first and hands their ticks and the chart's printed values on as separate items, each
reported for what it is.

An axis is recognised from its numbers alone, the way a reader does: at least three plain
numbers aligned on one edge (a column for a value axis, a row for a category or value axis
at the bottom), evenly spaced on the image and evenly stepped in value. A value axis grows
upward, so its numbers decrease down the image: a table's row numbers or a numbered list
(which grow downward) are never taken for one. A row of ticks (which a table's header of
years also resembles) counts only on a chart: inside a region the layout model called a
figure, or beside a value axis already found.

The marks themselves (bar heights, line positions) are not measured: the evidence says so.
Pure functions.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from deepseek_eyes.vision.routes.segments import Segment

__all__ = ["Chart", "ChartValue", "Tick", "find_charts", "parse_number"]

Box = tuple[float, float, float, float]

MIN_TICKS = 3
#: Spacing of ticks on the image, and their steps in value, may vary this much.
PIXEL_STEP_TOLERANCE = 0.15
VALUE_STEP_TOLERANCE = 0.01

_PLAIN_NUMBER = re.compile(
    r"^(?P<sign>[-+−]?)(?P<cur>[$€£¥]?)(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d*\.?\d+)"
    r"(?P<unit>%|[kKMB])?$"
)
_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}


@dataclass(frozen=True)
class Tick:
    axis: str  # "x" (a row) or "y" (a column)
    segment: Segment
    value: float
    unit: str


@dataclass(frozen=True)
class ChartValue:
    """A number printed in the plot (on or beside a mark) with the category it stands
    over or beside, when one is printed there."""

    segment: Segment
    value: float
    unit: str
    category: str | None


@dataclass
class Chart:
    box: Box
    ticks: list[Tick] = field(default_factory=list)
    values: list[ChartValue] = field(default_factory=list)
    #: The layout model's figure this chart is, when one holds it.
    figure: int | None = None

    @property
    def segments(self) -> set[Segment]:
        return {t.segment for t in self.ticks} | {v.segment for v in self.values}


def parse_number(text: str) -> tuple[float, str] | None:
    """The value and unit of a segment that is one plain number (``20``, ``18.9``,
    ``1,250``, ``$5``, ``40%``, ``2.5k``), or None."""
    match = _PLAIN_NUMBER.match(text.strip())
    if not match:
        return None
    value = float(match.group("num").replace(",", ""))
    unit = match.group("unit") or ""
    if unit in _SCALE:
        value *= _SCALE[unit]
        unit = ""
    if match.group("sign") in ("-", "−"):
        value = -value
    if match.group("cur"):
        unit = _CURRENCY[match.group("cur")]
    return value, unit


def _even(steps: Sequence[float], tolerance: float, floor: float) -> bool:
    mean = statistics.fmean(steps)
    return all(abs(s - mean) <= tolerance * abs(mean) + floor for s in steps)


def _axis(items: list[tuple[Segment, float, str]], position: Callable[[Segment], float],
          decreasing: bool) -> bool:
    positions = [position(s) for s, _, _ in items]
    values = [v for _, v, _ in items]
    value_steps = [b - a for a, b in itertools.pairwise(values)]
    pixel_steps = [b - a for a, b in itertools.pairwise(positions)]
    if decreasing:
        value_steps = [-s for s in value_steps]
    if any(s <= 0 for s in value_steps) or any(s <= 0 for s in pixel_steps):
        return False
    height = statistics.fmean(s.height for s, _, _ in items)
    return _even(value_steps, VALUE_STEP_TOLERANCE, 1e-9) and _even(
        pixel_steps, PIXEL_STEP_TOLERANCE, 0.25 * height
    )


def _clusters(
    items: list[tuple[Segment, float, str]], key: Callable[[Segment], float], tolerance: float,
) -> list[list[tuple[Segment, float, str]]]:
    ordered = sorted(items, key=lambda item: key(item[0]))
    groups: list[list[tuple[Segment, float, str]]] = []
    for item in ordered:
        if groups and key(item[0]) - key(groups[-1][-1][0]) <= tolerance:
            groups[-1].append(item)
        else:
            groups.append([item])
    return [g for g in groups if len(g) >= MIN_TICKS]


def _inside(segment: Segment, box: Box) -> bool:
    cx, cy = (segment.x0 + segment.x1) / 2, segment.cy
    return box[0] <= cx <= box[2] and box[1] <= cy <= box[3]


def _value_axes(numbers: list[tuple[Segment, float, str]], tolerance: float) -> list[list[Tick]]:
    found: list[list[Tick]] = []
    taken: set[Segment] = set()
    for edge in (lambda s: s.x1, lambda s: s.x0):  # right-aligned (left axis), then left
        for group in _clusters([n for n in numbers if n[0] not in taken], edge, tolerance):
            column = sorted(group, key=lambda item: item[0].cy)
            if _axis(column, lambda s: s.cy, decreasing=True):
                found.append([Tick("y", s, v, u) for s, v, u in column])
                taken.update(s for s, _, _ in column)
    return found


def _row_axes(numbers: list[tuple[Segment, float, str]], tolerance: float) -> list[list[Tick]]:
    found: list[list[Tick]] = []
    for group in _clusters(numbers, lambda s: s.cy, tolerance):
        row = sorted(group, key=lambda item: item[0].x0)
        if _axis(row, lambda s: (s.x0 + s.x1) / 2, decreasing=False):
            found.append([Tick("x", s, v, u) for s, v, u in row])
    return found


def _extent(segments: Sequence[Segment]) -> Box:
    return (
        min(s.x0 for s in segments), min(s.y0 for s in segments),
        max(s.x1 for s in segments), max(s.y1 for s in segments),
    )


def _category(value: Segment, words: Sequence[Segment], axis_bottom: float) -> str | None:
    """The label printed under a value's mark (a vertical bar chart's category row, below
    the plot) or, failing that, level with it on the left (a horizontal bar chart)."""
    cx = (value.x0 + value.x1) / 2
    below = [w for w in words if w.y0 >= axis_bottom and w.x0 <= cx <= w.x1]
    if below:
        return min(below, key=lambda w: w.y0).text
    level = [w for w in words if w.x1 <= value.x0 and abs(w.cy - value.cy) <= value.height / 2]
    if level:
        return max(level, key=lambda w: w.x1).text
    return None


def find_charts(segments: Sequence[Segment], figures: Sequence[Box] = ()) -> list[Chart]:
    """The charts among ``segments``: their axes' ticks, the numbers printed in their plot
    and the category under each. ``figures`` are the layout model's figure boxes (a row of
    ticks counts only inside one, or beside a value axis)."""
    numbers = [
        (s, parsed[0], parsed[1])
        for s in segments
        if (parsed := parse_number(s.text)) is not None
    ]
    if len(numbers) < MIN_TICKS:
        return []
    tolerance = 0.5 * statistics.median(s.height for s, _, _ in numbers)
    columns = _value_axes(numbers, tolerance)
    in_columns = {t.segment for axis in columns for t in axis}
    rows = [
        axis for axis in _row_axes([n for n in numbers if n[0] not in in_columns], tolerance)
        if columns or any(all(_inside(t.segment, f) for t in axis) for f in figures)
    ]
    charts: list[Chart] = []
    for axis in [*columns, *rows]:
        segs = [t.segment for t in axis]
        figure = next(
            (i for i, f in enumerate(figures) if all(_inside(s, f) for s in segs)), None
        )
        chart = next((c for c in charts if c.figure is not None and c.figure == figure), None)
        if chart is None:
            box = figures[figure] if figure is not None else _extent(segs)
            chart = Chart(box=box, figure=figure)
            charts.append(chart)
        chart.ticks.extend(axis)
    for chart in charts:
        _collect_values(chart, segments, numbers)
    return charts


def _category_row(
    words: Sequence[Segment], axis_bottom: float, left: float, height: float
) -> list[Segment]:
    """The labels printed in one row just under the plot, right of the value axis."""
    under = [
        w for w in words
        if axis_bottom - 0.5 * height <= w.y0 <= axis_bottom + 2.5 * height and w.x0 > left
    ]
    if not under:
        return []
    first = min(under, key=lambda w: w.cy)
    row = sorted(
        (w for w in under if abs(w.cy - first.cy) <= 0.5 * max(w.height, first.height)),
        key=lambda w: w.x0,
    )
    # The labels run at a regular pitch; a gap well beyond it ends the row (a note printed
    # level with the labels in the next panel is no category).
    gaps = [b.x0 - a.x1 for a, b in itertools.pairwise(row)]
    limit = max(2 * statistics.median(gaps), 2 * height) if gaps else 0.0
    for index, gap in enumerate(gaps):
        if gap > limit:
            return row[: index + 1]
    return row


def _collect_values(
    chart: Chart, segments: Sequence[Segment], numbers: list[tuple[Segment, float, str]],
) -> None:
    """The chart's plot box and the numbers printed in it. The box is the axes' own
    neighbourhood, not the layout model's figure: a dashboard was one figure to the model,
    and its table's and cards' numbers are no values of its chart."""
    ticks = {t.segment for t in chart.ticks}
    columns = [t for t in chart.ticks if t.axis == "y"]
    rows = [t for t in chart.ticks if t.axis == "x"]
    words = [s for s in segments if parse_number(s.text) is None]
    x0, y0, x1, y1 = _extent([t.segment for t in chart.ticks])
    height = statistics.fmean(t.segment.height for t in chart.ticks)
    # Where the plot ends below: the lowest value tick's middle (its baseline), else the
    # top of a row axis; category labels are printed under it.
    axis_bottom = (
        max(t.segment.cy for t in columns) if columns else min(t.segment.y0 for t in rows)
    )
    outer = chart.box if chart.figure is not None else (
        -float("inf"), -float("inf"), float("inf"), float("inf")
    )
    if columns:
        step = (y1 - y0) / max(len(columns) - 1, 1)
        categories = _category_row(words, axis_bottom, x1, height)
        if categories:
            spacing = (max(w.x1 for w in categories) - min(w.x0 for w in categories)) / max(
                len(categories), 1
            )
            right = max(w.x1 for w in categories) + spacing / 2
            bottom = max(w.y1 for w in categories)
        else:
            right, bottom = outer[2], y1 + step / 2
        plot: Box = (x0, y0 - step, right, bottom)
    else:
        plot = (
            (outer[0], outer[1], x1, y1) if chart.figure is not None
            else (x0 - 4 * (x1 - x0) / max(len(rows), 1), y0 - 8 * height, x1, y1)
        )
    chart.box = (
        max(plot[0], outer[0]), max(plot[1], outer[1]), min(plot[2], outer[2]),
        min(plot[3], outer[3]),
    )
    for segment, value, unit in numbers:
        if segment in ticks or not _inside(segment, chart.box):
            continue
        if rows and not columns and segment.y0 >= axis_bottom:
            continue  # under a row axis: another axis's label, not a mark's value
        chart.values.append(
            ChartValue(segment, value, unit, _category(segment, words, axis_bottom))
        )
