"""From OCR text segments to full evidence: lines, blocks, numbers and doubts.

The local route sees text and nothing else, and the evidence it builds says exactly that:
OCR lines with their boxes and confidence, text blocks as regions, each quantity a label
names (with its unit) as a quantitative fact, low-confidence lines as uncertainties, and a
standing uncertainty that pictures and objects were not assessed. It never invents an
object or a relation it did not measure (the only relations are the blocks' layout).

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

__all__ = [
    "Line",
    "Segment",
    "build_evidence",
    "build_target",
    "group_blocks",
    "group_lines",
    "quantities_in",
]

MAX_OCR = 2000
MAX_ITEMS = 500
MAX_TEXT = 2000


@dataclass(frozen=True)
class Segment:
    """One OCR detection, in pixels."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    confidence: float

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass(frozen=True)
class Line:
    """One text line: its OCR segments in reading order."""

    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.segments)

    @property
    def box(self) -> tuple[float, float, float, float]:
        return (
            min(s.x0 for s in self.segments),
            min(s.y0 for s in self.segments),
            max(s.x1 for s in self.segments),
            max(s.y1 for s in self.segments),
        )

    @property
    def confidence(self) -> float:
        weights = [max(len(s.text), 1) for s in self.segments]
        total = sum(w * s.confidence for w, s in zip(weights, self.segments, strict=True))
        return total / sum(weights)

    @property
    def height(self) -> float:
        box = self.box
        return box[3] - box[1]


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


def _norm_box(
    box: tuple[float, float, float, float], width: int, height: int
) -> list[float]:
    x0 = min(max(box[0], 0.0), width - 1.0)
    y0 = min(max(box[1], 0.0), height - 1.0)
    x1 = min(max(box[2], x0 + 1.0), float(width))
    y1 = min(max(box[3], y0 + 1.0), float(height))
    return [
        round(x0 / width, 6),
        round(y0 / height, 6),
        round((x1 - x0) / width, 6),
        round((y1 - y0) / height, 6),
    ]


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ocr_entries(lines: Sequence[Line], width: int, height: int) -> list[dict[str, object]]:
    return [
        {
            "text": _clip(line.text),
            "bbox": _norm_box(line.box, width, height),
            "confidence": round(min(max(line.confidence, 0.0), 1.0), 4),
        }
        for line in lines[:MAX_OCR]
        if line.text.strip()
    ]


TEXT_ONLY_NOTE = (
    "The local OCR route reads printed text only; pictures, objects, colours and layout "
    "meaning were not assessed."
)


def build_evidence(
    segments: Sequence[Segment], width: int, height: int, *, min_confidence: float
) -> dict[str, object]:
    """A complete ``deepseekeyes.evidence.v1`` object from OCR segments."""
    lines = [line for line in group_lines(segments) if line.text.strip()]
    blocks = group_blocks(lines)
    regions: list[dict[str, object]] = []
    region_boxes: list[list[float]] = []
    relations: list[dict[str, object]] = []
    for number, members in enumerate(blocks[:MAX_ITEMS], start=1):
        block_lines = [lines[i] for i in members]
        box = (
            min(line.box[0] for line in block_lines),
            min(line.box[1] for line in block_lines),
            max(line.box[2] for line in block_lines),
            max(line.box[3] for line in block_lines),
        )
        confidence = sum(line.confidence for line in block_lines) / len(block_lines)
        region_boxes.append(_norm_box(box, width, height))
        regions.append({
            "id": f"r{number}",
            "kind": "text_block",
            "label": _clip(block_lines[0].text, 120),
            "bbox": region_boxes[-1],
            "confidence": round(min(max(confidence, 0.0), 1.0), 4),
        })
    for index in range(1, min(len(regions), MAX_ITEMS + 1)):
        a, b = region_boxes[index - 1], region_boxes[index]
        predicate = "below" if b[1] >= a[1] + a[3] - 1e-6 else "beside"
        relations.append({
            "subject": f"r{index + 1}", "predicate": predicate, "object": f"r{index}",
            "confidence": 0.9,
        })

    facts: list[dict[str, object]] = []
    for line in lines:
        for quantity in quantities_in(line.text):
            if len(facts) >= MAX_ITEMS:
                break
            facts.append({
                # A bare number is labelled by its whole line, its only context.
                "label": quantity.label or _clip(line.text, 200),
                "value": quantity.value,
                "unit": quantity.unit,
                "text": quantity.text,
                "bbox": _norm_box(line.box, width, height),
                "confidence": round(min(max(line.confidence, 0.0), 1.0), 4),
            })

    uncertainties: list[dict[str, object]] = [
        {"topic": "coverage", "reason": TEXT_ONLY_NOTE, "bbox": None}
    ]
    for line in lines:
        if len(uncertainties) >= MAX_ITEMS:
            break
        if line.confidence < min_confidence:
            uncertainties.append({
                "topic": "low-confidence text",
                "reason": _clip(
                    f"read as {line.text!r} with confidence {line.confidence:.2f}", 400
                ),
                "bbox": _norm_box(line.box, width, height),
            })

    if lines:
        head = "; ".join(repr(_clip(line.text, 80)) for line in lines[:3])
        summary = (
            f"Local OCR read {len(lines)} text line(s) in {len(regions)} block(s) on a "
            f"{width}x{height} image. First lines: {head}."
        )
    else:
        summary = f"Local OCR found no legible text on a {width}x{height} image."
    return {
        "schema": "deepseekeyes.evidence.v1",
        "summary": _clip(summary, 4000),
        "ocr": _ocr_entries(lines, width, height),
        "regions": regions,
        "objects": [],
        "relations": relations,
        "quantitative_facts": facts,
        "uncertainties": uncertainties,
    }


_STOP = {
    "the", "a", "an", "is", "are", "what", "which", "who", "how", "of", "in", "on", "to",
    "does", "do", "it", "this", "that", "there", "image", "picture", "show", "shows", "say",
    "says", "and", "or", "for", "with", "at", "by", "be", "much", "many",
}
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.,%$€£-]*")


def build_target(
    segments: Sequence[Segment], width: int, height: int, question: str
) -> dict[str, object]:
    """A ``deepseekeyes.target.v1`` answer by keyword match: the local route quotes the
    lines that share words with the question and says plainly that it cannot reason."""
    lines = [line for line in group_lines(segments) if line.text.strip()]
    wanted = {w.lower().strip(".,") for w in _WORDS.findall(question)} - _STOP
    scored = []
    for line in lines:
        words = {w.lower().strip(".,") for w in _WORDS.findall(line.text)}
        score = len(words & wanted)
        if score:
            scored.append((score, line))
    scored.sort(key=lambda item: -item[0])
    observations = [
        {
            "text": _clip(line.text, 1000),
            "bbox": _norm_box(line.box, width, height),
            "confidence": round(min(max(line.confidence, 0.0), 1.0), 4),
        }
        for _, line in scored[:5]
    ]
    if scored:
        best = scored[0][1]
        answer = f"The text that best matches the question reads: {_clip(best.text, 500)!r}."
        confidence = round(min(best.confidence, 0.5), 4)
    else:
        answer = "No text in the image matches the question's words."
        confidence = 0.2
    return {
        "schema": "deepseekeyes.target.v1",
        "answer": answer,
        "confidence": confidence,
        "observations": observations,
        "ocr": _ocr_entries(lines, width, height),
        "uncertainties": [
            {
                "topic": "method",
                "reason": "The local OCR route matched text to the question by shared words; "
                "it does not reason about the image. " + TEXT_ONLY_NOTE,
                "bbox": None,
            }
        ],
    }
