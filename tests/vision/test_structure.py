"""The local route's structure (issue 42): typed regions, reading order, refusals, charts and
honest gaps, scored on a generated corpus with ground truth (``structure_corpus``) and
pinned by pure tests of each stage.

The corpus is read once per module, through the real route (OCR and layout models, loaded
once, the network switched off); every scoring test reads the stored evidence. Scores are
printed (``-s``) and asserted against floors.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.vision.evidence.gate import validate_evidence
from deepseek_eyes.vision.evidence.overlay import draw_overlay
from deepseek_eyes.vision.routes.charts import find_charts
from deepseek_eyes.vision.routes.layout import build_evidence, build_target
from deepseek_eyes.vision.routes.plausible import judge, refuse_implausible
from deepseek_eyes.vision.routes.regions import LayoutBox, wanted
from deepseek_eyes.vision.routes.segments import Segment
from deepseek_eyes.vision.types import Variant, VisionRequest
from vision.structure_corpus import Sample, corpus

Box = tuple[float, float, float, float]


def seg(text: str, x0: float, y0: float, x1: float, y1: float, c: float = 0.98) -> Segment:
    return Segment(text, x0, y0, x1, y1, c)


# --- the corpus, read once -------------------------------------------------------------


@dataclass
class Read:
    sample: Sample
    evidence: dict[str, Any]
    seconds: float
    cpu_seconds: float


@pytest.fixture(scope="module")
def reads() -> Iterator[dict[str, Read]]:
    from deepseek_eyes.vision.routes.local_ocr import LocalRoute

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("network access is not allowed in this test")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket, "create_connection", refuse)
        route = LocalRoute()
        out: dict[str, Read] = {}
        for sample in corpus():
            width, height = sample.image.size
            request = VisionRequest(
                purpose="evidence", image_bytes=b"", media_type="image/png", width=width,
                height=height, system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
                pixels=sample.image,
            )
            started, cpu = time.perf_counter(), time.process_time()
            answer = asyncio.run(route.call(request))
            assert answer.value is not None
            out[sample.name] = Read(
                sample, answer.value, time.perf_counter() - started, time.process_time() - cpu
            )
        yield out


def _pixels(bbox: Sequence[float], sample: Sample) -> Box:
    width, height = sample.image.size
    x, y, w, h = bbox
    return (x * width, y * height, (x + w) * width, (y + h) * height)


def iou(a: Box, b: Box) -> float:
    inter_w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    inter_h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = inter_w * inter_h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def region_type(region: dict[str, Any]) -> str:
    """The route's region type: the label's first word (``title: ...``, ``figure``)."""
    return str(region["label"]).split(":", 1)[0]


def region_score(read: Read) -> tuple[int, int]:
    """Truth regions matched by a region of the same type with IoU >= 0.5, of all."""
    matched = 0
    for truth in read.sample.regions:
        best = max(
            (
                iou(truth.box, _pixels(r["bbox"], read.sample))
                for r in read.evidence["regions"] if region_type(r) == truth.kind
            ),
            default=0.0,
        )
        matched += best >= 0.5
    return matched, len(read.sample.regions)


def order_score(read: Read) -> tuple[int, int, int]:
    """(truth lines found, of them in order with the next one found, truth lines)."""
    ocr = [line["text"] for line in read.evidence["ocr"]]
    positions = [ocr.index(text) for text in read.sample.order if text in ocr]
    in_order = sum(1 for a, b in itertools.pairwise(positions) if a < b)
    return len(positions), in_order + (1 if positions else 0), len(read.sample.order)


def test_every_corpus_evidence_passes_the_strict_gate(reads: dict[str, Read]) -> None:
    for name, read in reads.items():
        assert validate_evidence(read.evidence, Variant.EVIDENCE) == [], name


def test_region_types_and_boxes_score(reads: dict[str, Read]) -> None:
    total = found = 0
    for name in ("two_columns", "figure_page"):
        matched, count = region_score(reads[name])
        print(f"structure: regions[{name}] type+IoU>=0.5 {matched}/{count}")
        total += count
        found += matched
    print(f"structure: regions type+IoU>=0.5 {found}/{total} = {found / total:.2f}")
    assert found / total >= 0.8


def test_two_columns_are_read_column_by_column(reads: dict[str, Read]) -> None:
    read = reads["two_columns"]
    found, in_order, total = order_score(read)
    print(f"structure: reading order[two_columns] found {found}/{total}, in order {in_order}")
    assert found >= 0.9 * total
    assert in_order == found  # every found line after the one before it
    ocr = [line["text"] for line in read.evidence["ocr"]]
    # No line runs across the gutter into the other column.
    left = {t.split()[0] for t in read.sample.order[1:15]}
    assert not any(
        len(t.split()) > 5 and t.split()[0] in left and t.split()[5][:2].isdigit() for t in ocr
    )
    kinds = [region_type(r) for r in read.evidence["regions"]]
    assert kinds.count("text") == 2  # one region a column
    predicates = {r["predicate"] for r in read.evidence["relations"]}
    assert {"below", "left_of"} <= predicates


def test_figure_page_reads_caption_after_figure(reads: dict[str, Read]) -> None:
    read = reads["figure_page"]
    found, in_order, total = order_score(read)
    print(f"structure: reading order[figure_page] found {found}/{total}, in order {in_order}")
    assert in_order == found >= total - 1
    regions = read.evidence["regions"]
    ids = {region_type(r): r["id"] for r in regions}
    assert {"subject": ids["caption"], "predicate": "below", "object": ids["figure"],
            "confidence": 0.9} in read.evidence["relations"]
    topics = [u["topic"] for u in read.evidence["uncertainties"]]
    assert "figure content" in topics


def test_text_free_images_have_no_text(reads: dict[str, Read]) -> None:
    free = [read for read in reads.values() if not read.sample.has_text]
    clean = 0
    for read in free:
        evidence = read.evidence
        ok = evidence["ocr"] == [] and evidence["quantitative_facts"] == []
        clean += ok
        assert ok, (read.sample.name, evidence["ocr"])
        reasons = " ".join(
            u["reason"] for u in evidence["uncertainties"] if u["topic"] == "no text"
        )
        assert "objects" in reasons
        assert "colours" in reasons
        assert "no legible text" in evidence["summary"]
    print(f"structure: text-free images with no text {clean}/{len(free)}")


def test_chart_ticks_and_values_are_apart(reads: dict[str, Read]) -> None:
    read = reads["bar_chart"]
    evidence = read.evidence
    ocr = [line["text"] for line in evidence["ocr"]]
    assert "20" in ocr
    assert "18.9" in ocr
    assert not any("20" in t.split() and "18.9" in t.split() for t in ocr)
    facts = evidence["quantitative_facts"]
    ticks = sorted(f["text"] for f in facts if f["label"] == "y-axis tick")
    values = {f["text"]: f["label"] for f in facts if "printed on the chart" in f["label"]}
    assert ticks == sorted(read.sample.ticks)
    assert sorted(values) == sorted(read.sample.values)
    assert values["18.9"].startswith("North")
    assert values["7.5"].startswith("East")
    assert [r["kind"] for r in evidence["regions"]].count("chart") == 1
    topics = [u["topic"] for u in evidence["uncertainties"]]
    assert "chart values" in topics
    assert "refused text" in topics  # the rotated axis title, misread, is not evidence
    print(f"structure: chart ticks {len(ticks)}/{len(read.sample.ticks)}, values "
          f"{len(values)}/{len(read.sample.values)}")


def test_overlay_draws_the_regions(reads: dict[str, Read], tmp_path: Path) -> None:
    read = reads["figure_page"]
    out = tmp_path / "overlay.png"
    drawn = draw_overlay(read.sample.image, read.evidence, out)
    evidence = read.evidence
    boxes = sum(len(evidence[k]) for k in ("regions", "ocr", "quantitative_facts"))
    assert drawn == boxes
    from PIL import Image

    with Image.open(out) as image:
        figure = next(r for r in evidence["regions"] if r["kind"] == "figure")
        x0, y0, _, _ = (round(v) for v in _pixels(figure["bbox"], read.sample))
        assert image.convert("RGB").getpixel((x0, y0 + 20)) == (0, 110, 255)


def test_structure_costs_little_beside_ocr(reads: dict[str, Read]) -> None:
    total = sum(read.seconds for read in reads.values())
    cpu = sum(read.cpu_seconds for read in reads.values())
    print(f"structure: corpus of {len(reads)} read in {total:.2f}s wall, {cpu:.2f}s CPU "
          "(OCR and layout, models loaded once)")
    assert total > 0


# --- the stages, one by one -------------------------------------------------------------


def test_a_photo_texture_read_as_a_dot_is_refused() -> None:
    dot = seg("·", 16, 48, 624, 432, 0.78)  # 95% x 80% of a 640x480 photo
    kept, refused = refuse_implausible([dot], 640, 480)
    assert kept == []
    assert "no letter or digit" in refused[0].reason
    # The same detection read as a letter is still a texture: too vast for one glyph.
    assert judge(seg("o", 16, 48, 624, 432, 0.78), 640, 480) is not None
    # A poster's one big word read with confidence stays.
    assert judge(seg("SALE", 40, 100, 600, 380, 0.98), 640, 480) is None


def test_glyph_count_must_fit_the_box() -> None:
    assert judge(seg("Total 61.28", 10, 10, 130, 30, 0.8), 400, 400) is None
    assert judge(seg("a", 10, 10, 300, 30, 0.8), 400, 400) is not None  # one glyph, 15 wide
    too_many = "x" * 60
    assert judge(seg(too_many, 10, 10, 110, 30, 0.8), 400, 400) is not None
    assert judge(seg("REev UR)", 47, 187, 70, 317, 0.68), 800, 500) is not None  # rotated


def test_evidence_says_what_it_refused() -> None:
    evidence = build_evidence([seg("·", 16, 48, 624, 432, 0.78)], 640, 480, min_confidence=0.6)
    assert evidence["ocr"] == []
    topics = [u["topic"] for u in evidence["uncertainties"]]  # type: ignore[union-attr]
    assert topics[:3] == ["coverage", "no text", "refused text"]
    assert validate_evidence(evidence, Variant.EVIDENCE) == []


def test_little_text_says_the_rest_was_not_assessed() -> None:
    evidence = build_evidence([seg("EXIT", 300, 20, 340, 36)], 640, 480, min_confidence=0.6)
    gaps = {u["topic"]: u["reason"] for u in evidence["uncertainties"]}  # type: ignore[union-attr]
    assert "little text" in gaps
    assert "objects" in gaps["little text"]


def chart_segments() -> list[Segment]:
    ticks = [
        seg(str(v), 68, 51 + i * 97, 95, 71 + i * 97) for i, v in enumerate((20, 15, 10, 5, 0))
    ]
    return [
        *ticks,
        seg("18.9", 166, 58, 210, 79),  # level with the tick 20
        seg("7.5", 466, 276, 501, 300),
        seg("North", 163, 449, 211, 471),
        seg("East", 464, 449, 504, 469),
    ]


def test_a_tick_and_a_bar_value_on_one_row_stay_apart() -> None:
    segments = chart_segments()
    (chart,) = find_charts(segments)
    assert sorted(t.value for t in chart.ticks) == [0, 5, 10, 15, 20]
    assert {(v.segment.text, v.category) for v in chart.values} == {
        ("18.9", "North"), ("7.5", "East")
    }
    evidence = build_evidence(segments, 800, 500, min_confidence=0.6)
    ocr = [line["text"] for line in evidence["ocr"]]  # type: ignore[union-attr]
    assert "20 18.9" not in ocr
    assert {"20", "18.9"} <= set(ocr)
    labels = {f["text"]: f["label"] for f in evidence["quantitative_facts"]}  # type: ignore[union-attr]
    assert labels["20"] == "y-axis tick"
    assert labels["18.9"] == "North (value printed on the chart)"
    assert validate_evidence(evidence, Variant.EVIDENCE) == []


def test_numbers_growing_down_a_page_are_no_axis() -> None:
    rows = [seg(str(n), 20, 40 + n * 30, 40, 60 + n * 30) for n in range(1, 7)]  # row numbers
    assert find_charts(rows) == []
    years = [seg(str(2019 + i), 100 + i * 120, 20, 160 + i * 120, 40) for i in range(4)]
    assert find_charts(years) == []  # a table's header row: no figure, no value axis
    figure = (0.0, 0.0, 700.0, 300.0)
    assert [t.axis for t in find_charts(years, [figure])[0].ticks] == ["x"] * 4


def test_aligned_paragraphs_of_two_columns_read_column_by_column() -> None:
    """No layout model: blocks from the lines alone, paragraphs of both columns level."""
    segments = []
    for column, x in (("L", 20), ("R", 420)):
        for paragraph in range(2):
            for line in range(3):
                y = 20 + paragraph * 140 + line * 30
                segments.append(seg(f"{column}{paragraph}{line} words here", x, y, x + 300, y + 20))
    evidence = build_evidence(segments, 800, 400, min_confidence=0.6)
    ocr = [line["text"].split()[0] for line in evidence["ocr"]]  # type: ignore[union-attr]
    assert ocr == [f"{c}{p}{n}" for c in "LR" for p in range(2) for n in range(3)]


def test_a_sidebar_is_read_apart_from_the_content() -> None:
    segments = [seg(f"Menu item {i}", 10, 60 + i * 40, 130, 80 + i * 40) for i in range(6)]
    segments += [seg(f"Content line {i} of the article", 260, 60 + i * 30, 700, 80 + i * 30)
                 for i in range(8)]
    layout = [LayoutBox("text", 255, 55, 705, 300, 0.9)]
    evidence = build_evidence(segments, 800, 400, min_confidence=0.6, layout=layout)
    ocr = [line["text"] for line in evidence["ocr"]]  # type: ignore[union-attr]
    assert ocr[:6] == [f"Menu item {i}" for i in range(6)]
    assert ocr[6:] == [f"Content line {i} of the article" for i in range(8)]


def test_layout_regions_type_the_lines_they_hold() -> None:
    segments = [
        seg("Annual Report", 100, 40, 400, 80),
        seg("Body text of the report", 100, 120, 500, 140),
        seg("Figure 2. Sales", 120, 520, 320, 540),
    ]
    layout = [
        LayoutBox("title", 150, 45, 380, 75, 0.7),  # drawn narrower than the words
        LayoutBox("text", 100, 118, 500, 142, 0.95),
        LayoutBox("figure", 100, 200, 500, 500, 0.9),
        LayoutBox("caption", 120, 522, 300, 538, 0.5),
    ]
    evidence = build_evidence(segments, 600, 600, min_confidence=0.6, layout=layout)
    regions = evidence["regions"]
    assert [r["label"] for r in regions] == [  # type: ignore[union-attr]
        "title: Annual Report", "text: Body text of the report", "figure",
        "caption: Figure 2. Sales",
    ]
    assert [r["kind"] for r in regions] == ["text_block", "text_block", "figure", "text_block"]  # type: ignore[union-attr]
    assert regions[0]["bbox"] == [round(100 / 600, 6), round(40 / 600, 6), 0.5, round(40 / 600, 6)]  # type: ignore[index]
    facts = evidence["quantitative_facts"]
    assert facts == []  # "Figure 2." numbers a figure; it measures nothing
    assert validate_evidence(evidence, Variant.EVIDENCE) == []


def test_look_says_it_cannot_answer_rather_than_invent() -> None:
    segments = [seg("Subtotal 56.74", 10, 10, 200, 30), seg("Total 61.28", 10, 40, 200, 60)]
    miss = build_target(segments, 400, 400, "What animal is in the photo?")
    assert miss["confidence"] == 0.0
    assert str(miss["answer"]).startswith("The local route cannot answer this")
    assert miss["observations"] == []
    colour = build_target(segments, 400, 400, "What colour is the Total?")
    assert colour["confidence"] == 0.0
    assert "does not see colour" in str(colour["answer"])
    hit = build_target(segments, 400, 400, "What is the total?")
    assert "Total 61.28" in str(hit["answer"])
    assert 0 < float(hit["confidence"]) <= 0.5  # type: ignore[arg-type]
    for value in (miss, colour, hit):
        assert validate_evidence(value, Variant.TARGET) == []


def test_extreme_shapes_skip_the_layout_model() -> None:
    assert wanted(1000, 800)
    assert not wanted(20000, 2)
    assert not wanted(3, 4000)
    assert not wanted(40, 40)


def test_the_answer_fingerprint_is_not_the_one_before_structure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepseek_eyes.vision.routes import local_ocr, regions
    from deepseek_eyes.vision.routes.local_ocr import ENGINE_ID, LocalOcrEngine, LocalRoute
    from deepseek_eyes.vision.routes.regions import LayoutModel

    route = LocalRoute(engine=LocalOcrEngine(), layout=LayoutModel())  # nothing loaded
    before = (  # the identity evidence was cached under before the route saw structure
        f"local\n{ENGINE_ID}\n{local_ocr._engine_version()}\ntiles-2;cls=off;rec_batch=1\n0.6"
    )
    assert route.answer_fingerprint != hashlib.sha256(before.encode()).hexdigest()
    base = route.answer_fingerprint
    installed = regions.layout_version()
    monkeypatch.setattr(local_ocr, "layout_version", lambda: installed + ".post1")
    assert route.answer_fingerprint != base  # another layout model: other evidence
    monkeypatch.setattr(local_ocr, "layout_version", lambda: installed)
    from deepseek_eyes.settings import LocalRouteSettings

    off = LocalRoute(
        settings=LocalRouteSettings(layout=False), engine=LocalOcrEngine(), layout=LayoutModel()
    )
    assert off.answer_fingerprint != base


def test_layout_off_skips_the_model_and_a_model_failure_is_a_route_error() -> None:
    from PIL import Image

    from deepseek_eyes.errors import RouteError
    from deepseek_eyes.settings import LocalRouteSettings
    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine, LocalRoute
    from deepseek_eyes.vision.routes.regions import LayoutModel

    engine = LocalOcrEngine()
    engine._engine = lambda pixels: None  # reads nothing, loads nothing
    broken = LayoutModel()

    def explode(_: Any) -> None:
        raise ValueError("model failure")

    broken._model = explode
    request = VisionRequest(
        purpose="evidence", image_bytes=b"", media_type="image/png", width=200, height=160,
        system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
        pixels=Image.new("RGB", (200, 160), "white"),
    )
    off = LocalRoute(settings=LocalRouteSettings(layout=False), engine=engine, layout=broken)
    answer = asyncio.run(off.call(request))
    assert answer.value is not None
    assert answer.value["regions"] == []
    assert "layout" in [u["topic"] for u in answer.value["uncertainties"]]
    with pytest.raises(RouteError) as info:
        asyncio.run(LocalRoute(engine=engine, layout=broken).call(request))
    assert info.value.code == "VISION_ROUTE_ENGINE_FAILED"


def test_a_chart_in_a_dashboard_figure_keeps_its_own_box_and_loses_no_line() -> None:
    """The layout model called a whole dashboard one figure: the chart is a region of its
    own inside it, the table's numbers beside it are no chart values, and a tick the model
    boxed as text (inside the chart inside the figure) is still read."""
    ticks = [
        seg(v, 116 - 9 * len(v), 312 + i * 113, 116, 328 + i * 113)
        for i, v in enumerate(("60,000", "40,000", "20,000", "0"))
    ]
    months = [seg(m, 161 + i * 92, 673, 200 + i * 92, 701) for i, m in enumerate(
        ("Oct", "Nov", "Dec", "Jan", "Feb", "Mar"))]
    table = [seg("Germany", 788, 325, 860, 345), seg("18,940", 985, 325, 1040, 345),
             seg("France", 788, 369, 840, 389), seg("11,072", 985, 369, 1040, 389),
             seg("Spain", 788, 413, 835, 433), seg("6,204", 990, 413, 1040, 433)]
    note = seg("Churn is measured on paid accounts.", 784, 683, 1033, 707)
    segments = [*ticks, *months, *table, note]
    layout = [
        LayoutBox("figure", 10, 10, 1190, 730, 0.9),
        LayoutBox("text", 62, 308, 120, 332, 0.47),  # the model's box around "60,000"
    ]
    evidence = build_evidence(segments, 1200, 760, min_confidence=0.6, layout=layout)
    ocr = " | ".join(line["text"] for line in evidence["ocr"])  # type: ignore[union-attr]
    assert all(s.text in ocr for s in segments), ocr
    kinds = [r["kind"] for r in evidence["regions"]]  # type: ignore[union-attr]
    assert "figure" in kinds
    assert "chart" in kinds
    chart = next(r for r in evidence["regions"] if r["kind"] == "chart")  # type: ignore[union-attr]
    x, _, w, _ = chart["bbox"]
    assert x + w < 788 / 1200  # the table is not in the chart
    facts = evidence["quantitative_facts"]
    assert not any("printed on the chart" in f["label"] for f in facts)  # type: ignore[union-attr]
    assert sorted(f["text"] for f in facts if f["label"] == "y-axis tick") == sorted(  # type: ignore[union-attr]
        t.text for t in ticks
    )
    assert validate_evidence(evidence, Variant.EVIDENCE) == []


def test_a_window_title_reads_before_the_sidebar_and_the_content() -> None:
    segments = [seg("Settings - Acme Notes", 400, 10, 600, 30)]
    segments += [seg(f"Section {i}", 20, 80 + i * 40, 140, 100 + i * 40) for i in range(5)]
    segments += [seg(f"Option {i} with its description", 300, 80 + i * 30, 760, 100 + i * 30)
                 for i in range(6)]
    evidence = build_evidence(segments, 800, 400, min_confidence=0.6)
    ocr = [line["text"] for line in evidence["ocr"]]  # type: ignore[union-attr]
    assert ocr[0] == "Settings - Acme Notes"
    assert ocr[1:6] == [f"Section {i}" for i in range(5)]
    assert ocr[6:] == [f"Option {i} with its description" for i in range(6)]
