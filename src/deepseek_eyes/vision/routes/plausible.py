"""OCR detections that cannot be text, refused before they become evidence.

The detector finds text-like texture and the recognizer always returns *some* string for
it: on a photo that gave one line ``·`` at 0.78 covering 95%x80% of the frame, presented
as evidence. A detection is refused when its string and its box disagree, judged by three
measures a printed line satisfies whatever its font:

* **Symbols only.** No letter or digit, read with less than high confidence: noise read as
  punctuation (a confident ``—`` or ``•`` stays).
* **Glyph size.** A line's glyphs are about as wide as it is tall (0.12-3 line heights
  each, which covers condensed, monospaced, wide and CJK faces); a string whose glyph count
  does not fill its box that way was not read from it.
* **Rotated or vast.** The recognizer reads across: a box much taller than wide holding
  several glyphs is vertical or rotated text it misread (a chart's axis title), and a
  short string on a box a fifth of the image or more is a texture, unless read with high
  confidence (a poster's one big word).

A refusal is kept, with its reason and box, for the evidence's uncertainties: the route
says what it declined to read rather than dropping it silently. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deepseek_eyes.vision.routes.segments import Segment

__all__ = ["Refusal", "refuse_implausible"]

#: Confidence at and above which a detection is trusted whatever its shape.
TRUSTED = 0.9
MIN_GLYPH_WIDTH = 0.12  # in line heights
MAX_GLYPH_WIDTH = 3.0
#: A box this share of the image's area or more, holding a short string, is a texture.
VAST_AREA = 0.2
SHORT = 4


@dataclass(frozen=True)
class Refusal:
    segment: Segment
    reason: str


def _glyphs(text: str) -> int:
    return sum(1 for c in text if not c.isspace())


def judge(segment: Segment, width: int, height: int) -> str | None:
    """Why ``segment`` is not plausible text on a ``width`` x ``height`` image, or None."""
    text = segment.text
    glyphs = _glyphs(text)
    box_w = max(segment.x1 - segment.x0, 1e-6)
    box_h = max(segment.y1 - segment.y0, 1e-6)
    share = (box_w * box_h) / max(width * height, 1)
    trusted = segment.confidence >= TRUSTED
    if glyphs == 0:
        return "an empty read"
    if not any(c.isalnum() for c in text) and not trusted:
        return "symbols only, no letter or digit"
    if not trusted and box_h > 2 * box_w and glyphs > 1:
        return "a box much taller than wide: vertical or rotated text, not read reliably"
    if not trusted and share >= VAST_AREA and glyphs <= SHORT:
        return f"{glyphs} glyph(s) over {share:.0%} of the image"
    if box_w >= box_h:  # a line read across: glyphs about a line height wide each
        per_glyph = box_w / glyphs / box_h
        # A confident read gets slack: detection boxes carry padding, most on short reads.
        if per_glyph > (3 * MAX_GLYPH_WIDTH if trusted else MAX_GLYPH_WIDTH):
            return f"{glyphs} glyph(s) cannot fill a box {box_w / box_h:.1f} line heights wide"
        if per_glyph < MIN_GLYPH_WIDTH:
            return f"{glyphs} glyphs cannot fit in a box {box_w / box_h:.1f} line heights wide"
    return None


def refuse_implausible(
    segments: Sequence[Segment], width: int, height: int
) -> tuple[list[Segment], list[Refusal]]:
    """The segments kept and those refused, each refusal with its reason."""
    kept: list[Segment] = []
    refused: list[Refusal] = []
    for segment in segments:
        reason = judge(segment, width, height)
        if reason is None:
            kept.append(segment)
        else:
            refused.append(Refusal(segment, reason))
    return kept, refused
