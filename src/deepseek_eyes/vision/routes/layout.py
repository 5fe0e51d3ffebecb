"""From OCR segments (and the layout model's regions) to full evidence: lines, typed
regions in reading order, numbers and doubts.

The local route reads text and the page's layout, and the evidence it builds says exactly
that: OCR lines with their boxes and confidence, in reading order; typed regions (title,
text, caption, header, footer, list, table, figure, chart) with the lines they hold;
``inside``/``below``/``left_of`` relations between them; each quantity a label names (with
its unit) and a chart's ticks and printed values as quantitative facts; and as
uncertainties what it did not assess or declined to read. It never invents an object.
The stages, in the order :func:`build_evidence` calls them: refusals of implausible
detections (:mod:`.plausible`), charts (:mod:`.charts`), regions, columns and reading order
(:mod:`.structure`), entries (:mod:`.entries`).

A quantitative fact is kept only where a label meets a quantity (``Total $42.10``,
``Qty 3``, ``Weight 1.2 kg``): a digit run is not a measurement because it is a number. A
bare number with no label and no unit (``214 Harbor Street``), digits after a mask or an
identifier's noun (``VISA **** 4821``, ``Tel 555 1234``), the groups that follow such digits
and a number an address's street word follows are identifiers; a fact made of them told
the model a street number was an amount.

Pure functions over plain data, so they are tested without loading an OCR model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from deepseek_eyes.vision.routes.charts import find_charts
from deepseek_eyes.vision.routes.entries import (
    MAX_ITEMS,
    chart_facts,
    clip,
    gaps,
    norm_box,
    ocr_entries,
    region_entries,
    relation_entries,
    summary,
    unit_interval,
)
from deepseek_eyes.vision.routes.plausible import refuse_implausible
from deepseek_eyes.vision.routes.regions import LayoutBox
from deepseek_eyes.vision.routes.segments import Line, NamedCell, Segment
from deepseek_eyes.vision.routes.structure import arrange

__all__ = [
    "Line",
    "Segment",
    "build_evidence",
    "build_target",
    "group_blocks",
    "group_lines",
    "quantities_in",
]



def _vertical_overlap(a: Segment, b: Segment) -> float:
    top, bottom = max(a.y0, b.y0), min(a.y1, b.y1)
    return max(0.0, bottom - top) / max(1e-6, min(a.height, b.height))


def _numeric(text: str) -> bool:
    chars = [c for c in text if not c.isspace()]
    if not chars or not any(c.isdigit() for c in chars):
        return False
    numeric = sum(1 for c in chars if c.isdigit() or c in ".,%$€£¥+-−*xX/")
    return numeric / len(chars) >= 0.6


def group_lines(segments: Sequence[Segment], *, gap_factor: float = 2.0) -> list[Line]:
    """Reading-order lines: segments that share a row and sit close together.

    A row is a band of segments overlapping vertically by half their height. Inside a row,
    a horizontal gap wider than ``gap_factor`` line heights starts a new line, so a
    sidebar label and the content beside it stay apart while words of one phrase join.
    """
    rows: list[list[Segment]] = []
    for seg in sorted(segments, key=lambda s: (s.cy, s.x0)):
        for row in rows:
            if _vertical_overlap(row[-1], seg) >= 0.5 or any(
                _vertical_overlap(other, seg) >= 0.5 for other in row
            ):
                row.append(seg)
                break
        else:
            rows.append([seg])
    lines: list[Line] = []
    for row in sorted(rows, key=lambda r: min(s.y0 for s in r)):
        row.sort(key=lambda s: s.x0)
        current = [row[0]]
        for seg in row[1:]:
            height = max(seg.height, current[-1].height)
            # A number across a wide gap is the value of the label on its left (a price
            # column, a table cell); words across a wide gap are another column.
            if seg.x0 - current[-1].x1 > gap_factor * height and not _numeric(seg.text):
                lines.append(Line(tuple(current)))
                current = [seg]
            else:
                current.append(seg)
        lines.append(Line(tuple(current)))
    return lines


def group_blocks(lines: Sequence[Line]) -> list[list[int]]:
    """Indices of lines that form text blocks: vertically adjacent, horizontally overlapping."""
    parent = list(range(len(lines)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    boxes = [line.box for line in lines]
    for i, (ax0, ay0, ax1, ay1) in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            bx0, by0, bx1, by1 = boxes[j]
            height = max(ay1 - ay0, by1 - by0)
            vertical_gap = max(by0 - ay1, ay0 - by1)
            horizontal_overlap = min(ax1, bx1) - max(ax0, bx0)
            if vertical_gap <= 0.9 * height and horizontal_overlap > 0:
                parent[find(j)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(lines)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: (boxes[g[0]][1], boxes[g[0]][0]))


_UNITS = {
    "%", "kg", "g", "mg", "lb", "lbs", "oz", "ml", "l", "km", "m", "cm", "mm", "mi", "ft",
    "in", "gb", "mb", "kb", "tb", "ms", "s", "sec", "min", "h", "hrs", "px", "pt", "x",
    "usd", "eur", "gbp", "jpy", "cny", "rmb", "chf", "cad", "aud", "items", "pcs",
}
_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_NUMBER = re.compile(
    r"^(?P<sign>[-+−]?)(?P<cur>[$€£¥]?)(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<unit>%|[A-Za-z]{1,5})?$"
)
# Tokens that hold digits but are not quantities: dates, times, versions, ids, phone numbers.
_NOT_QUANTITY = re.compile(
    r"^(\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}|\d{1,2}:\d{2}(:\d{2})?|"
    r"v?\d+\.\d+\.\d+.*|#.*|.*\d[-/]\d.*)$"
)


# A masked run of digits on a card or account line: "****", "xxxx", "••••".
_MASK = re.compile(r"^[*•xX#]{2,}\d*$")
# Nouns after which a number identifies something rather than measures it.
_IDENTIFIER_WORDS = frozenset({
    "visa", "mastercard", "amex", "card", "acct", "account", "ending", "iban", "no", "nr",
    "number", "tel", "phone", "fax", "mobile", "zip", "postcode", "suite", "apt", "room",
    "ref", "reference", "id", "order", "invoice", "receipt", "transaction", "txn", "auth",
    "approval", "store", "terminal", "register", "pin", "ticket", "seat", "gate", "flight",
    # A document's own numbering: "Figure 1.", "Table 2", "Vol. 12", "Page 7".
    "figure", "fig", "table", "vol", "volume", "page", "chapter", "section", "part", "step",
})
# Words that, shortly after a number, make it a street number.
_STREET_WORDS = frozenset({
    "street", "st", "avenue", "ave", "road", "rd", "boulevard", "blvd", "lane", "ln",
    "drive", "dr", "way", "court", "ct", "place", "pl", "highway", "hwy", "square", "sq",
    "terrace", "parkway", "pkwy", "alley", "plaza",
})
#: Tokens after a number within which a street word makes it an address.
_STREET_REACH = 3


def _word(token: str) -> str:
    return token.strip("()[]{}:;,.\"'").lower()


def _identifies(tokens: Sequence[str], index: int, after_digits: bool) -> bool:
    """Whether the number at ``tokens[index]`` is an identifier's digits: a mask or an
    identifier's noun just before it, a group continuing digits just before it, or a
    street word just after it."""
    if after_digits:
        return True
    if index > 0:
        before = tokens[index - 1].strip("()[]{}:;,\"'")
        if _MASK.match(before) or _word(before) in _IDENTIFIER_WORDS:
            return True
    return any(_word(t) in _STREET_WORDS for t in tokens[index + 1:index + 1 + _STREET_REACH])


@dataclass(frozen=True)
class Quantity:
    """A number read from a line, with its label, unit and the text it came from."""

    label: str
    value: float
    unit: str
    text: str


def quantities_in(text: str) -> list[Quantity]:
    """The quantities in one line of text, each with the words before it as its label:
    only where a label or a unit says what a number measures, never an identifier's digits
    (the module's docstring lists which)."""
    tokens = text.split()
    out: list[Quantity] = []
    label_words: list[str] = []
    skip = False
    after_digits = False  # the token before was an identifier's or a bare number's digits
    for index, raw in enumerate(tokens):
        if skip:  # the unit word of the previous number
            skip = False
            continue
        token = raw.strip("()[]{}:;,\"'")
        if token.endswith(".") and not token.endswith(".."):
            token = token[:-1]
        if _NOT_QUANTITY.match(token):
            label_words.append(raw)
            after_digits = False
            continue
        match = _NUMBER.match(token)
        if not match:
            label_words.append(raw)
            after_digits = bool(_MASK.match(token))
            continue
        unit = match.group("unit") or ""
        if unit and unit.lower() not in _UNITS:
            label_words.append(raw)  # e.g. "16oz" passes, "4421ab" does not
            after_digits = False
            continue
        # Identifiers are whole digit runs: a decimal amount after a card's digits is the
        # amount ("VISA **** 4821 64.03").
        digits = not unit and not match.group("cur") and "." not in match.group("num")
        if digits and _identifies(tokens, index, after_digits):
            label_words.append(raw)  # kept out of the label: it holds digits
            after_digits = True
            continue
        value = float(match.group("num").replace(",", ""))
        if match.group("sign") in ("-", "−"):
            value = -value
        cur = match.group("cur")
        if cur:
            unit = _CURRENCY[cur]
        elif not unit and index + 1 < len(tokens):
            following = tokens[index + 1].strip(".,;:")
            if following.lower() in _UNITS or following in _CURRENCY:
                unit = _CURRENCY.get(following, following)
                skip = True
        label = " ".join(w for w in label_words if not any(c.isdigit() for c in w)).strip(" :")
        after_digits = False
        if not unit and not any(c.isalpha() for c in label):
            after_digits = True  # a bare number no label names: a house number, a code
            label_words.append(raw)
            continue
        out.append(Quantity(label=label[:200], value=value, unit=unit, text=raw[:200]))
    return out


def build_evidence(
    segments: Sequence[Segment], width: int, height: int, *, min_confidence: float,
    layout: Sequence[LayoutBox] | None = (),
) -> dict[str, object]:
    """A complete ``deepseekeyes.evidence.v1`` object from OCR segments and, when the
    layout model ran, its regions: implausible detections refused, charts' ticks and values
    kept apart, lines assigned to typed regions in reading order. ``layout=None`` says the
    layout model did not run (turned off or not installed): the evidence says so."""
    assessed = layout is not None
    layout = layout or ()
    kept, refused = refuse_implausible(segments, width, height)
    figures = [i for i, box in enumerate(layout) if box.kind == "figure"]
    charts = find_charts(kept, [_layout_box(layout[i]) for i in figures])
    # A figure that is mostly its chart becomes the chart; a chart in a larger figure (a
    # dashboard's) is a region of its own, inside it.
    kinds = {
        figures[c.figure]: "chart" for c in charts
        if c.figure is not None
        and _area(c.box) >= CHART_SHARE * layout[figures[c.figure]].area
    }
    drawn = [
        LayoutBox("chart", *_within(chart.box, width, height), 0.6)
        for chart in charts
        if chart.figure is None or figures[chart.figure] not in kinds
    ]
    alone = frozenset(s for chart in charts for s in chart.segments)
    regions = arrange(
        kept, [*layout, *drawn], group_lines, group_blocks, alone=alone, kinds=kinds,
        page=(width, height),
    )
    lines = [line for region in regions for line in region.lines if line.text.strip()]
    facts: list[dict[str, object]] = chart_facts(charts, width, height)
    facts.extend(
        {
            # A bare number is labelled by its whole line, its only context.
            "label": quantity.label or clip(line.text, 200),
            "value": quantity.value,
            "unit": quantity.unit,
            "text": quantity.text,
            "bbox": norm_box(line.box, width, height),
            "confidence": unit_interval(line.confidence),
        }
        for line in lines
        if not (len(line.segments) == 1 and line.segments[0] in alone)  # a chart's own
        for quantity in quantities_in(line.text)
    )
    return {
        "schema": "deepseekeyes.evidence.v1",
        "summary": summary(regions, lines, charts, width, height, layout_assessed=assessed),
        "ocr": ocr_entries(lines, width, height),
        "regions": region_entries(regions, width, height),
        "objects": [],
        "relations": relation_entries(regions),
        "quantitative_facts": facts[:MAX_ITEMS],
        "uncertainties": gaps(
            regions, lines, refused, width, height, min_confidence=min_confidence,
            layout_assessed=assessed,
        ),
    }


#: A chart's plot covering this share of its figure makes the figure the chart.
CHART_SHARE = 0.5


def _area(box: tuple[float, float, float, float]) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _within(
    box: tuple[float, float, float, float], width: int, height: int
) -> tuple[float, float, float, float]:
    return (max(box[0], 0.0), max(box[1], 0.0), min(box[2], width), min(box[3], height))


def _layout_box(box: LayoutBox) -> tuple[float, float, float, float]:
    return (box.x0, box.y0, box.x1, box.y1)


_STOP = {
    "the", "a", "an", "is", "are", "what", "which", "who", "how", "of", "in", "on", "to",
    "does", "do", "it", "this", "that", "there", "image", "picture", "show", "shows", "say",
    "says", "and", "or", "for", "with", "at", "by", "be", "much", "many",
}
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.,%$€£-]*")


#: Words that ask about what the route does not see: it reads text, not pictures.
_UNSEEN = frozenset({
    "colour", "colours", "color", "colors", "coloured", "colored", "shape", "shapes",
    "object", "objects", "person", "people", "animal", "animals", "wearing", "tallest",
    "shortest", "biggest", "largest", "smallest", "trend", "face", "faces",
})


#: The most a reread quoting a table's cell by its row and column claims: the cell was read
#: and placed, but the question's words were matched, not understood.
TABLE_ANSWER_CAP = 0.7
#: The most it claims when several cells name the question's row and column equally well.
TABLE_AMBIGUOUS_CAP = 0.4


def _name_words(name: str) -> set[str]:
    return {w.lower().strip(".,:") for w in _WORDS.findall(name)} - _STOP


def _table_answer(
    cells: Sequence[NamedCell], asked: set[str]
) -> tuple[list[NamedCell], float] | None:
    """The cells whose row name and column header the question both names (every word of
    each), the most specific first, and how surely; ``None`` when no cell is named so."""
    scored: list[tuple[int, NamedCell]] = []
    for cell in cells:
        row, column = _name_words(cell.row), _name_words(cell.column)
        if row and column and row <= asked and column <= asked:
            scored.append((len(row) + len(column), cell))
    if not scored:
        return None
    best = max(score for score, _ in scored)
    chosen = [cell for score, cell in scored if score == best]
    if len({c.text for c in chosen}) == 1:
        return chosen[:1], min(chosen[0].confidence, TABLE_ANSWER_CAP)
    return chosen[:3], min(min(c.confidence for c in chosen), TABLE_AMBIGUOUS_CAP)


_TARGET_NOTE = (
    "A reread on the local route reads printed text and tables' rows and columns only; the "
    "page's layout, pictures, objects, colours and chart marks were not assessed."
)


def build_target(
    segments: Sequence[Segment], width: int, height: int, question: str,
    *, cells: Sequence[NamedCell] = (),
) -> dict[str, object]:
    """A ``deepseekeyes.target.v1`` answer by keyword match: the local route quotes the
    lines that share words with the question and says plainly that it cannot reason. A
    question naming a table's row and column header (``cells``: "what was Q3 in the
    North?") is answered from that cell (``North · Q3 = 1204``). With no such cell or line,
    or a question about what it does not see (colours, objects, a chart's marks), the
    answer says the route cannot answer, with confidence 0, rather than offering a guess."""
    kept, _ = refuse_implausible(segments, width, height)
    lines = [line for line in group_lines(kept) if line.text.strip()]
    asked = {w.lower().strip(".,?") for w in _WORDS.findall(question)}
    wanted = asked - _STOP - _UNSEEN
    unseen = sorted(asked & _UNSEEN)
    found = None if unseen else _table_answer(cells, asked - _STOP)
    if found is not None:
        return _table_target(found, lines, width, height)
    scored = []
    for line in lines:
        words = {w.lower().strip(".,") for w in _WORDS.findall(line.text)}
        score = len(words & wanted)
        if score:
            scored.append((score, line))
    scored.sort(key=lambda item: -item[0])
    observations = [
        {
            "text": clip(line.text, 1000),
            "bbox": norm_box(line.box, width, height),
            "confidence": unit_interval(line.confidence),
        }
        for _, line in scored[:5]
    ]
    uncertainties: list[dict[str, object]] = [
        {
            "topic": "method",
            "reason": "The local OCR route matched text to the question by shared words; "
            "it does not reason about the image. " + _TARGET_NOTE,
            "bbox": None,
        }
    ]
    if unseen:
        uncertainties.append({
            "topic": "not assessed",
            "reason": clip(
                "The question asks about what the local route does not see "
                f"({', '.join(unseen)}); only printed text was read.", 1000
            ),
            "bbox": None,
        })
    if scored and not unseen:
        best = scored[0][1]
        answer = f"The text that best matches the question reads: {clip(best.text, 500)!r}."
        confidence = round(min(best.confidence, 0.5), 4)
    elif scored:
        best = scored[0][1]
        answer = (
            "The local route cannot answer this: it reads printed text only and does not "
            f"see {', '.join(unseen)}. Related text reads: {clip(best.text, 500)!r}."
        )
        confidence = 0.0
    else:
        answer = (
            "The local route cannot answer this: no text in the image shares the "
            "question's words, and it does not see objects, colours or chart marks."
        )
        confidence = 0.0
    return {
        "schema": "deepseekeyes.target.v1",
        "answer": answer,
        "confidence": confidence,
        "observations": observations,
        "ocr": ocr_entries(lines, width, height),
        "uncertainties": uncertainties,
    }


def _table_target(
    found: tuple[list[NamedCell], float], lines: Sequence[Line], width: int, height: int
) -> dict[str, object]:
    """The reread's answer from the table cells a question named by row and column."""
    chosen, confidence = found
    said = "; ".join(f"{c.row} · {c.column} = {c.text}" for c in chosen)
    if len(chosen) == 1:
        answer = f"The table reads {clip(said, 900)!r}."
    else:
        answer = (f"Several table cells match the question's row and column: "
                  f"{clip(said, 900)!r}.")
    return {
        "schema": "deepseekeyes.target.v1",
        "answer": answer,
        "confidence": unit_interval(confidence),
        "observations": [
            {
                "text": clip(f"{c.row} · {c.column} = {c.text}", 1000),
                "bbox": norm_box(c.box, width, height),
                "confidence": unit_interval(c.confidence),
            }
            for c in chosen
        ],
        "ocr": ocr_entries(lines, width, height),
        "uncertainties": [{
            "topic": "method",
            "reason": "The local route found a table and matched the question's words to a "
            "row name and a column header; it does not reason about the image. "
            + _TARGET_NOTE,
            "bbox": None,
        }],
    }
