"""Tables on the local route: scored on Chromium-drawn tables read by the real OCR engine
(cells by row, column and text; facts named by row and column header), and the pure parts
(numbers in cells, cutting a detection at a rule, what is not a table) on plain data."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from deepseek_eyes.vision.evidence.gate import validate_evidence
from deepseek_eyes.vision.routes.layout import Segment, build_evidence
from deepseek_eyes.vision.routes.regions import LayoutBox
from deepseek_eyes.vision.routes.tables import (
    Table,
    add_tables,
    cell_number,
    find_tables,
    split_at,
    table_facts,
)
from deepseek_eyes.vision.types import Variant
from helpers import SCORE
from vision.structure_pages import TABLE_PAGES, TablePage

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def cell_score(page: TablePage, table: Table) -> tuple[int, int]:
    """Truth cells found at their row and column, with their spans and their text."""
    hits = 0
    for truth in page.cells:
        cell = next((c for c in table.cells if (c.row, c.col) == (truth.row, truth.col)), None)
        if cell is not None and _norm(cell.text) == truth.text and (
            cell.rowspan, cell.colspan) == (truth.rowspan, truth.colspan):
            hits += 1
    return hits, len(page.cells)


def fact_score(page: TablePage, table: Table) -> tuple[int, int, int]:
    """(expected facts stated, expected, facts stated): a fact is its label and value."""
    wanted = {(f"{row} · {col}", value) for row, col, value in page.facts}
    got = {(label, value) for label, value, _, _ in table_facts(table)}
    return len(wanted & got), len(wanted), len(got)


@pytest.mark.slow
def test_tables_score_on_the_chromium_corpus(
    structure_corpus: dict[str, Any], record_property: Callable[[str, object], None]
) -> None:
    cells_hit = cells_all = facts_hit = facts_all = facts_said = 0
    lines = []
    for page in TABLE_PAGES:
        shot = structure_corpus[page.name]
        tables = find_tables(shot.rgb, shot.segments)
        assert len(tables) == 1, page.name
        table = tables[0]
        assert table.ruled is page.bordered, page.name
        hit, total = cell_score(page, table)
        fhit, fall, fsaid = fact_score(page, table)
        cells_hit, cells_all = cells_hit + hit, cells_all + total
        facts_hit, facts_all, facts_said = facts_hit + fhit, facts_all + fall, facts_said + fsaid
        lines.append(f"  {page.name}: cells {hit}/{total}, facts {fhit}/{fall} of {fsaid} stated")
    record_property(SCORE, "\n".join([
        "tables (row/col/text cell assignment; header-named facts):", *lines,
        f"  total: cells {cells_hit}/{cells_all}, fact recall {facts_hit}/{facts_all}, "
        f"precision {facts_hit}/{facts_said}"]))
    assert cells_hit / cells_all >= 0.95
    assert facts_hit / facts_all >= 0.95
    assert facts_hit / facts_said >= 0.95


@pytest.mark.slow
def test_a_merged_header_names_every_column_it_spans(structure_corpus: dict[str, Any]) -> None:
    for name in ("merged_bordered", "merged_borderless"):
        shot = structure_corpus[name]
        (table,) = find_tables(shot.rgb, shot.segments)
        assert table.header_rows == 2
        assert [table.column_name(c) for c in range(5)] == [
            "Team", "2025 H1", "2025 H2", "2026 H1", "2026 H2"]
        assert table.row_name(3) == "Bravo"


@pytest.mark.slow
def test_the_evidence_reads_a_table_as_rows_and_passes_the_gate(
    structure_corpus: dict[str, Any]
) -> None:
    shot = structure_corpus["quarters_bordered"]
    width, height = shot.size
    evidence = build_evidence(shot.segments, width, height, min_confidence=0.5)
    # Before: the row's values were tied to the row name alone.
    assert ("North", 1204.0) in {(f["label"], f["value"]) for f in evidence[
        "quantitative_facts"]}
    tables = find_tables(shot.rgb, shot.segments)
    add_tables(evidence, tables, width, height)
    assert validate_evidence(evidence, Variant.EVIDENCE) == []
    facts = {(f["label"], f["value"]) for f in evidence["quantitative_facts"]}
    assert ("North · Q3", 1204.0) in facts
    assert not any(label == "North" for label, _ in facts)  # the loose fact gave way
    texts = [line["text"] for line in evidence["ocr"]]
    assert "Region | Q1 | Q2 | Q3 | Q4" in texts
    assert "North | 1180 | 1220 | 1204 | 1310" in texts
    # Reading order kept: the title, the rows, the note under the table.
    assert texts[0].startswith("Quarterly figures")
    assert texts[-1].startswith("Figures are unaudited")
    (region,) = [r for r in evidence["regions"] if r["kind"] == "table"]
    assert region["label"] == "table, 5 rows x 5 columns: Region | Q1 | Q2 | Q3 | Q4"
    assert {(r["predicate"], r["object"]) for r in evidence["relations"]
            if r["object"] == region["id"]} == {("inside", region["id"])}
    assert "Tables: 1 (5x5)" in evidence["summary"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_local_route_states_header_named_facts(
    structure_corpus: dict[str, Any]
) -> None:
    from deepseek_eyes.vision.routes.local_ocr import LocalRoute
    from deepseek_eyes.vision.types import VisionRequest

    shot = structure_corpus["products_borderless"]
    width, height = shot.size
    request = VisionRequest(
        purpose="evidence", image_bytes=b"", media_type="image/png", width=width,
        height=height, system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
        pixels=Image.fromarray(shot.rgb),
    )
    answer = await LocalRoute(engine=shot.recorded_engine()).call(request)
    assert answer.value is not None
    assert validate_evidence(answer.value, Variant.EVIDENCE) == []
    facts = {(f["label"], f["value"], f["unit"]) for f in answer.value["quantitative_facts"]}
    assert ("Mouse · Revenue", 19968.0, "USD") in facts
    assert ("Monitor · Units", 87.0, "") in facts


@pytest.mark.parametrize(("text", "number"), [
    ("1204", (1204.0, "")),
    ("1,204", (1204.0, "")),
    ("$1,204.50", (1204.5, "USD")),
    ("-3", (-3.0, "")),
    ("(120)", (-120.0, "")),
    ("12.5%", (12.5, "%")),
    ("40 ms", (40.0, "ms")),
    ("North", None),
    ("2026-01-02", None),
    ("12 apples", None),
    ("", None),
])
def test_cell_numbers(text: str, number: tuple[float, str] | None) -> None:
    assert cell_number(text) == number


def test_a_detection_across_a_rule_is_cut_at_the_nearest_word() -> None:
    seg = Segment("1180 1220", 100, 10, 190, 30, 0.9)  # 10 px a character
    left, right = split_at(seg, [150])
    assert (left.text, right.text) == ("1180", "1220")
    assert left.x1 <= 150 <= right.x0
    assert split_at(seg, [300]) == [seg]  # no cut inside: whole
    assert split_at(Segment("Total", 0, 0, 50, 10, 1.0), [25])[0].text == "Total"  # one word


def test_a_bad_image_is_a_value_error_and_no_text_no_table() -> None:
    with pytest.raises(ValueError, match="H×W×3"):
        find_tables(np.zeros((10, 10), dtype=np.uint8), [])
    assert find_tables(np.full((50, 50, 3), 255, dtype=np.uint8), []) == []


def _draw_ruled(rows: list[list[str]]) -> tuple[np.ndarray[Any, Any], list[Segment]]:
    """A ruled table drawn with Pillow, and one OCR detection per cell except the second
    row, read as a single detection across its rules (as an OCR engine may)."""
    image = Image.new("RGB", (520, 60 + 40 * len(rows)), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 16)
    x0, y0, width, height = 20, 20, 120, 40
    segments: list[Segment] = []
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            left, top, right, bottom = draw.textbbox((x0 + c * width + 10, y0 + r * height + 10),
                                                     text, font=font)
            draw.text((x0 + c * width + 10, y0 + r * height + 10), text, fill="black", font=font)
            if r != 1:
                segments.append(Segment(text, left, top, right, bottom, 0.99))
    for r in range(len(rows) + 1):
        draw.line([(x0, y0 + r * height), (x0 + 4 * width, y0 + r * height)], fill="black")
    for c in range(5):
        draw.line([(x0 + c * width, y0), (x0 + c * width, y0 + len(rows) * height)],
                  fill="black")
    last = draw.textbbox((x0 + 3 * width + 10, 0), rows[1][3], font=font)[2]
    segments.append(Segment(" ".join(rows[1]), x0 + 10, y0 + height + 10, last,
                            y0 + height + 28, 0.95))
    return np.asarray(image), segments


def test_a_ruled_table_splits_a_row_read_as_one_detection() -> None:
    rgb, segments = _draw_ruled([["Item", "Mon", "Tue", "Wed"], ["Tea", "12", "15", "9"],
                                 ["Coffee", "30", "28", "33"]])
    (table,) = find_tables(rgb, segments)
    assert table.ruled
    assert (table.rows, table.cols, table.header_rows, table.name_col) == (3, 4, 1, 0)
    facts = {(label, value) for label, value, _, _ in table_facts(table)}
    assert ("Tea · Tue", 15.0) in facts
    assert ("Coffee · Wed", 33.0) in facts


def test_prose_in_two_columns_is_not_a_table() -> None:
    blank = np.full((400, 900, 3), 255, dtype=np.uint8)
    segments = [
        Segment(text, x, 40 + 30 * i, x + 380, 60 + 30 * i, 0.99)
        for i in range(6)
        for x, text in ((40, f"the committee met on a quiet morning and agreed {i}"),
                        (480, f"that every proposal would be heard in its turn {i}"))
    ]
    assert find_tables(blank, segments) == []


def test_no_tables_leave_the_evidence_as_it_was() -> None:
    segments = [Segment("Total 42.10", 10, 10, 120, 30, 0.99)]
    evidence = build_evidence(segments, 200, 100, min_confidence=0.5)
    before = repr(evidence)
    add_tables(evidence, [], 200, 100)
    assert repr(evidence) == before


def test_a_list_of_labels_and_prices_without_a_header_is_not_a_table() -> None:
    """A receipt's lines align like a table's, but no header names a column: the grid would
    add nothing, and its lines stay as OCR read them."""
    blank = np.full((400, 600, 3), 255, dtype=np.uint8)
    items = [("Whole milk 2 L", "3.49"), ("Sourdough bread", "5.25"), ("Olive oil 750 ml", "9.80"),
             ("TOTAL", "18.54")]
    segments = [
        seg
        for i, (label, price) in enumerate(items)
        for seg in (Segment(label, 40, 40 + 30 * i, 40 + 11 * len(label), 60 + 30 * i, 0.99),
                    Segment(price, 480, 40 + 30 * i, 530, 60 + 30 * i, 0.99))
    ]
    assert find_tables(blank, segments) == []


def test_a_table_the_layout_model_marked_becomes_one_region_not_two() -> None:
    """The layout model's ``table`` region and the grid found in it are one table: the
    model's region takes the grid's label and box, and nothing is ``inside`` itself."""
    rgb, segments = _draw_ruled([["Item", "Mon", "Tue", "Wed"], ["Tea", "12", "15", "9"],
                                 ["Coffee", "30", "28", "33"]])
    height, width = rgb.shape[:2]
    # The model's box is a little loose around the ruled grid (20..500 x 20..140).
    layout = [LayoutBox("table", 12, 14, 508, 150, 0.93)]
    evidence = build_evidence(segments, width, height, min_confidence=0.5, layout=layout)
    (marked,) = [r for r in evidence["regions"] if r["kind"] == "table"]
    (table,) = find_tables(rgb, segments)
    add_tables(evidence, [table], width, height)
    assert validate_evidence(evidence, Variant.EVIDENCE) == []
    (region,) = [r for r in evidence["regions"] if r["kind"] == "table"]
    assert region["id"] == marked["id"]
    assert region["label"] == "table, 3 rows x 4 columns: Item | Mon | Tue | Wed"
    x, y, w, h = region["bbox"]
    drawn = (x * width, y * height, (x + w) * width, (y + h) * height)
    assert all(abs(a - b) <= 1 for a, b in zip(drawn, table.box, strict=True))  # the grid's
    assert region["confidence"] == 0.95  # the surer of the model and the grid
    assert not [r for r in evidence["relations"]
                if r["subject"] == r["object"] or (r["predicate"] == "inside"
                                                   and r["subject"] == region["id"])]
    assert "Tables: 1 (3x4)" in evidence["summary"]


def test_a_layout_table_elsewhere_stays_its_own_region() -> None:
    """A found table that neither overlaps the model's ``table`` region by half nor holds
    its centre (nor sits centred in it) is another table: both are kept."""
    rgb, segments = _draw_ruled([["Item", "Mon", "Tue", "Wed"], ["Tea", "12", "15", "9"],
                                 ["Coffee", "30", "28", "33"]])
    height, width = rgb.shape[:2]
    layout = [LayoutBox("table", 300, 150, 510, 178, 0.8)]  # under the grid, not it
    evidence = build_evidence(segments, width, height, min_confidence=0.5, layout=layout)
    add_tables(evidence, find_tables(rgb, segments), width, height)
    labels = sorted(r["label"] for r in evidence["regions"] if r["kind"] == "table")
    assert len(labels) == 2
    assert labels[1] == "table, 3 rows x 4 columns: Item | Mon | Tue | Wed"


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_look_at_a_table_answers_from_the_row_and_column(
    structure_corpus: dict[str, Any]
) -> None:
    from deepseek_eyes.vision.routes.local_ocr import LocalRoute
    from deepseek_eyes.vision.types import VisionRequest

    shot = structure_corpus["quarters_bordered"]
    width, height = shot.size
    route = LocalRoute(engine=shot.recorded_engine())

    async def look(question: str) -> dict[str, Any]:
        request = VisionRequest(
            purpose="target", image_bytes=b"", media_type="image/png", width=width,
            height=height, system_prompt="", user_prompt="", variant=Variant.TARGET,
            pixels=Image.fromarray(shot.rgb), question=question,
        )
        answer = await route.call(request)
        assert answer.value is not None
        assert validate_evidence(answer.value, Variant.TARGET) == []
        return answer.value

    found = await look("What was Q3 in the North?")
    assert found["answer"] == "The table reads 'North · Q3 = 1204'."
    assert 0.5 < found["confidence"] <= 0.7
    assert found["observations"][0]["text"] == "North · Q3 = 1204"
    missing = await look("What was Q7 in the Arctic?")
    assert "The table reads" not in missing["answer"]
    assert missing["confidence"] == 0.0
