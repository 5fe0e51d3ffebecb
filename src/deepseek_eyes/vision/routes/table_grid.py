"""A table as a grid: cells with row, column and spans, its header and the column that
names its rows, and the small readings every finder shares (a cell's number, cutting an OCR
detection at a rule).

The header is decided here, once, for ruled and unruled tables alike: the leading rows
that hold no number or hold a merged cell, each cell a name (``Q3``, ``H1`` and ``2025`` are
names; a date or ``Register 3`` is a value), after any lone title lines. A header cell
spanning columns names each of them, and stacked header rows join (``2025 H1``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.vision.routes.layout import Segment

__all__ = [
    "MAX_CELLS", "Box", "Cell", "Table", "cell_number", "center_in", "finish_table",
    "join_texts", "median", "split_at", "text_height_on",
]

Box = tuple[float, float, float, float]

#: At most this many cells a table: every loop over a grid is bounded.
MAX_CELLS = 2000
#: Header rows at most: a table whose first four rows hold no number has no header we trust.
_MAX_HEADER_ROWS = 3

_CELL_NUMBER = re.compile(
    r"^\(?(?P<sign>[-+−]?)(?P<cur>[$€£¥]?)\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\)?\s?(?P<unit>%|[A-Za-z]{1,3})?$"
)
_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CELL_UNITS = frozenset({"%", "k", "K", "M", "m", "bn", "B", "kg", "g", "km", "ms", "s", "h",
                         "GB", "MB", "kB", "TB", "pt", "px", "x"})


@dataclass(frozen=True)
class Cell:
    """One cell: its first row and column, its spans, its text and box in pixels."""

    row: int
    col: int
    rowspan: int
    colspan: int
    text: str
    box: Box
    confidence: float


@dataclass(frozen=True)
class Table:
    """A table: its grid, its cells (empty ones included), its header rows and the column
    that names the rows (``None`` when no column does)."""

    box: Box
    ruled: bool
    rows: int
    cols: int
    cells: tuple[Cell, ...]
    header_rows: int
    name_col: int | None
    #: Lone lines above the header (a title inside the table's block): no column's name.
    caption_rows: int = 0

    def cell_at(self, row: int, col: int) -> Cell | None:
        for cell in self.cells:
            if cell.row <= row < cell.row + cell.rowspan and (
                cell.col <= col < cell.col + cell.colspan
            ):
                return cell
        return None

    def column_name(self, col: int) -> str:
        """The header texts above a column, top to bottom (a merged header names every
        column it spans)."""
        names: list[str] = []
        for row in range(self.caption_rows, self.header_rows):
            cell = self.cell_at(row, col)
            if cell is not None and cell.text and (not names or names[-1] != cell.text):
                names.append(cell.text)
        return " ".join(names)

    def row_name(self, row: int) -> str:
        if self.name_col is None:
            return ""
        cell = self.cell_at(row, self.name_col)
        return cell.text if cell is not None else ""

    def row_texts(self) -> list[tuple[int, list[Cell]]]:
        """Each row's cells that start in it, left to right."""
        out: list[tuple[int, list[Cell]]] = []
        for row in range(self.rows):
            cells = sorted((c for c in self.cells if c.row == row), key=lambda c: c.col)
            out.append((row, cells))
        return out


def text_height_on(rgb: Any, segments: Sequence[Segment]) -> float | None:
    """The typical height of the text ``segments`` read on ``rgb`` (at least 8 px), the unit
    the table and control finders measure gaps in; None with no text (nothing to look for).

    Raises:
        ValueError: ``rgb`` is not an H×W×3 image array.
    """
    if getattr(rgb, "ndim", 0) != 3 or rgb.shape[2] != 3 or min(rgb.shape[:2]) < 1:
        raise ValueError(f"an H×W×3 RGB image is needed, not shape {getattr(rgb, 'shape', None)}")
    if not segments:
        return None
    return max(8.0, median(s.height for s in segments))


def median(values: Iterable[float]) -> float:
    """The median, without importing ``statistics`` (its imports cost start-up time every
    command that builds the local route would pay)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of nothing")
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def cell_number(text: str) -> tuple[float, str] | None:
    """The number a cell holds and its unit (``"$1,204"`` → ``(1204.0, "USD")``), or
    ``None`` when the cell is not one number."""
    match = _CELL_NUMBER.match(text.strip())
    if match is None:
        return None
    unit = match.group("unit") or ""
    if unit and unit not in _CELL_UNITS:
        return None
    value = float(match.group("num").replace(",", ""))
    negative = match.group("sign") in ("-", "−") or (
        text.strip().startswith("(") and text.strip().endswith(")")
    )
    if negative:
        value = -value
    cur = match.group("cur")
    return value, _CURRENCY[cur] if cur else unit


def split_at(segment: Segment, cuts: Sequence[float]) -> list[Segment]:
    """A detection cut at the x positions ``cuts`` (a rule or a control's edge it crosses),
    at the word boundary nearest each cut, each piece boxed by its share of the characters.
    A detection of one word, or with no word boundary near a cut, stays whole."""
    text = segment.text
    width = segment.x1 - segment.x0
    inside = sorted(c for c in cuts if segment.x0 < c < segment.x1)
    if not inside or width <= 0 or " " not in text:
        return [segment]
    per_char = width / max(len(text), 1)
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    breaks: list[int] = []
    for cut in inside:
        index = min(spaces, key=lambda i: abs(segment.x0 + (i + 0.5) * per_char - cut))
        # A space more than four characters from the cut is another word boundary.
        if abs(segment.x0 + (index + 0.5) * per_char - cut) <= 4 * per_char and (
            index not in breaks
        ):
            breaks.append(index)
    pieces: list[Segment] = []
    start = 0
    for index in [*sorted(breaks), len(text)]:
        piece = text[start:index].strip()
        if piece:
            x0 = segment.x0 + start * per_char
            x1 = segment.x0 + index * per_char
            pieces.append(Segment(piece, x0, segment.y0, x1, segment.y1, segment.confidence))
        start = index + 1
    return pieces or [segment]


def join_texts(segments: Sequence[Segment]) -> str:
    """Detections of one cell as its text, line by line, left to right."""
    return " ".join(s.text for s in sorted(segments, key=lambda s: (round(s.cy / 8), s.x0)))


def center_in(segment: Segment, box: Box) -> bool:
    cx = (segment.x0 + segment.x1) / 2
    return box[0] <= cx <= box[2] and box[1] <= segment.cy <= box[3]


def _is_year(text: str) -> bool:
    return len(text) == 4 and text.isdigit() and 1800 <= int(text) <= 2199


def _names(text: str) -> bool:
    """Whether a cell's text can be a column's name: no token with digits but a year or a
    short code with a letter (``Q3``, ``H1``, ``FY24``)."""
    for token in text.split():
        token = token.strip("()[],:;")
        if any(ch.isdigit() for ch in token) and not (
            _is_year(token) or (len(token) <= 4 and any(ch.isalpha() for ch in token))
        ):
            return False
    return True


def finish_table(box: Box, ruled: bool, rows: int, cols: int, cells: list[Cell]) -> Table:
    """The header rows and the row-name column of a grid of cells.

    The header is the leading rows that hold no number (a year is a header's word, not a
    value) or hold a merged cell, extended to the end of any cell spanning down from it.
    """
    numeric_rows = {
        c.row for c in cells if c.text and not _is_year(c.text) and cell_number(c.text) is not None
    }
    merged_rows = {c.row for c in cells if c.colspan > 1 or c.rowspan > 1}
    filled: dict[int, int] = {}
    for c in cells:
        if c.text:
            filled[c.row] = filled.get(c.row, 0) + 1
    header_rows = caption_rows = 0
    if numeric_rows:
        # Lone lines on top (a panel's title, a shop's name over a receipt) are no header;
        # a header row names columns: two filled cells at least or a merged one, each a
        # name (a date or "Register 3" is a value, "Q3", "H1" and "2025" are names).
        start = 0
        while start < rows - 1 and filled.get(start, 0) == 1 and (
            start not in numeric_rows and start not in merged_rows
        ):
            start += 1
        end = start
        while end < min(start + _MAX_HEADER_ROWS, rows - 1) and (
            end not in numeric_rows or end in merged_rows
        ) and (filled.get(end, 0) >= 2 or end in merged_rows) and all(
            _names(c.text) for c in cells if c.row == end
        ):
            end += 1
        header_rows, caption_rows = (end, start) if end > start else (0, 0)
        for cell in cells:  # a cell spanning down from the header keeps it open
            if cell.row < header_rows:
                header_rows = max(header_rows, min(cell.row + cell.rowspan, rows - 1))
    elif rows > 1:
        header_rows = 1
    first = [c for c in cells if c.col == 0 and c.row >= header_rows and c.text]
    words = [c for c in first if cell_number(c.text) is None]
    name_col = 0 if first and len(words) * 2 >= len(first) and cols > 1 else None
    ordered = tuple(sorted(cells, key=lambda c: (c.row, c.col)))
    return Table(box, ruled, rows, cols, ordered, header_rows, name_col, caption_rows)
