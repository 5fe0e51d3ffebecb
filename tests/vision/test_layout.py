from __future__ import annotations

from deepseek_eyes.vision.routes.layout import (
    Segment,
    build_evidence,
    build_target,
    group_blocks,
    group_lines,
    quantities_in,
)


def seg(text: str, x0: float, y0: float, x1: float, y1: float, c: float = 0.95) -> Segment:
    return Segment(text, x0, y0, x1, y1, c)


def test_lines_join_near_segments_and_split_far_columns() -> None:
    segments = [
        seg("Total", 10, 100, 60, 120),
        seg("61.28", 70, 101, 120, 121),  # same phrase: small gap
        seg("General", 10, 10, 80, 30),
        seg("Enable notifications", 300, 12, 500, 31),  # far column on the same row
    ]
    lines = group_lines(segments)
    assert [line.text for line in lines] == ["General", "Enable notifications", "Total 61.28"]


def test_blocks_group_adjacent_lines() -> None:
    lines = group_lines([
        seg("Heading", 10, 10, 200, 30),
        seg("first paragraph line", 10, 36, 300, 56),
        seg("footer far below", 10, 400, 200, 420),
    ])
    assert group_blocks(lines) == [[0, 1], [2]]


def test_quantities_with_labels_units_and_currency() -> None:
    found = quantities_in("Revenue 48,213 EUR")
    assert [(q.label, q.value, q.unit) for q in found] == [("Revenue", 48213.0, "EUR")]
    assert [(q.value, q.unit) for q in quantities_in("Price $1,299.00 15% off")] == [
        (1299.0, "USD"), (15.0, "%")
    ]
    assert quantities_in("Churn 2.4%")[0].label == "Churn"
    # Dates, times, ids and versions are not quantities.
    assert quantities_in("Invoice #2026-0412 Date 2026-11-30 at 22:00 v1.2.3") == []


def test_evidence_is_complete_and_honest() -> None:
    segments = [
        seg("ACME Store", 10, 10, 200, 30, 0.99),
        seg("Total 61.28", 10, 40, 200, 60, 0.97),
        seg("blurry", 10, 300, 100, 320, 0.3),
    ]
    evidence = build_evidence(segments, 400, 400, min_confidence=0.6)
    assert evidence["schema"] == "deepseekeyes.evidence.v1"
    assert [o["text"] for o in evidence["ocr"]] == ["ACME Store", "Total 61.28", "blurry"]  # type: ignore[index]
    assert evidence["objects"] == []
    ocr0 = evidence["ocr"][0]  # type: ignore[index]
    assert ocr0["bbox"] == [0.025, 0.025, 0.475, 0.05]
    facts = evidence["quantitative_facts"]
    assert [(f["label"], f["value"]) for f in facts] == [("Total", 61.28)]  # type: ignore[union-attr]
    topics = [u["topic"] for u in evidence["uncertainties"]]  # type: ignore[union-attr]
    assert topics == ["coverage", "low-confidence text"]
    assert len(evidence["regions"]) == 2  # type: ignore[arg-type]
    assert evidence["relations"] == [
        {"subject": "r2", "predicate": "below", "object": "r1", "confidence": 0.9}
    ]


def test_no_text_says_so() -> None:
    evidence = build_evidence([], 64, 32, min_confidence=0.6)
    assert evidence["ocr"] == []
    assert "no legible text" in str(evidence["summary"])


def test_target_quotes_matching_line() -> None:
    segments = [seg("Subtotal 56.74", 10, 10, 200, 30), seg("Total 61.28", 10, 40, 200, 60)]
    target = build_target(segments, 400, 400, "What is the total?")
    assert target["schema"] == "deepseekeyes.target.v1"
    assert "Total 61.28" in str(target["answer"])
    assert float(target["confidence"]) <= 0.5  # type: ignore[arg-type]
    miss = build_target(segments, 400, 400, "Which colour is the logo?")
    assert miss["observations"] == []


def test_a_fact_is_kept_only_where_a_label_meets_a_quantity() -> None:
    """The demo receipt's address and card lines are identifiers, not quantities; its
    amounts, counts and measures stay, with their labels."""
    assert quantities_in("214 Harbor Street, Portland OR") == []
    assert quantities_in("Ship to 214 Harbor Street") == []
    assert quantities_in("VISA **** 4821") == []
    assert quantities_in("Card ending 4821") == []
    assert quantities_in("Tel 555 1234") == []
    assert quantities_in("4111 1111 1111 1111") == []
    assert quantities_in("Register 3") == []
    # The amount beside the card's digits is still an amount.
    (paid,) = quantities_in("VISA **** 4821 64.03")
    assert (paid.value, paid.text) == (64.03, "64.03")
    (total,) = quantities_in("Total $42.10")
    assert (total.label, total.value, total.unit) == ("Total", 42.1, "USD")
    (qty,) = quantities_in("Qty 3")
    assert (qty.label, qty.value, qty.unit) == ("Qty", 3.0, "")
    (weight,) = quantities_in("Weight: 1.2 kg")
    assert (weight.label, weight.value, weight.unit) == ("Weight", 1.2, "kg")
    # A unit says what a number measures even with no label before it.
    (count, price) = quantities_in("2 x Coffee 7.00")
    assert (count.value, count.unit, price.label, price.value) == (2.0, "x", "Coffee", 7.0)


def test_evidence_from_the_demo_receipt_lines_has_no_street_or_card_numbers() -> None:
    lines = ["214 Harbor Street, Portland OR", "Tel 503-555-0148", "Subtotal 59.01",
             "TOTAL 64.03", "VISA **** 4821 64.03"]
    segments = [seg(text, 10, 10 + 30 * i, 300, 30 + 30 * i, 0.99)
                for i, text in enumerate(lines)]
    evidence = build_evidence(segments, 400, 300, min_confidence=0.5)
    facts = [(f["label"], f["value"]) for f in evidence["quantitative_facts"]]  # type: ignore[index,union-attr]
    assert facts == [("Subtotal", 59.01), ("TOTAL", 64.03), ("VISA ****", 64.03)]
    assert all(value not in (214.0, 4821.0) for _, value in facts)


def _coverage(evidence: dict[str, object]) -> str:
    (note,) = [u["reason"] for u in evidence["uncertainties"]  # type: ignore[union-attr]
               if u["topic"] == "coverage"]
    return str(note)


def test_the_coverage_note_says_what_was_assessed_and_what_was_not() -> None:
    """Built from text and layout alone, the evidence says tables and interface elements
    were not assessed; once their searches ran, it says what they found, and never that
    objects at large were looked at."""
    from deepseek_eyes.vision.routes.entries import state_coverage

    evidence = build_evidence([seg("Save changes", 10, 10, 120, 30, 0.99)], 400, 200,
                              min_confidence=0.6)
    note = _coverage(evidence)
    assert "the page's layout" in note.split("Not assessed")[0]
    assert "tables; interface elements" in note.split("Not assessed")[1]
    assert str(evidence["summary"]).endswith(
        "Assessed: text, layout; not assessed: tables, interface elements, pictures, colours "
        "and chart marks.")
    state_coverage(evidence, layout=True, tables=0, controls={"button": 2, "text_field": 1})
    assessed, unassessed = _coverage(evidence).split("Not assessed")
    assert "tables from rule lines and aligned columns (none found)" in assessed
    assert "from their outlines and fills (2 button(s), 1 text field(s))" in assessed
    assert "interface elements" not in unassessed
    assert "tables" not in unassessed
    assert "colours" in unassessed
    assert "chart marks" in unassessed
    assert "what pictures show" in unassessed
    summary = str(evidence["summary"])
    assert summary.endswith("Assessed: text, layout, tables, interface elements; not assessed: "
                            "pictures, colours and chart marks.")
    assert summary.count("Assessed:") == 1  # the first statement gave way


def test_without_text_or_layout_the_coverage_note_says_neither_search_ran() -> None:
    from deepseek_eyes.vision.routes.entries import state_coverage

    evidence = build_evidence([], 64, 32, min_confidence=0.6, layout=None)
    state_coverage(evidence, layout=False, tables=None, controls=None)
    assessed, unassessed = _coverage(evidence).split("Not assessed")
    assert "none legible" in assessed
    assert "the layout model did not run" in unassessed
    assert "tables and interface elements" in unassessed
    assert str(evidence["summary"]).endswith(
        "Assessed: text; not assessed: layout, tables, interface elements, pictures, colours "
        "and chart marks.")


def test_a_question_naming_a_row_and_a_column_is_answered_from_the_table() -> None:
    from deepseek_eyes.vision.routes.segments import NamedCell

    segments = [seg("Region Q1 Q3", 10, 10, 300, 30), seg("North 1180 1204", 10, 40, 300, 60)]
    cells = [NamedCell("North", "Q1", "1180", (110, 40, 150, 60), 0.98),
             NamedCell("North", "Q3", "1204", (210, 40, 250, 60), 0.97),
             NamedCell("South", "Q3", "990", (210, 70, 250, 90), 0.97)]
    target = build_target(segments, 400, 400, "What was Q3 in the North?", cells=cells)
    assert target["answer"] == "The table reads 'North · Q3 = 1204'."
    assert target["confidence"] == 0.7  # capped: words matched, not understood
    (seen,) = target["observations"]  # type: ignore[misc]
    assert seen["text"] == "North · Q3 = 1204"
    assert seen["bbox"] == [0.525, 0.1, 0.1, 0.05]
    # A row without its column, or a column without its row, is not an answer from the table.
    for question in ("What was the North's best quarter?", "What was Q3 in the West?"):
        other = build_target(segments, 400, 400, question, cells=cells)
        assert "The table reads" not in str(other["answer"])
    nothing = build_target(segments, 400, 400, "What was Q3 in the West?", cells=cells)
    assert nothing["answer"] == "The text that best matches the question reads: 'Region Q1 Q3'."
    # Nor is a question about what the route does not see.
    colour = build_target(segments, 400, 400, "What colour is Q3 in the North?", cells=cells)
    assert colour["confidence"] == 0.0


def test_cells_naming_the_question_equally_well_are_all_quoted_with_less_confidence() -> None:
    from deepseek_eyes.vision.routes.segments import NamedCell

    cells = [NamedCell("North", "Q3", "1204", (210, 40, 250, 60), 0.97),
             NamedCell("North", "Q3", "1310", (210, 140, 250, 160), 0.97)]  # a second table
    target = build_target([], 400, 400, "What was Q3 in the North?", cells=cells)
    assert target["answer"] == ("Several table cells match the question's row and column: "
                                "'North · Q3 = 1204; North · Q3 = 1310'.")
    assert target["confidence"] == 0.4
