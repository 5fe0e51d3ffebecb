"""The two table finders: ruled tables from their rules, unruled ones from the OCR boxes.

* **Ruled**: horizontal and vertical rules found by morphological opening of the ink;
  rule positions give the grid, and a rule missing between two grid cells merges them
  (``colspan``/``rowspan``). An OCR detection that crosses a rule is cut at the word
  nearest the rule.
* **Unruled**: rows are detections that share a band; columns are the x-runs the fullest
  rows occupy, separated by gutters no detection of those rows crosses; a lone cell
  sandwiched between two rows of its block spans both, and a header cell with empty cells
  to its right above a fuller header row spans up to the next filled one. Lines aligned
  without a header (a receipt) are no table, nor is prose in columns, and a gutter far
  wider than a table's parts a block in two (a chart's axis beside a table).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deepseek_eyes.vision.routes.layout import Segment
from deepseek_eyes.vision.routes.table_grid import (
    MAX_CELLS,
    Cell,
    Table,
    cell_number,
    center_in,
    finish_table,
    join_texts,
    median,
    split_at,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_TABLES", "ruled_tables", "unruled_tables"]

#: At most this many tables a page: every loop over the image is bounded.
MAX_TABLES = 20
_MAX_RULES = 200


def _positions(profile: Any, minimum: float) -> list[tuple[int, int]]:
    """Runs of ``profile > minimum`` as (start, end) index pairs."""
    import numpy as np

    on = np.concatenate(([False], profile > minimum, [False]))
    edges = np.flatnonzero(on[1:] != on[:-1])
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def ruled_tables(
    rgb: np.ndarray[Any, Any], segments: Sequence[Segment], text_height: float
) -> list[Table]:
    import cv2
    import numpy as np

    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    step_y, step_x = max(1, gray.shape[0] // 64), max(1, gray.shape[1] // 64)
    background = int(np.median(gray[::step_y, ::step_x]))
    ink = (np.abs(gray.astype(np.int16) - background) > 40).astype(np.uint8)
    long_side = max(30, int(2.5 * text_height))
    horizontal = cv2.morphologyEx(ink, cv2.MORPH_OPEN, np.ones((1, long_side), np.uint8))
    vertical = cv2.morphologyEx(
        ink, cv2.MORPH_OPEN, np.ones((max(15, int(1.1 * text_height)), 1), np.uint8)
    )
    grid = cv2.dilate(np.maximum(horizontal, vertical), np.ones((3, 3), np.uint8))
    count, _, stats, _ = cv2.connectedComponentsWithStats(grid, connectivity=8)
    tables: list[Table] = []
    for index in range(1, count):
        x, y, w, h = (int(v) for v in stats[index][:4])
        if w < 3 * text_height or h < 2 * text_height:
            continue
        hsub = horizontal[y:y + h, x:x + w]
        vsub = vertical[y:y + h, x:x + w]
        ys = [(a + b) / 2 + y for a, b in _positions(hsub.sum(axis=1), 2 * text_height)]
        xs = [(a + b) / 2 + x for a, b in _positions(vsub.sum(axis=0), text_height)]
        if not 3 <= len(ys) <= _MAX_RULES or not 3 <= len(xs) <= _MAX_RULES:
            continue  # a box or a single row of fields is not a table
        table = _grid_table(ys, xs, horizontal, vertical, segments)
        if table is not None:
            tables.append(table)
        if len(tables) >= MAX_TABLES:
            break
    return tables


def _covered(mask: np.ndarray[Any, Any], ys: slice, xs: slice) -> float:
    part = mask[ys, xs]
    if part.size == 0:
        return 0.0
    # A rule is a line of ink: the share of its length that any pixel across it covers.
    along = part.max(axis=1) if part.shape[0] > part.shape[1] else part.max(axis=0)
    return float(along.mean())


def _grid_table(
    ys: list[float], xs: list[float], horizontal: np.ndarray[Any, Any],
    vertical: np.ndarray[Any, Any], segments: Sequence[Segment],
) -> Table | None:
    rows, cols = len(ys) - 1, len(xs) - 1
    if rows * cols > MAX_CELLS:
        return None
    parent = list(range(rows * cols))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for r in range(rows):
        inner_y = slice(int(ys[r]) + 3, max(int(ys[r]) + 4, int(ys[r + 1]) - 2))
        for c in range(cols):
            inner_x = slice(int(xs[c]) + 3, max(int(xs[c]) + 4, int(xs[c + 1]) - 2))
            if c + 1 < cols:
                rule = slice(max(0, int(xs[c + 1]) - 2), int(xs[c + 1]) + 3)
                if _covered(vertical, inner_y, rule) < 0.5:
                    parent[find(r * cols + c + 1)] = find(r * cols + c)
            if r + 1 < rows:
                rule = slice(max(0, int(ys[r + 1]) - 2), int(ys[r + 1]) + 3)
                if _covered(horizontal, rule, inner_x) < 0.5:
                    parent[find((r + 1) * cols + c)] = find(r * cols + c)
    groups: dict[int, list[int]] = {}
    for i in range(rows * cols):
        groups.setdefault(find(i), []).append(i)
    table_box = (xs[0], ys[0], xs[-1], ys[-1])
    inside = [s for s in segments if center_in(s, table_box)]
    pieces = [p for s in inside for p in split_at(s, xs[1:-1])]
    cells: list[Cell] = []
    for members in groups.values():
        r0 = min(i // cols for i in members)
        r1 = max(i // cols for i in members)
        c0 = min(i % cols for i in members)
        c1 = max(i % cols for i in members)
        box = (xs[c0], ys[r0], xs[c1 + 1], ys[r1 + 1])
        held = [p for p in pieces if center_in(p, box)]
        cells.append(Cell(
            r0, c0, r1 - r0 + 1, c1 - c0 + 1, join_texts(held), box,
            min((p.confidence for p in held), default=1.0),
        ))
    if sum(1 for c in cells if c.text) < 2:
        return None
    return finish_table(table_box, True, rows, cols, cells)


def _bands(segments: Sequence[Segment]) -> list[list[Segment]]:
    """Segments grouped into rows: a segment joins the row it overlaps by half a height."""
    rows: list[list[Segment]] = []
    for seg in sorted(segments, key=lambda s: (s.cy, s.x0)):
        for row in rows:
            top = max(min(s.y0 for s in row), seg.y0)
            bottom = min(max(s.y1 for s in row), seg.y1)
            if bottom - top >= 0.5 * min(seg.height, median(s.height for s in row)):
                row.append(seg)
                break
        else:
            rows.append([seg])
    for row in rows:
        row.sort(key=lambda s: s.x0)
    return sorted(rows, key=lambda r: min(s.y0 for s in r))


def _columns(rows: Sequence[Sequence[Segment]], gutter: float) -> list[tuple[float, float]]:
    """The x-runs the fullest rows occupy, split by gutters at least ``gutter`` wide."""
    most = max(len(r) for r in rows)
    full = [r for r in rows if len(r) >= max(2, 0.7 * most)]
    spans = sorted((s.x0, s.x1) for r in full for s in r)
    if not spans:
        return []
    columns: list[list[float]] = [[spans[0][0], spans[0][1]]]
    for x0, x1 in spans[1:]:
        if x0 - columns[-1][1] < gutter:
            columns[-1][1] = max(columns[-1][1], x1)
        else:
            columns.append([x0, x1])
    return [(a, b) for a, b in columns]


def _spanned(segment: Segment, columns: Sequence[tuple[float, float]]) -> list[int]:
    """Columns a detection covers: those it overlaps by a third of the narrower of the two."""
    out = []
    for index, (x0, x1) in enumerate(columns):
        overlap = min(segment.x1, x1) - max(segment.x0, x0)
        if overlap > 0.33 * min(segment.x1 - segment.x0, x1 - x0):
            out.append(index)
    if not out:  # inside a gutter: the nearest column
        cx = (segment.x0 + segment.x1) / 2
        out = [min(range(len(columns)),
                   key=lambda i: abs((columns[i][0] + columns[i][1]) / 2 - cx))]
    return out


def unruled_tables(segments: Sequence[Segment], text_height: float) -> list[Table]:
    bands = _bands(segments)
    tables: list[Table] = []
    start = 0
    while start < len(bands) and len(tables) < MAX_TABLES:
        # A block: consecutive bands, each close under the one before.
        end = start + 1
        while end < len(bands):
            above = max(s.y1 for s in bands[end - 1])
            below = min(s.y0 for s in bands[end])
            if below - above > 1.6 * text_height:
                break
            end += 1
        tables += _block_tables(bands[start:end], text_height, depth=0)
        start = end
    return tables[:MAX_TABLES]


def _block_tables(
    block: list[list[Segment]], text_height: float, depth: int
) -> list[Table]:
    """The tables of one block; a gutter far wider than a table's (a chart's axis beside a
    table, two panels side by side) parts it into two blocks, each looked at alone."""
    multi = [r for r in block if len(r) >= 2]
    if len(multi) < 2:
        return []
    columns = _columns(multi, 0.6 * text_height)
    gutters = [(columns[i + 1][0] - columns[i][1], i) for i in range(len(columns) - 1)]
    if gutters and depth < 4:
        width, index = max(gutters)
        if width > 8 * text_height:
            cut = (columns[index][1] + columns[index + 1][0]) / 2
            segs = [s for row in block for s in row]
            left = [s for s in segs if (s.x0 + s.x1) / 2 < cut]
            right = [s for s in segs if (s.x0 + s.x1) / 2 >= cut]
            return [
                *_block_tables(_bands(left), text_height, depth + 1),
                *_block_tables(_bands(right), text_height, depth + 1),
            ]
    table = _block_table(block, text_height)
    return [] if table is None else [table]


def _fits(segment: Segment, columns: Sequence[tuple[float, float]]) -> bool:
    """Whether a detection lies mostly inside one column (not across a gutter or in it)."""
    width = max(segment.x1 - segment.x0, 1e-6)
    return any(
        min(segment.x1, x1) - max(segment.x0, x0) >= 0.5 * width for x0, x1 in columns
    )


def _block_table(block: list[list[Segment]], text_height: float) -> Table | None:
    if sum(1 for r in block if len(r) >= 2) < 2:
        return None
    # Trim rows of one detection at the block's edges that cross a gutter: a title or a
    # caption above or below, not a cell. Trimming again finds the real columns.
    while True:
        multi = [r for r in block if len(r) >= 2]
        if len(multi) < 2:
            return None
        columns = _columns(multi, 0.6 * text_height)
        if len(columns) < 2:
            return None
        trimmed = False
        for edge in (0, -1):
            if len(block[edge]) == 1 and (
                len(_spanned(block[edge][0], columns)) > 1
                or not _fits(block[edge][0], columns)
            ):
                block = block[1:] if edge == 0 else block[:-1]
                trimmed = True
                break
            if len(block[edge]) == 1 and len(block) > 2 and edge == -1:
                # A lone line under the table that starts at its left edge but runs past
                # its first column is prose, not a cell.
                seg = block[-1][0]
                if seg.x1 > columns[0][1] + text_height:
                    block = block[:-1]
                    trimmed = True
                    break
        if not trimmed:
            break
    placed: list[list[tuple[Segment, list[int]]]] = [
        [(s, _spanned(s, columns)) for s in row] for row in block
    ]
    # A lone row whose columns are empty just above and below it, sandwiched close between
    # them, holds cells that span both (a row header drawn across two header rows).
    rowspans: dict[int, int] = {}
    index = 1
    while index < len(placed) - 1:
        own = {c for _, cols in placed[index] for c in cols}
        above = {c for _, cols in placed[index - 1] for c in cols}
        below = {c for _, cols in placed[index + 1] for c in cols}
        top = min(s.y0 for s, _ in placed[index])
        bottom = max(s.y1 for s, _ in placed[index])
        tight = (top - max(s.y1 for s, _ in placed[index - 1]) < 0.5 * text_height
                 and min(s.y0 for s, _ in placed[index + 1]) - bottom < 0.5 * text_height)
        if len(placed[index]) <= 2 and tight and not own & (above | below):
            for seg, _ in placed[index]:
                rowspans[id(seg)] = 2
            placed[index - 1].extend(placed.pop(index))
            continue
        index += 1
    rows = len(placed)
    cols = len(columns)
    cells: list[Cell] = []
    taken: set[tuple[int, int]] = set()
    row_boxes = [
        (min(s.y0 for s, _ in row), max(s.y1 for s, _ in row)) for row in placed
    ]
    for r, row in enumerate(placed):
        by_start: dict[int, list[tuple[Segment, list[int]]]] = {}
        for seg, spanned in row:
            by_start.setdefault(spanned[0], []).append((seg, spanned))
        for c0, members in by_start.items():
            c1 = max(max(sp) for _, sp in members)
            span_rows = max(rowspans.get(id(s), 1) for s, _ in members)
            segs = [s for s, _ in members]
            box = (min(s.x0 for s in segs), min(s.y0 for s in segs),
                   max(s.x1 for s in segs), max(s.y1 for s in segs))
            cells.append(Cell(r, c0, span_rows, c1 - c0 + 1, join_texts(segs), box,
                              min(s.confidence for s in segs)))
            taken.update((rr, cc) for rr in range(r, r + span_rows) for cc in range(c0, c1 + 1))
    for r in range(rows):
        for c in range(cols):
            if (r, c) not in taken:
                box = (columns[c][0], row_boxes[r][0], columns[c][1], row_boxes[r][1])
                cells.append(Cell(r, c, 1, 1, "", box, 1.0))
    filled = [c for c in cells if c.text]
    numeric = sum(1 for c in filled if cell_number(c.text) is not None)
    lengths = sorted(len(c.text) for c in filled)
    dense = sum(1 for row in placed if len(row) >= 2)
    # Prose in columns is not a table, nor a form's labels: a table holds numbers or short
    # cells in 3+ columns, and most of its rows hold two cells or more.
    if (
        rows < 3
        or not (numeric >= 2 or cols >= 3)
        or lengths[len(lengths) // 2] > 30
        or dense < 0.6 * rows
    ):
        return None
    segs = [s for row in placed for s, _ in row]
    box = (min(s.x0 for s in segs), min(s.y0 for s in segs),
           max(s.x1 for s in segs), max(s.y1 for s in segs))
    table = finish_table(box, False, rows, cols, cells[:MAX_CELLS])
    # Without rules and without a header, aligned lines are a list (a receipt's items and
    # prices, a form's labels and values): naming no column, a grid would add nothing.
    return _widen_headers(table) if table.header_rows else None


def _widen_headers(table: Table) -> Table:
    """Without rules, a merged header shows only as a header cell with empty cells to its
    right above a fuller header row (``2025`` over ``H1 H2``): it spans up to the next
    filled cell of its row."""
    if table.header_rows - table.caption_rows < 2:
        return table
    cells = list(table.cells)
    for row in range(table.caption_rows, table.header_rows - 1):
        own = sorted((c for c in cells if c.row == row), key=lambda c: c.col)
        for cell in own:
            if not cell.text:
                continue
            end = cell.col + cell.colspan
            while end < table.cols:
                nxt = next((c for c in own if c.col == end), None)
                if nxt is None or nxt.text or nxt.rowspan > 1:
                    break
                cells.remove(nxt)
                end += 1
            if end > cell.col + cell.colspan:
                cells[cells.index(cell)] = Cell(cell.row, cell.col, cell.rowspan,
                                                end - cell.col, cell.text, cell.box,
                                                cell.confidence)
    ordered = tuple(sorted(cells, key=lambda c: (c.row, c.col)))
    return Table(table.box, table.ruled, table.rows, table.cols, ordered,
                 table.header_rows, table.name_col, table.caption_rows)
