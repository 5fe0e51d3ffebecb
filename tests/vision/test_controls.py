"""Interface elements on the local route: scored on Chromium-drawn screens read by the real
OCR engine (each element found as its own object, of the right kind, with its text), and
the evidence they write: objects with boxes, OCR lines split per element, the strict gate."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deepseek_eyes.vision.evidence.gate import validate_evidence
from deepseek_eyes.vision.routes.controls import Control, add_controls, find_controls
from deepseek_eyes.vision.routes.layout import Segment, build_evidence
from deepseek_eyes.vision.routes.tables import find_tables
from deepseek_eyes.vision.types import Variant
from helpers import SCORE
from vision.structure_pages import CONTROL_PAGES, TABLE_PAGES, ControlTruth

MIN_IOU = 0.5


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union else 0.0


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def match(truth: ControlTruth, found: list[Control]) -> Control | None:
    """The found element that overlaps a truth element best, at IoU 0.5 or more."""
    best = max(found, key=lambda c: _iou(truth.box, c.box), default=None)
    return best if best is not None and _iou(truth.box, best.box) >= MIN_IOU else None


@pytest.mark.slow
def test_controls_score_on_the_chromium_corpus(
    structure_corpus: dict[str, Any], record_property: Callable[[str, object], None]
) -> None:
    found_n = kind_n = text_n = total = worded = separated = extra = 0
    lines = []
    for name in CONTROL_PAGES:
        shot = structure_corpus[name]
        found = find_controls(shot.rgb, shot.segments)
        truths = shot.rendered.controls
        hit = kinds = texts = 0
        matched: set[int] = set()
        for truth in truths:
            control = match(truth, found)
            if control is None:
                continue
            matched.add(id(control))
            hit += 1
            kinds += control.kind == truth.kind
            texts += _norm(control.text) == truth.text
            if truth.text and truth.kind in ("button", "tab"):
                # Separated: its own object holds its text and nothing of its neighbours'.
                separated += _norm(control.text) == truth.text
        worded += sum(1 for t in truths if t.text and t.kind in ("button", "tab"))
        extra += sum(1 for c in found if id(c) not in matched)
        found_n, kind_n, text_n, total = found_n + hit, kind_n + kinds, text_n + texts, (
            total + len(truths))
        lines.append(f"  {name}: found {hit}/{len(truths)}, kind {kinds}/{len(truths)}, "
                     f"text {texts}/{len(truths)}")
    record_property(SCORE, "\n".join([
        "interface elements (IoU >= 0.5 against the DOM's boxes):", *lines,
        f"  total: found {found_n}/{total}, kind {kind_n}/{total}, text {text_n}/{total}, "
        f"buttons and tabs separated {separated}/{worded}, extra {extra}"]))
    assert found_n / total >= 0.9
    assert kind_n / total >= 0.9
    assert text_n / total >= 0.85
    assert separated == worded
    assert extra <= 1


@pytest.mark.slow
def test_tables_and_documents_show_no_controls(structure_corpus: dict[str, Any]) -> None:
    for page in TABLE_PAGES:
        shot = structure_corpus[page.name]
        tables = [t.box for t in find_tables(shot.rgb, shot.segments)]
        assert find_controls(shot.rgb, shot.segments, tables) == [], page.name
    # Why the route hands the tables over: a ruled cell is a box around a word.
    shot = structure_corpus["quarters_bordered"]
    assert {c.kind for c in find_controls(shot.rgb, shot.segments)} == {"button"}


@pytest.mark.slow
def test_states_labels_and_the_selected_tab(structure_corpus: dict[str, Any]) -> None:
    shot = structure_corpus["settings_form"]
    found = {(c.kind, c.text): c for c in find_controls(shot.rgb, shot.segments)}
    assert "checked" in found["checkbox", "Send me product updates"].attributes
    assert "unchecked" in found["checkbox", "Enable two-factor sign-in"].attributes
    assert "selected" in found["tab", "General"].attributes
    assert "selected" not in found["tab", "Billing"].attributes
    assert "label Email address" in found["text_field", "name@example.com"].attributes
    assert "filled" in found["button", "Save changes"].attributes
    assert "filled" not in found["button", "Cancel"].attributes


@pytest.mark.slow
def test_the_evidence_splits_buttons_and_lists_them_as_objects(
    structure_corpus: dict[str, Any]
) -> None:
    shot = structure_corpus["settings_form"]
    width, height = shot.size
    evidence = build_evidence(shot.segments, width, height, min_confidence=0.5)
    before = [line["text"] for line in evidence["ocr"]]
    assert "Save changes Cancel" in before  # what OCR lines alone said
    add_controls(evidence, find_controls(shot.rgb, shot.segments), width, height)
    assert validate_evidence(evidence, Variant.EVIDENCE) == []
    after = [line["text"] for line in evidence["ocr"]]
    assert "Save changes Cancel" not in after
    assert after.index("Save changes") + 1 == after.index("Cancel")
    labels = {o["label"]: o for o in evidence["objects"]}
    assert labels['button "Save changes"']["attributes"][0] == "button"
    assert 'text field "name@example.com"' in labels
    assert 'banner "Your trial ends in 3 days. Add a payment method."' in labels
    assert [o["id"] for o in evidence["objects"]] == [
        f"o{i}" for i in range(1, len(evidence["objects"]) + 1)]
    assert "Interface elements:" in evidence["summary"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_local_route_reports_controls(structure_corpus: dict[str, Any]) -> None:
    from deepseek_eyes.vision.routes.local_ocr import LocalRoute
    from deepseek_eyes.vision.types import VisionRequest

    shot = structure_corpus["sign_in"]
    width, height = shot.size
    request = VisionRequest(
        purpose="evidence", image_bytes=b"", media_type="image/png", width=width,
        height=height, system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
        pixels=Image.fromarray(shot.rgb),
    )
    answer = await LocalRoute(engine=shot.recorded_engine()).call(request)
    assert answer.value is not None
    assert validate_evidence(answer.value, Variant.EVIDENCE) == []
    labels = [o["label"] for o in answer.value["objects"]]
    assert 'button "Forgot password"' in labels
    assert 'button "Help"' in labels
    assert "text field" in labels  # the empty password field
    (note,) = [u["reason"] for u in answer.value["uncertainties"] if u["topic"] == "coverage"]
    assessed, unassessed = note.split("Not assessed")
    assert "interface elements (buttons, fields, checkboxes, tabs, banners)" in assessed
    assert "button(s)" in assessed
    assert "objects" not in note
    assert "interface elements" not in unassessed
    assert "Assessed: text, layout, tables, interface elements;" in answer.value["summary"]


def test_a_bad_image_is_a_value_error_and_a_blank_one_has_no_controls() -> None:
    with pytest.raises(ValueError, match="H×W×3"):
        find_controls(np.zeros((4, 4, 4), dtype=np.uint8), [])
    blank = np.full((200, 300, 3), 255, dtype=np.uint8)
    assert find_controls(blank, []) == []
    assert find_controls(blank, [Segment("hello there", 10, 10, 120, 30, 0.9)]) == []


def test_a_detection_across_two_buttons_is_cut_between_them() -> None:
    """Two outlined buttons whose labels the OCR read as one detection."""
    from PIL import ImageDraw

    image = Image.new("RGB", (400, 120), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 40, 140, 76), outline=(120, 120, 120))
    draw.rectangle((150, 40, 250, 76), outline=(120, 120, 120))
    # "Save changes" centred in the first, "Cancel" in the second, ~10 px a character.
    segments = [Segment("Save changes Cancel", 30, 48, 225, 68, 0.95)]
    found = find_controls(np.asarray(image), segments)
    assert [(c.kind, c.text) for c in found] == [("button", "Save changes"),
                                                  ("button", "Cancel")]


def test_words_beside_the_elements_of_a_line_are_kept() -> None:
    evidence = build_evidence(
        [Segment("Remember me Sign in Help", 10, 10, 250, 30, 0.99)], 300, 60,
        min_confidence=0.5)
    controls = [Control("button", "Sign in", (120, 5, 190, 35), 0.9),
                Control("button", "Help", (200, 5, 250, 35), 0.9)]
    add_controls(evidence, controls, 300, 60)
    assert [line["text"] for line in evidence["ocr"]] == ["Sign in", "Help", "Remember me"]
    assert validate_evidence(evidence, Variant.EVIDENCE) == []


def test_no_controls_leave_the_evidence_as_it_was() -> None:
    evidence = build_evidence([Segment("Total 42.10", 10, 10, 120, 30, 0.99)], 200, 100,
                              min_confidence=0.5)
    before = repr(evidence)
    add_controls(evidence, [], 200, 100)
    assert repr(evidence) == before
