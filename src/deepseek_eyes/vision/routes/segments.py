"""What OCR hands on: one detection (a Segment) and a line of them (a Line), in pixels.

Their own module so that every stage after the engine (plausibility, charts, structure,
layout) can share them without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Line", "NamedCell", "Segment"]


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


@dataclass(frozen=True)
class NamedCell:
    """A table's body cell with the names of its row and column (``North``, ``Q3``), in
    pixels: what a reread answers "what was Q3 in the North?" from."""

    row: str
    column: str
    text: str
    box: tuple[float, float, float, float]
    confidence: float
