"""Fitting any image to the OCR engine at full resolution: padded, tiled, never shrunk.

RapidOCR first scales an image so its long side is at most 2000 px and its short side at
least 30 px, rounding both to multiples of 32. A 3840×2160 screenshot is therefore read at
half size, where 13-px text becomes 7-px text and half its lines come back misread; a 20000×2
strip or a 3×4000 column rounds its short side to zero and the engine raises
``ResizeImgError``; a 3×1900 column is blown up to 736×437000 by the detector (whose short
side is always scaled up to 736); a long page screenshot (1280×20000) survives but shrinks
tenfold, below legibility. So the local route never hands the engine such a shape:

* **Tiling, not refusing or shrinking.** Every image is read at full resolution: an image
  whose long side exceeds ``TILE_SIDE`` is cut into overlapping tiles within the engine's
  limit, each read unshrunk, and the boxes are mapped back to the image. A thin image (more
  than ``MAX_ASPECT`` times longer than wide, short side within the limit) is a run of tiles
  along its long axis, overlapping by an eighth of a tile; any other large image is a grid
  of rows and columns of equal tiles overlapping by at least ``GRID_OVERLAP`` px (the
  fewest that fit: a 4K screen is 2×2, not 3×2). Cost grows with the area read; past
  ``MAX_TILES`` tiles grow instead of multiplying, so the engine shrinks them as it would
  have: bounded time, never a refusal. Images up to ``TILE_SIDE`` are one tile, exactly
  as before.
* **Sheets: thin tiles read together.** The detector's cost follows its input area after
  that scale-up to 736, so a thin tile costs as much as a square one. Thin tiles are
  therefore stacked across their short side, ``GAP`` px apart, onto near-square sheets (tile
  length about √(long × short)), and one engine call reads a whole sheet: a 20000×40 strip
  is one call of about 1200×1440, not twelve calls of 5888×736. Each detection goes back to
  the tile whose band it overlaps most; one found only in a gap or padding is dropped. A
  single row or column of grid tiles is stacked the same way; a grid of rows and columns
  has tiles over 1000 px on both sides, each a sheet of its own.
* **Padding, on the bottom and right only.** A sheet whose short side is under ``MIN_SIDE``
  or whose aspect exceeds ``MAX_ASPECT`` is padded up to both limits with the median colour
  of the image's border (the engine's own letterbox is black, a false edge on a light page).
  Padding on the far sides leaves box coordinates untouched; boxes are clipped to the real
  pixels afterwards.
* **Seams, one axis at a time.** A grid's seams are two 1-D problems: the tiles of each row
  are merged along x (vertical seams) into a strip, then the strips along y (horizontal
  seams); a run of tiles is one of the two. In each, a detection is matched with one of the
  previous piece that overlaps it on both axes. If one spans the other along the seam's
  axis it is kept (a piece cut by the seam yields to the whole copy; of two whole copies
  the more confident stays); otherwise they are two pieces of one long line and are
  joined, the text both read in the overlap counted once, allowing for a glyph or two cut
  by the seam being misread at either cut end. So a line crossing a vertical seam is
  joined once in its row, a line inside an overlap is kept once, and a line at a corner
  is joined in each row and then kept once between the rows. Nothing depends on a box
  touching the cut edge: a seam that falls between two words leaves no edge to touch.

Pure functions over arrays and :class:`~deepseek_eyes.vision.routes.layout.Segment`, so they are
tested without loading an OCR model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from deepseek_eyes.vision.routes.layout import Segment

__all__ = [
    "MAX_ASPECT",
    "MAX_TILES",
    "MIN_SIDE",
    "TILE_SIDE",
    "Sheet",
    "Tile",
    "border_colour",
    "merge_tiles",
    "pad_for_engine",
    "plan_sheets",
    "plan_tiles",
    "render_sheet",
    "split_sheet",
]

#: The engine's ``max_side_len``: the longest side it reads without shrinking.
TILE_SIDE = 2000
#: The engine's ``width_height_ratio``: the most elongated shape its detector handles well.
MAX_ASPECT = 8
#: Short sides below this are padded (the engine's ``min_side_len`` is 30, rounded to 32).
MIN_SIDE = 32
#: At most this many tiles per image; longer images get larger tiles instead.
MAX_TILES = 64
#: Background between tiles stacked on one sheet, so the detector keeps them apart.
GAP = 32
#: The detector's ``limit_side_len``: it scales every image's short side up to this.
DETECT_SIDE = 736
#: The shortest tile worth cutting (shorter ones are mostly overlap).
MIN_TILE = 128
#: Box edges this close (or 0.3 line heights) count as the same edge across tiles.
EDGE_PX = 2.0
#: The least overlap between neighbouring grid tiles: room for a whole line of large text,
#: and small enough that a 3840-px screen is two columns of tiles, not three.
GRID_OVERLAP = 128
#: Characters at a cut edge that may be misread (a glyph cut in two) when joining text.
CUT_JUNK = 3


@dataclass(frozen=True)
class Tile:
    """One piece of the image, ``[x0, x1) × [y0, y1)`` in image pixels."""

    x0: int
    y0: int
    x1: int
    y1: int
    #: Whether the plan's tiles run along x (a wide image, its tiles stacked across y on a
    #: sheet) rather than y (a tall one); True for a grid of rows and columns.
    along_x: bool


def _starts(length: int, tile: int, overlap: int) -> list[int]:
    step = tile - overlap
    count = max(1, math.ceil((length - overlap) / step))
    starts: list[int] = []
    for index in range(count):
        start = min(index * step, length - tile)
        if not starts or start > starts[-1]:
            starts.append(start)
    return starts


def _grid_axis(length: int, side: int) -> tuple[int, list[int]]:
    """(tile length, starts): the fewest equal tiles of at most ``side`` px, overlapping by
    at least ``GRID_OVERLAP`` (or a sixteenth of a tile), that cover ``length``."""
    if length <= side:
        return length, [0]
    overlap = max(GRID_OVERLAP, side // 16)
    count = math.ceil((length - overlap) / (side - overlap))
    size = math.ceil((length + (count - 1) * overlap) / count)
    return size, _starts(length, size, overlap)


def _plan_grid(width: int, height: int) -> list[Tile]:
    side = TILE_SIDE
    while True:
        tile_w, xs = _grid_axis(width, side)
        tile_h, ys = _grid_axis(height, side)
        if len(xs) * len(ys) <= MAX_TILES:
            break
        side = math.ceil(side * 1.25)  # bounded time: larger tiles, shrunk by the engine
    along_x = len(ys) == 1 or len(xs) > 1  # a single column runs along y
    return [
        Tile(x0, y0, min(x0 + tile_w, width), min(y0 + tile_h, height), along_x)
        for y0 in ys for x0 in xs
    ]


def plan_tiles(width: int, height: int, *, full_resolution: bool = True) -> list[Tile]:
    """The tiles the engine reads for an image of this size, in row-major order.

    One tile for an ordinary image; a 1-D run of tiles (stacked onto sheets) for a thin
    one; a grid for any other image whose long side exceeds ``TILE_SIDE``. With
    ``full_resolution=False`` an image of ordinary shape is one tile whatever its size, and
    the engine shrinks it (the behaviour before grids, kept for comparison).
    """
    long_side, short_side = max(width, height), min(width, height)
    along_x = width >= height
    thin = long_side > short_side * MAX_ASPECT
    if thin and (short_side <= TILE_SIDE or not full_resolution):
        return _plan_run(width, height)
    if long_side <= TILE_SIDE or not full_resolution:
        return [Tile(0, 0, width, height, along_x)]
    return _plan_grid(width, height)


def _plan_run(width: int, height: int) -> list[Tile]:
    """Tiles along the long axis of a thin image, sized to stack onto near-square sheets."""
    long_side, short_side = max(width, height), min(width, height)
    along_x = width >= height
    # Near-square sheets: n tiles of length L stacked n deep, n·(short + GAP) ≈ L.
    size = math.ceil(math.sqrt(long_side * (short_side + GAP)))
    size = min(max(size, MIN_TILE), max(TILE_SIDE, short_side), long_side)
    while len(_starts(long_side, size, size // 8)) > MAX_TILES:
        size = math.ceil(size * 1.25)
    starts = _starts(long_side, size, size // 8)
    tiles: list[Tile] = []
    for start in starts:
        end = min(start + size, long_side)
        if along_x:
            tiles.append(Tile(start, 0, end, height, True))
        else:
            tiles.append(Tile(0, start, width, end, False))
    return tiles


@dataclass(frozen=True)
class Sheet:
    """Tiles stacked across the tiling axis, read by one engine call.

    ``slots`` holds (tile index, offset across the tiling axis) for each tile on the sheet;
    the sheet's size is before padding.
    """

    width: int
    height: int
    along_x: bool
    slots: tuple[tuple[int, int], ...]


def plan_sheets(tiles: Sequence[Tile]) -> list[Sheet]:
    """Group the tiles onto near-square sheets, in order (a grid's tiles one to a sheet)."""
    first = tiles[0]
    if len(_rows(tiles)) > 1 and len({(t.x0, t.x1) for t in tiles}) > 1:
        return [
            Sheet(t.x1 - t.x0, t.y1 - t.y0, True, ((index, 0),))
            for index, t in enumerate(tiles)
        ]
    length = (first.x1 - first.x0) if first.along_x else (first.y1 - first.y0)
    across = (first.y1 - first.y0) if first.along_x else (first.x1 - first.x0)
    per_sheet = max(1, (length + GAP) // (across + GAP))
    count = math.ceil(len(tiles) / per_sheet)
    per_sheet = math.ceil(len(tiles) / count)  # balanced: no nearly empty last sheet
    sheets: list[Sheet] = []
    for begin in range(0, len(tiles), per_sheet):
        group = range(begin, min(begin + per_sheet, len(tiles)))
        slots = tuple((index, slot * (across + GAP)) for slot, index in enumerate(group))
        depth = len(slots) * (across + GAP) - GAP
        if len(tiles) > 1:
            # The detector scales a short side up to DETECT_SIDE, so a thin sheet costs as
            # much as a square one: pad it towards square instead, at native scale.
            depth = max(depth, min(length, DETECT_SIDE))
        if first.along_x:
            sheets.append(Sheet(length, depth, True, slots))
        else:
            sheets.append(Sheet(depth, length, False, slots))
    return sheets


def border_colour(rgb: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The median colour of the image's outermost pixels: its likely background."""
    border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]]).reshape(-1, 3)
    result: np.ndarray[Any, Any] = np.median(border, axis=0).astype(rgb.dtype)
    return result


def render_sheet(
    rgb: np.ndarray[Any, Any], tiles: Sequence[Tile], sheet: Sheet,
    fill: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """The sheet's pixels (H×W×3), padded for the engine."""
    if len(tiles) == 1:
        return pad_for_engine(rgb, fill)
    out = np.empty((sheet.height, sheet.width, 3), dtype=rgb.dtype)
    out[:, :] = fill
    for index, offset in sheet.slots:
        tile = tiles[index]
        crop = rgb[tile.y0 : tile.y1, tile.x0 : tile.x1]
        h, w = crop.shape[:2]
        if sheet.along_x:
            out[offset : offset + h, :w] = crop
        else:
            out[:h, offset : offset + w] = crop
    return pad_for_engine(out, fill)


def split_sheet(
    tiles: Sequence[Tile], sheet: Sheet, found: Sequence[Segment]
) -> dict[int, list[Segment]]:
    """Each detection on the sheet, in its tile's own pixels, under its tile's index."""
    out: dict[int, list[Segment]] = {index: [] for index, _ in sheet.slots}
    for segment in found:
        lo, hi = (segment.y0, segment.y1) if sheet.along_x else (segment.x0, segment.x1)
        best, best_overlap = None, 0.0
        for index, offset in sheet.slots:
            tile = tiles[index]
            across = (tile.y1 - tile.y0) if sheet.along_x else (tile.x1 - tile.x0)
            overlap = min(hi, offset + across) - max(lo, offset)
            if overlap > best_overlap:
                best, best_overlap = (index, offset), overlap
        if best is None:
            continue  # only in a gap or the padding
        index, offset = best
        if sheet.along_x:
            moved = replace(segment, y0=segment.y0 - offset, y1=segment.y1 - offset)
        else:
            moved = replace(segment, x0=segment.x0 - offset, x1=segment.x1 - offset)
        out[index].append(moved)
    return out


def pad_for_engine(
    rgb: np.ndarray[Any, Any], fill: np.ndarray[Any, Any] | None = None
) -> np.ndarray[Any, Any]:
    """``rgb`` (H×W×3) padded on the bottom and right to a shape the engine reads safely:
    both sides at least ``MIN_SIDE``, the aspect at most ``MAX_ASPECT``."""
    height, width = rgb.shape[:2]
    need = max(MIN_SIDE, math.ceil(max(height, width) / MAX_ASPECT))
    if height <= width:
        new_h, new_w = max(height, need), max(width, MIN_SIDE)
    else:
        new_h, new_w = max(height, MIN_SIDE), max(width, need)
    if (new_h, new_w) == (height, width):
        return rgb
    out = np.empty((new_h, new_w, 3), dtype=rgb.dtype)
    out[:, :] = border_colour(rgb) if fill is None else fill
    out[:height, :width] = rgb
    return out


def _place(segment: Segment, tile: Tile) -> Segment | None:
    """A tile-local detection in image pixels, clipped to the tile's real pixels."""
    x0 = min(max(segment.x0 + tile.x0, tile.x0), tile.x1)
    x1 = min(max(segment.x1 + tile.x0, tile.x0), tile.x1)
    y0 = min(max(segment.y0 + tile.y0, tile.y0), tile.y1)
    y1 = min(max(segment.y1 + tile.y0, tile.y0), tile.y1)
    if x1 - x0 < 1 or y1 - y0 < 1:
        return None  # found only in the padding
    return replace(segment, x0=x0, y0=y0, x1=x1, y1=y1)


def _span(segment: Segment, along_x: bool) -> tuple[float, float, float, float]:
    """(u0, u1, v0, v1): the extent along the tiling axis, then across it."""
    if along_x:
        return segment.x0, segment.x1, segment.y0, segment.y1
    return segment.y0, segment.y1, segment.x0, segment.x1


def _match(a: Segment, b: Segment, along_x: bool) -> float | None:
    """How well ``b`` matches ``a`` of the previous piece as one detection (the share of
    the smaller box both cover), or None when they cannot be one."""
    au0, au1, av0, av1 = _span(a, along_x)
    bu0, bu1, bv0, bv1 = _span(b, along_x)
    along = min(au1, bu1) - max(au0, bu0)
    across = min(av1, bv1) - max(av0, bv0)
    if along <= 0 or across < 0.5 * min(av1 - av0, bv1 - bv0):
        return None
    a_across, b_across = au1 - au0 < av1 - av0, bu1 - bu0 < bv1 - bv0
    if a_across and b_across and along < 0.5 * min(au1 - au0, bu1 - bu0):
        # Both lie across the seam (a text line at a horizontal seam): copies overlap by
        # half their thickness at least, while the neighbouring line of dense text also
        # overlaps a little and must not be taken for a copy.
        return None
    smaller = min((au1 - au0) * (av1 - av0), (bu1 - bu0) * (bv1 - bv0))
    return along * across / max(smaller, 1e-6)


def _shared_run(a: str, b: str) -> tuple[int, int, int] | None:
    """(end in ``a``, start in ``b``, length) of the longest run of at least three
    characters that ends ``a`` and starts ``b``, each allowed up to ``CUT_JUNK`` characters
    beyond it: a glyph cut by the seam is read as something else, or as nothing."""
    best: tuple[int, int, int] | None = None
    for end in range(len(a), max(len(a) - CUT_JUNK, 0) - 1, -1):
        for start in range(min(CUT_JUNK, len(b)) + 1):
            for length in range(min(end, len(b) - start), 2, -1):
                if best is not None and length <= best[2]:
                    break
                if a[end - length : end] == b[start : start + length]:
                    best = (end, start, length)
                    break
    return best


def _join_text(a: Segment, b: Segment, along_x: bool) -> str:
    """``a`` then ``b``, with the text both read in the overlap counted once."""
    run = _shared_run(a.text, b.text)
    if run is not None:
        end, start, length = run
        return a.text[:end] + b.text[start + length :]
    # No shared run: drop the share of b's characters that lies inside a's extent.
    _, au1, _, _ = _span(a, along_x)
    bu0, bu1, _, _ = _span(b, along_x)
    shared = max(0.0, min(au1, bu1) - bu0) / max(bu1 - bu0, 1.0)
    tail = b.text[round(shared * len(b.text)) :].lstrip()
    return f"{a.text} {tail}".rstrip() if tail else a.text


def _resolve(a: Segment, b: Segment, along_x: bool) -> Segment:
    """One detection from two that the previous tile (``a``) and this one (``b``) made of
    the same place: the one that contains the other, or both joined."""
    au0, au1, av0, av1 = _span(a, along_x)
    bu0, bu1, bv0, bv1 = _span(b, along_x)
    slack = max(EDGE_PX, 0.3 * min(av1 - av0, bv1 - bv0))
    b_holds_a = bu0 <= au0 + slack and bu1 >= au1 - slack
    a_holds_b = au0 <= bu0 + slack and au1 >= bu1 - slack
    if a_holds_b and b_holds_a:  # one whole detection seen twice
        return b if b.confidence > a.confidence else a
    if b_holds_a:  # a was a piece cut by the seam
        return b
    if a_holds_b:
        return a
    return Segment(  # one long line across the seam, read in two pieces
        _join_text(a, b, along_x),
        min(a.x0, b.x0), min(a.y0, b.y0), max(a.x1, b.x1), max(a.y1, b.y1),
        min(a.confidence, b.confidence),
    )


def _rows(tiles: Sequence[Tile]) -> list[list[int]]:
    """Indices of the tiles in each row of the plan (tiles sharing one vertical extent),
    top to bottom: a wide run is one row, a tall run one row per tile."""
    rows: dict[tuple[int, int], list[int]] = {}
    for index, tile in enumerate(tiles):
        rows.setdefault((tile.y0, tile.y1), []).append(index)
    return list(rows.values())


def _merge_run(runs: Sequence[Sequence[Segment]], along_x: bool) -> list[Segment]:
    """One list from detections (in image pixels) of consecutive pieces along one axis.

    Each detection is matched with at most one from the previous piece, the one it overlaps
    most (see :func:`_match`); a matched pair becomes one detection (see :func:`_resolve`).
    """
    kept: list[tuple[int, Segment]] = []  # (the last piece that saw it, the detection)
    for index, segments in enumerate(runs):
        matched: set[int] = set()
        for segment in segments:
            partner, best = None, 0.0
            for i, (seen, old) in enumerate(kept):
                if seen != index - 1 or i in matched:
                    continue
                score = _match(old, segment, along_x)
                if score is not None and score > best:
                    partner, best = i, score
            if partner is None:
                kept.append((index, segment))
            else:
                matched.add(partner)
                kept[partner] = (index, _resolve(kept[partner][1], segment, along_x))
    return [segment for _, segment in kept]


def merge_tiles(tiles: Sequence[Tile], found: Sequence[Sequence[Segment]]) -> list[Segment]:
    """One list of detections in image pixels from each tile's own (tile-local) ones.

    The tiles of each row are merged along x (vertical seams), then the rows' strips along
    y (horizontal seams): a grid's seams are two 1-D problems, and a detection at a corner
    is settled once in its row and once between the rows.
    """
    if len(found) != len(tiles):
        raise ValueError("one list of detections per tile")
    strips: list[list[Segment]] = []
    for row in _rows(tiles):
        placed = [
            [p for p in (_place(raw, tiles[index]) for raw in found[index]) if p is not None]
            for index in row
        ]
        strips.append(_merge_run(placed, along_x=True))
    return _merge_run(strips, along_x=False)
