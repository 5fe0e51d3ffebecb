"""Tiling and padding for the OCR engine, as pure functions (no model loaded)."""

from __future__ import annotations

import numpy as np
import pytest

from deepseek_eyes.vision.routes.layout import Segment
from deepseek_eyes.vision.routes.tiling import (
    GRID_OVERLAP,
    MAX_ASPECT,
    MAX_TILES,
    MIN_SIDE,
    TILE_SIDE,
    Tile,
    merge_tiles,
    pad_for_engine,
    plan_sheets,
    plan_tiles,
    render_sheet,
    split_sheet,
)


def _extents(tiles: list[Tile]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    xs = sorted({(t.x0, t.x1) for t in tiles})
    ys = sorted({(t.y0, t.y1) for t in tiles})
    return xs, ys


def _covers(extents: list[tuple[int, int]], length: int) -> bool:
    covered = 0
    for start, end in extents:
        if not start <= covered < end:
            return False
        covered = end
    return covered == length


SHAPES = [
    (20000, 2), (2, 20000), (1, 1), (3, 4000), (4000, 3), (1280, 20000), (32, 2000),
    (100_000, 400), (3840, 2160), (2160, 3840), (2001, 2001), (5120, 2880), (2100, 300),
    (300, 2300), (2100, 20000), (7680, 4320),
]


@pytest.mark.parametrize(("width", "height"), SHAPES)
def test_tiles_cover_the_image_at_full_resolution_and_every_sheet_is_engine_safe(
    width: int, height: int
) -> None:
    tiles = plan_tiles(width, height)
    assert 1 <= len(tiles) <= MAX_TILES
    xs, ys = _extents(tiles)
    assert len(tiles) == len(xs) * len(ys)  # a grid (a run is a grid of one row or column)
    assert _covers(xs, width)
    assert _covers(ys, height)
    if max(width, height) > TILE_SIDE:  # every tile read unshrunk
        assert max(max(t.x1 - t.x0, t.y1 - t.y0) for t in tiles) <= TILE_SIDE
    rgb = np.full((height, width, 3), 255, np.uint8) if width * height < 5e7 else None
    if rgb is None:
        return
    fill = np.array([255, 255, 255], np.uint8)
    sheets = plan_sheets(tiles)
    assert sorted(i for sheet in sheets for i, _ in sheet.slots) == list(range(len(tiles)))
    for sheet in sheets:
        pixels = render_sheet(rgb, tiles, sheet, fill)
        h, w = pixels.shape[:2]
        assert min(h, w) >= MIN_SIDE
        assert max(h, w) <= MAX_ASPECT * min(h, w)
        assert max(h, w) <= max(TILE_SIDE, width if len(tiles) == 1 else 0)


def test_ordinary_shapes_are_one_untouched_tile() -> None:
    assert plan_tiles(1920, 1080) == [Tile(0, 0, 1920, 1080, True)]
    assert plan_tiles(2000, 2000) == [Tile(0, 0, 2000, 2000, True)]
    rgb = np.zeros((1080, 1920, 3), np.uint8)
    assert pad_for_engine(rgb) is rgb


def test_a_4k_screen_is_a_two_by_two_grid_of_unshrunk_tiles() -> None:
    tiles = plan_tiles(3840, 2160)
    xs, ys = _extents(tiles)
    assert (len(xs), len(ys)) == (2, 2)
    assert xs[0][1] - xs[1][0] >= GRID_OVERLAP  # neighbours overlap on both axes
    assert ys[0][1] - ys[1][0] >= GRID_OVERLAP
    assert all(t.x1 - t.x0 <= TILE_SIDE and t.y1 - t.y0 <= TILE_SIDE for t in tiles)
    assert [(t.x0, t.y0) for t in tiles] == [
        (xs[0][0], ys[0][0]), (xs[1][0], ys[0][0]), (xs[0][0], ys[1][0]), (xs[1][0], ys[1][0])
    ]  # row-major
    assert [sheet.slots for sheet in plan_sheets(tiles)] == [((i, 0),) for i in range(4)]
    assert len(plan_tiles(5120, 2880)) == 6  # 3 columns, 2 rows


def test_shrinking_stays_reachable_for_comparison() -> None:
    assert plan_tiles(3840, 2160, full_resolution=False) == [Tile(0, 0, 3840, 2160, True)]
    assert plan_tiles(1280, 20000, full_resolution=False) == plan_tiles(1280, 20000)


@pytest.mark.parametrize(("width", "height"), [(30000, 30000), (100_000, 60_000), (3000, 10**6)])
def test_past_max_tiles_tiles_grow_instead_of_multiplying(width: int, height: int) -> None:
    tiles = plan_tiles(width, height)
    assert len(tiles) <= MAX_TILES
    xs, ys = _extents(tiles)
    assert len(tiles) == len(xs) * len(ys)
    assert _covers(xs, width)
    assert _covers(ys, height)
    assert max(t.x1 - t.x0 for t in tiles) > TILE_SIDE


def test_padding_uses_the_border_colour_on_the_far_sides() -> None:
    rgb = np.full((2, 20, 3), 200, np.uint8)
    rgb[0, 0] = (0, 0, 0)  # one dark pixel does not change the median
    padded = pad_for_engine(rgb)
    assert padded.shape == (MIN_SIDE, MIN_SIDE, 3)
    assert (padded[:2, :20] == rgb).all()
    assert (padded[5:, :] == 200).all()


def test_detections_go_back_to_their_tile_and_gaps_are_dropped() -> None:
    tiles = plan_tiles(4000, 40)
    sheet = plan_sheets(tiles)[0]
    (first, _), (second, offset) = sheet.slots[:2]
    found = [
        Segment("a", 10, 5, 50, 30, 0.9),
        Segment("b", 10, offset + 5, 50, offset + 30, 0.9),
        Segment("gap", 10, 41, 50, offset - 1, 0.9),
    ]
    parts = split_sheet(tiles, sheet, found)
    assert [s.text for s in parts[first]] == ["a"]
    assert [(s.text, s.y0) for s in parts[second]] == [("b", 5)]


def _wide(x0: int, x1: int) -> Tile:
    return Tile(x0, 0, x1, 40, True)


def test_a_line_across_a_seam_is_joined_once() -> None:
    tiles = [_wide(0, 1000), _wide(875, 1875)]
    left = [Segment("TOTAL due on 12 May: 64.03", 700, 5, 1000, 30, 0.9)]
    right = [Segment("May: 64.03 EUR", 40, 5, 300, 30, 0.8)]  # the seam fell before "May"
    (merged,) = merge_tiles(tiles, [left, right])
    assert merged.text == "TOTAL due on 12 May: 64.03 EUR"
    assert (merged.x0, merged.x1) == (700, 1175)
    assert merged.text.count("64.03") == 1
    assert merged.confidence == 0.8


def test_a_cut_piece_yields_to_the_whole_copy_and_copies_count_once() -> None:
    tiles = [_wide(0, 1000), _wide(875, 1875)]
    left = [
        Segment("Hel", 950, 5, 1000, 30, 0.7),  # cut by the seam
        Segment("Hi", 890, 5, 930, 30, 0.95),  # whole, inside the overlap
    ]
    right = [Segment("Hello", 75, 5, 200, 30, 0.9), Segment("Hi", 15, 5, 55, 30, 0.9)]
    merged = merge_tiles(tiles, [left, right])
    assert sorted((s.text, s.x0, s.confidence) for s in merged) == [
        ("Hello", 950, 0.9), ("Hi", 890, 0.95),
    ]


def test_tall_tiles_keep_the_whole_line_at_a_seam() -> None:
    tiles = [Tile(0, 0, 300, 2000, False), Tile(0, 1750, 300, 3750, False)]
    top = [Segment("garbled", 10, 1985, 200, 2000, 0.4)]  # the top half of a line
    bottom = [Segment("Invoice 42", 10, 235, 200, 265, 0.95)]
    (line,) = merge_tiles(tiles, [top, bottom])
    assert (line.text, line.y0, line.y1) == ("Invoice 42", 1985, 2015)


# The 4K grid: TL (0,0)-(1984,1144), TR from x 1856, BL from y 1016, BR; overlaps of 128 px.
GRID = plan_tiles(3840, 2160)
TL, TR, BL, BR = GRID


def local(tile: Tile, text: str, box: tuple[float, float, float, float], conf: float) -> Segment:
    """A detection as the engine reports it for ``tile``: in the tile's own pixels."""
    x0, y0, x1, y1 = box
    return Segment(text, x0 - tile.x0, y0 - tile.y0, x1 - tile.x0, y1 - tile.y0, conf)


def test_the_grid_under_test_is_the_4k_plan() -> None:
    assert [(t.x0, t.y0, t.x1, t.y1) for t in GRID] == [
        (0, 0, 1984, 1144), (1856, 0, 3840, 1144), (0, 1016, 1984, 2160),
        (1856, 1016, 3840, 2160),
    ]


def test_a_line_across_a_vertical_seam_is_joined_once_despite_cut_glyphs() -> None:
    # The seam cut the "n" of "account" (read as "r") and the "Th" of "The" (read as "e").
    found = [
        [local(TL, "The transfer for accour", (1835, 500, 1984, 517), 0.99)],
        [local(TR, "e transfer for account juliet reached 4981.99 EUR", (1856, 499, 2336, 518),
               0.97)],
        [], [],
    ]
    (line,) = merge_tiles(GRID, found)
    assert line.text == "The transfer for account juliet reached 4981.99 EUR"
    assert (line.x0, line.y0, line.x1, line.y1) == (1835, 499, 2336, 518)
    assert line.confidence == 0.97


def test_a_line_inside_the_vertical_overlap_is_kept_once() -> None:
    found = [
        [local(TL, "OK", (1880, 300, 1960, 317), 0.9)],
        [local(TR, "OK", (1880, 300, 1960, 317), 0.95)],
        [], [],
    ]
    (line,) = merge_tiles(GRID, found)
    assert (line.text, line.x0, line.confidence) == ("OK", 1880, 0.95)


def test_a_line_inside_the_horizontal_overlap_is_kept_once_beside_its_neighbours() -> None:
    whole = (200, 1050, 600, 1067)
    above, below = (200, 1000, 600, 1017), (200, 1100, 600, 1117)
    found = [
        [local(TL, "line above", above, 0.9), local(TL, "shared line", whole, 0.93)],
        [],
        [local(BL, "shared line", whole, 0.91), local(BL, "line below", below, 0.9)],
        [],
    ]
    merged = merge_tiles(GRID, found)
    assert sorted((s.text, s.y0) for s in merged) == [
        ("line above", 1000), ("line below", 1100), ("shared line", 1050),
    ]
    assert next(s for s in merged if s.text == "shared line").confidence == 0.93


def test_a_line_inside_the_corner_overlap_seen_by_four_tiles_is_one_line() -> None:
    text = "Grand total 1234.50 EUR"
    box = (1870, 1030, 1975, 1045)
    found = [[local(tile, text, box, 0.9 + i / 100)] for i, tile in enumerate(GRID)]
    (line,) = merge_tiles(GRID, found)
    assert (line.text, line.x0, line.y0, line.x1, line.y1) == (text, *box)


def test_a_line_across_both_seams_at_the_corner_is_one_whole_line() -> None:
    # Its middle crosses x 1856-1984 and it straddles the top row's bottom edge (y 1144):
    # the top tiles see its upper half only (garbled), the bottom tiles see it whole.
    y0, y1 = 1135, 1152
    found = [
        [local(TL, "Tle trarsler lor acc", (1700, y0, 1990, y1), 0.6)],
        [local(TR, "ler lor accourt 77 dars", (1850, y0, 2300, y1), 0.55)],
        [local(BL, "The transfer for accou", (1700, y0, 1984, y1), 0.98),
         local(BL, "Next line 5.00", (1700, 1175, 1900, 1192), 0.97)],
        [local(BR, "for account 77 days", (1856, y0, 2300, y1), 0.96)],
    ]
    merged = merge_tiles(GRID, found)
    assert sorted((s.text, s.x0, s.y0, s.x1, s.y1) for s in merged) == [
        ("Next line 5.00", 1700, 1175, 1900, 1192),
        ("The transfer for account 77 days", 1700, y0, 2300, y1),
    ]


def test_dense_lines_at_a_horizontal_seam_keep_their_own_copies() -> None:
    # 18-px line pitch, 23-px boxes: neighbours' boxes overlap by 5 px, copies by all.
    boxes = [(300 + 40 * i, 1000 + 18 * i, 1500, 1023 + 18 * i) for i in range(9)]
    top = [local(TL, f"line {i} of the log", box, 0.9) for i, box in enumerate(boxes)
           if box[1] < TL.y1]
    bottom = [local(BL, f"line {i} of the log", box, 0.95) for i, box in enumerate(boxes)
              if box[1] >= BL.y0 or i % 2]  # the bottom row lists them in another order
    bottom.sort(key=lambda s: -s.y0)
    merged = merge_tiles(GRID, [top, [], bottom, []])
    assert sorted((s.text, s.y0) for s in merged) == sorted(
        (f"line {i} of the log", box[1]) for i, box in enumerate(boxes)
    )


def test_a_line_clipped_to_a_sliver_by_a_horizontal_seam_yields_to_its_whole_copy() -> None:
    found = [
        [local(TL, "l1ne", (500, 1140, 900, 1144), 0.5),
         local(TL, "above", (500, 1119, 900, 1141), 0.9)],
        [],
        [local(BL, "above", (500, 1119, 900, 1141), 0.9),
         local(BL, "whole line", (500, 1140, 900, 1160), 0.95)],
        [],
    ]
    merged = merge_tiles(GRID, found)
    assert sorted((s.text, s.y0, s.y1) for s in merged) == [
        ("above", 1119, 1141), ("whole line", 1140, 1160),
    ]
