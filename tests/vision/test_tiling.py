"""Tiling and padding for the OCR engine, as pure functions (no model loaded)."""

from __future__ import annotations

import numpy as np
import pytest

from deepseek_eyes.vision.routes.layout import Segment
from deepseek_eyes.vision.routes.tiling import (
    MAX_ASPECT,
    MAX_TILES,
    MIN_SIDE,
    Tile,
    merge_tiles,
    pad_for_engine,
    plan_sheets,
    plan_tiles,
    render_sheet,
    split_sheet,
)


@pytest.mark.parametrize(
    ("width", "height"),
    [(20000, 2), (2, 20000), (1, 1), (3, 4000), (4000, 3), (1280, 20000), (32, 2000),
     (100_000, 400)],
)
def test_tiles_cover_the_image_and_every_sheet_is_an_engine_safe_shape(
    width: int, height: int
) -> None:
    tiles = plan_tiles(width, height)
    assert 1 <= len(tiles) <= MAX_TILES
    along_x = width >= height
    covered = 0
    for tile in tiles:
        start, end = (tile.x0, tile.x1) if along_x else (tile.y0, tile.y1)
        assert start <= covered < end or (covered == end == (width if along_x else height))
        covered = max(covered, end)
    assert covered == (width if along_x else height)
    rgb = np.full((height, width, 3), 255, np.uint8) if width * height < 5e7 else None
    if rgb is None:
        return
    fill = np.array([255, 255, 255], np.uint8)
    for sheet in plan_sheets(tiles):
        pixels = render_sheet(rgb, tiles, sheet, fill)
        h, w = pixels.shape[:2]
        assert min(h, w) >= MIN_SIDE
        assert max(h, w) <= MAX_ASPECT * min(h, w)


def test_ordinary_shapes_are_one_untouched_tile() -> None:
    assert plan_tiles(1920, 1080) == [Tile(0, 0, 1920, 1080, True)]
    rgb = np.zeros((1080, 1920, 3), np.uint8)
    assert pad_for_engine(rgb) is rgb


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
