"""The OCR evaluation corpus (``bench/corpus``) and its line-recall metrics.

A truth line counts as *exact* when its text (whitespace collapsed) appears verbatim in the
recognised text in reading order, and as *found* when some run of recognised words of about
the same length matches it with a similarity of at least 0.9 (one misread letter in a
ten-letter word still counts as found; a missing line never does).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
FOUND_RATIO = 0.9


@dataclass(frozen=True)
class Sample:
    name: str
    kind: str
    lines: tuple[str, ...]

    @property
    def path(self) -> Path:
        return CORPUS / self.name


def samples(kind: str | None = None) -> list[Sample]:
    truth = json.loads((CORPUS / "truth.json").read_text(encoding="utf-8"))
    out = [Sample(name, t["kind"], tuple(t["lines"])) for name, t in sorted(truth.items())]
    return [s for s in out if kind is None or s.kind == kind]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def line_found(line: str, recognised: str) -> tuple[bool, bool]:
    """(exact, found) for one truth line against the recognised text."""
    want = _norm(line)
    have = _norm(recognised)
    if want in have:
        return True, True
    words = have.split(" ")
    size = len(want.split(" "))
    best = 0.0
    for n in (size - 1, size, size + 1):
        if n < 1:
            continue
        for start in range(max(1, len(words) - n + 1)):
            window = " ".join(words[start : start + n])
            if abs(len(window) - len(want)) > max(4, len(want) // 5):
                continue
            best = max(best, SequenceMatcher(None, want, window).ratio())
    return False, best >= FOUND_RATIO


@dataclass
class Score:
    lines: int = 0
    exact: int = 0
    found: int = 0

    def add(self, sample: Sample, recognised: str) -> list[str]:
        missed = []
        for line in sample.lines:
            exact, found = line_found(line, recognised)
            self.lines += 1
            self.exact += exact
            self.found += found
            if not found:
                missed.append(line)
        return missed

    def text(self) -> str:
        return (
            f"found={self.found}/{self.lines} ({self.found / max(self.lines, 1):.1%}) "
            f"exact={self.exact}/{self.lines} ({self.exact / max(self.lines, 1):.1%})"
        )
